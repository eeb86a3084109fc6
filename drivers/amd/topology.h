// KFD's sysfs topology: the GPU nodes under /sys/devices/virtual/kfd/kfd/topology/nodes, each
// with its gpu_id (0 for CPU nodes) and the "name value" lines of its properties file. The
// parsers take the file text (unit-testable); read_kfd_topology() reads the files through an
// hcq::Os. Errors name the path and what was wrong with it.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "hcq/os.h"

namespace baregrad::amd {

constexpr const char* kKfdTopologyNodesPath = "/sys/devices/virtual/kfd/kfd/topology/nodes";

// The properties of a GPU node that drivers/amd uses (names as in the properties file).
struct KfdNodeProperties {
  uint32_t gfx_target_version = 0;  // major * 10000 + minor * 100 + stepping: 110000 = gfx1100
  uint32_t drm_render_minor = 0;    // /dev/dri/renderD<minor>
  uint32_t simd_count = 0;
  uint32_t array_count = 0;
  uint32_t simd_arrays_per_engine = 0;
  uint32_t cu_per_simd_array = 0;
  uint32_t max_waves_per_simd = 0;
  uint32_t simd_per_cu = 0;
  uint32_t lds_size_in_kb = 0;
  uint32_t wave_front_size = 0;
  uint32_t num_xcc = 1;  // older KFDs do not print it: one XCC
  uint32_t max_slots_scratch_cu = 0;
  uint32_t vendor_id = 0;
  uint32_t device_id = 0;
  uint64_t local_mem_size = 0;  // bytes of the frame-buffer heaps in mem_banks/ (0: unknown)
};

// One GPU node, in node order.
struct KfdGpuNode {
  uint32_t node = 0;  // the directory name under nodes/
  uint32_t gpu_id = 0;
  KfdNodeProperties props;
};

using KfdPropertyMap = std::map<std::string, uint64_t, std::less<>>;

// Every "name value" line of a properties file (decimal values); InvalidArgument naming `path`
// and the line for one that is not, or for a name given twice.
Result<KfdPropertyMap> parse_kfd_properties(std::string_view text, std::string_view path);
// The GPU properties of a node's properties file; InvalidArgument naming `path` and the name of
// a missing property or one too large for its field.
Result<KfdNodeProperties> parse_kfd_node_properties(std::string_view text, std::string_view path);
// The decimal gpu_id file ("4660\n"); 0 for a CPU node.
Result<uint32_t> parse_kfd_gpu_id(std::string_view text, std::string_view path);
// Frame-buffer bytes of one mem_banks/<n>/properties: size_in_bytes when heap_type is
// HSA_HEAPTYPE_FRAME_BUFFER_PUBLIC (1) or _PRIVATE (2), else 0.
Result<uint64_t> parse_kfd_mem_bank_bytes(std::string_view text, std::string_view path);

// "gfx1100" for 110000, "gfx90a" for 90010, "gfx942" for 90402 (minor and stepping in hex).
std::string gfx_arch_name(uint32_t gfx_target_version);

// The GPU nodes (non-zero gpu_id) in node order. A node whose gpu_id cannot be read (a GPU
// the device cgroup hides: EPERM) is skipped; a malformed file is an error naming it.
Result<std::vector<KfdGpuNode>> read_kfd_topology(hcq::Os& os);

}  // namespace baregrad::amd
