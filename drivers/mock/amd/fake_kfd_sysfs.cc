// FakeKfd's GPU presets and the sysfs topology it serves (KFD's node properties files).

#include <cstdio>
#include <string>

#include "base/check.h"
#include "drivers/amd/topology.h"
#include "drivers/mock/amd/fake_kfd_state.h"

namespace baregrad::mock {
namespace {

// "name value\n" lines in the order kfd_topology.c node_show() prints them (values that
// drivers/amd does not read are plausible constants).
std::string gpu_properties(const FakeAmdGpuConfig& g, uint32_t node, uint32_t minor) {
  const std::pair<const char*, uint64_t> lines[] = {
      {"cpu_cores_count", 0},
      {"simd_count", g.simd_count},
      {"mem_banks_count", 1},
      {"caches_count", 0},
      {"io_links_count", 1},
      {"p2p_links_count", 0},
      {"cpu_core_id_base", 0},
      {"simd_id_base", 0x80001000ull + 0x100 * node},
      {"max_waves_per_simd", g.max_waves_per_simd},
      {"lds_size_in_kb", g.lds_size_in_kb},
      {"gds_size_in_kb", 0},
      {"num_gws", 64},
      {"wave_front_size", g.wave_front_size},
      {"array_count", g.array_count},
      {"simd_arrays_per_engine", g.simd_arrays_per_engine},
      {"cu_per_simd_array", g.cu_per_simd_array},
      {"simd_per_cu", g.simd_per_cu},
      {"max_slots_scratch_cu", g.max_slots_scratch_cu},
      {"gfx_target_version", g.gfx_target_version},
      {"vendor_id", g.vendor_id},
      {"device_id", g.device_id},
      {"location_id", 0x300 + 0x100 * node},
      {"domain", 0},
      {"drm_render_minor", minor},
      {"hive_id", 0},
      {"num_sdma_engines", 2},
      {"num_sdma_xgmi_engines", 0},
      {"num_sdma_queues_per_engine", 6},
      {"num_cp_queues", 8},
      {"max_engine_clk_fcompute", 2500},
      {"local_mem_size", 0},
      {"fw_version", 2232},
      {"capability", 0x28a3280},
      {"debug_prop", 0x427},
      {"sdma_fw_version", 21},
      {"unique_id", 0x1234567800000000ull + node},
      {"num_xcc", g.num_xcc},
      {"max_engine_clk_ccompute", 3000},
  };
  std::string out;
  for (const auto& [name, value] : lines)
    out += std::string(name) + " " + std::to_string(value) + "\n";
  return out;
}

std::string mem_bank(uint64_t heap_type, uint64_t bytes) {
  return "heap_type " + std::to_string(heap_type) + "\nsize_in_bytes " + std::to_string(bytes) +
         "\nflags 0\nwidth 64\nmem_clk_max 1000\n";
}

}  // namespace

FakeAmdGpuConfig FakeAmdGpuConfig::preset(std::string_view target) {
  FakeAmdGpuConfig c;
  c.name = std::string(target);
  if (target == "gfx90a") {
    c.gfx_target_version = 90010, c.device_id = 0x740f, c.vram_bytes = 64ull << 30;
    c.simd_count = 416, c.array_count = 8, c.simd_arrays_per_engine = 1, c.cu_per_simd_array = 13;
    c.simd_per_cu = 4, c.max_waves_per_simd = 8, c.wave_front_size = 64;
  } else if (target == "gfx942") {
    c.gfx_target_version = 90402, c.device_id = 0x74a1, c.vram_bytes = 192ull << 30;
    c.simd_count = 1216, c.array_count = 32, c.simd_arrays_per_engine = 1, c.cu_per_simd_array = 10;
    c.simd_per_cu = 4, c.max_waves_per_simd = 8, c.wave_front_size = 64, c.num_xcc = 8;
  } else if (target == "gfx1201") {
    c.gfx_target_version = 120001, c.device_id = 0x7550, c.vram_bytes = 16ull << 30;
    c.simd_count = 128, c.array_count = 8;
  } else {
    CHECK(target == "gfx1100") << "no FakeAmdGpuConfig preset for " << target;
  }
  return c;
}

int FakeKfd::State::sysfs_read(const std::string& path, std::string* out) const {
  std::string nodes = std::string(amd::kKfdTopologyNodesPath) + "/";
  if (!path.starts_with(nodes)) return ENOENT;
  unsigned node = 0;
  char rest[64] = {};
  if (std::sscanf(path.c_str() + nodes.size(), "%u/%63s", &node, rest) != 2) return ENOENT;
  std::string file = rest;
  if (node > gpus.size()) return ENOENT;
  const KfdGpuState* g = node == 0 ? nullptr : &gpus[node - 1];
  if (file == "gpu_id") {
    *out = std::to_string(g != nullptr ? g->gpu_id : 0) + "\n";
  } else if (file == "properties") {
    *out = g != nullptr ? gpu_properties(g->cfg, node, 128 + node - 1)
                        : "cpu_cores_count 16\nsimd_count 0\nmem_banks_count 1\n";
  } else if (file == "mem_banks/0/properties") {
    *out = g != nullptr ? mem_bank(1, g->cfg.vram_bytes) : mem_bank(0, 64ull << 30);
  } else {
    return ENOENT;
  }
  return 0;
}

int FakeKfd::State::sysfs_list(const std::string& path, std::vector<std::string>* out) const {
  std::string nodes = amd::kKfdTopologyNodesPath;
  if (path == nodes) {
    for (size_t n = 0; n <= gpus.size(); ++n) out->push_back(std::to_string(n));
    return 0;
  }
  unsigned node = 0;
  char rest[64] = {};
  if (path.starts_with(nodes + "/") &&
      std::sscanf(path.c_str() + nodes.size() + 1, "%u/%63s", &node, rest) == 2 &&
      node <= gpus.size() && std::string(rest) == "mem_banks") {
    out->push_back("0");
    return 0;
  }
  return ENOENT;
}

}  // namespace baregrad::mock
