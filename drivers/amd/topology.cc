// Parsing KFD's sysfs topology.

#include "drivers/amd/topology.h"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <utility>

#include "base/log.h"

namespace baregrad::amd {
namespace {

std::string node_dir(uint32_t node) {
  return std::string(kKfdTopologyNodesPath) + "/" + std::to_string(node);
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ' || s.back() == '\r'))
    s.remove_suffix(1);
  while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
  return s;
}

bool parse_u64(std::string_view s, uint64_t& out) {
  if (s.empty()) return false;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && end == s.data() + s.size();
}

Status get_u32(const KfdPropertyMap& m,
               std::string_view name,
               std::string_view path,
               uint32_t& out,
               bool required = true) {
  auto it = m.find(name);
  if (it == m.end()) {
    if (!required) return Status();
    return invalid_argument(std::string(path) + ": no '" + std::string(name) + "' property");
  }
  if (it->second > UINT32_MAX) {
    return invalid_argument(std::string(path) + ": '" + std::string(name) + " " +
                            std::to_string(it->second) + "' does not fit 32 bits");
  }
  out = static_cast<uint32_t>(it->second);
  return Status();
}

// Frame-buffer bytes of every mem_banks/<n> of `node`; 0 when there is no mem_banks directory.
Result<uint64_t> read_local_mem(hcq::Os& os, uint32_t node) {
  std::string dir = node_dir(node) + "/mem_banks";
  Result<std::vector<std::string>> banks = os.list_dir(dir);
  if (!banks.ok()) return uint64_t{0};
  uint64_t total = 0;
  for (const std::string& b : *banks) {
    std::string path = dir + "/" + b + "/properties";
    ASSIGN_OR_RETURN(std::string text, os.read_file(path));
    ASSIGN_OR_RETURN(uint64_t bytes, parse_kfd_mem_bank_bytes(text, path));
    total += bytes;
  }
  return total;
}

}  // namespace

Result<KfdPropertyMap> parse_kfd_properties(std::string_view text, std::string_view path) {
  KfdPropertyMap m;
  int line_no = 0;
  while (!text.empty()) {
    size_t eol = text.find('\n');
    std::string_view line = text.substr(0, eol);
    text.remove_prefix(eol == std::string_view::npos ? text.size() : eol + 1);
    ++line_no;
    if (trim(line).empty()) continue;
    size_t sp = line.find(' ');
    uint64_t value = 0;
    if (sp == std::string_view::npos || sp == 0 || !parse_u64(trim(line.substr(sp + 1)), value)) {
      return invalid_argument(std::string(path) + ": line " + std::to_string(line_no) + " '" +
                              std::string(line) + "' is not '<name> <decimal>'");
    }
    std::string name(line.substr(0, sp));
    if (!m.emplace(name, value).second) {
      return invalid_argument(std::string(path) + ": '" + name + "' given twice");
    }
  }
  return m;
}

Result<KfdNodeProperties> parse_kfd_node_properties(std::string_view text, std::string_view path) {
  ASSIGN_OR_RETURN(KfdPropertyMap m, parse_kfd_properties(text, path));
  KfdNodeProperties p;
  const std::pair<const char*, uint32_t*> required[] = {
      {"gfx_target_version", &p.gfx_target_version},
      {"drm_render_minor", &p.drm_render_minor},
      {"simd_count", &p.simd_count},
      {"array_count", &p.array_count},
      {"simd_arrays_per_engine", &p.simd_arrays_per_engine},
      {"cu_per_simd_array", &p.cu_per_simd_array},
      {"max_waves_per_simd", &p.max_waves_per_simd},
      {"simd_per_cu", &p.simd_per_cu},
      {"lds_size_in_kb", &p.lds_size_in_kb},
      {"wave_front_size", &p.wave_front_size},
      {"max_slots_scratch_cu", &p.max_slots_scratch_cu},
      {"vendor_id", &p.vendor_id},
      {"device_id", &p.device_id},
  };
  for (const auto& [name, field] : required) RETURN_IF_ERROR(get_u32(m, name, path, *field));
  RETURN_IF_ERROR(get_u32(m, "num_xcc", path, p.num_xcc, /*required=*/false));
  if (p.num_xcc == 0) return invalid_argument(std::string(path) + ": 'num_xcc 0'");
  return p;
}

Result<uint32_t> parse_kfd_gpu_id(std::string_view text, std::string_view path) {
  uint64_t id = 0;
  if (!parse_u64(trim(text), id) || id > UINT32_MAX) {
    return invalid_argument(std::string(path) + ": '" + std::string(trim(text)) +
                            "' is not a decimal gpu_id");
  }
  return static_cast<uint32_t>(id);
}

Result<uint64_t> parse_kfd_mem_bank_bytes(std::string_view text, std::string_view path) {
  ASSIGN_OR_RETURN(KfdPropertyMap m, parse_kfd_properties(text, path));
  auto heap = m.find("heap_type");
  auto size = m.find("size_in_bytes");
  if (heap == m.end() || size == m.end()) {
    return invalid_argument(std::string(path) + ": no 'heap_type' or 'size_in_bytes' property");
  }
  bool frame_buffer = heap->second == 1 || heap->second == 2;
  return frame_buffer ? size->second : 0;
}

std::string gfx_arch_name(uint32_t v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "gfx%u%x%x", v / 10000, (v / 100) % 100, v % 100);
  return buf;
}

Result<std::vector<KfdGpuNode>> read_kfd_topology(hcq::Os& os) {
  ASSIGN_OR_RETURN(std::vector<std::string> names, os.list_dir(kKfdTopologyNodesPath));
  std::vector<uint32_t> nodes;
  for (const std::string& n : names) {
    uint64_t v = 0;
    if (parse_u64(n, v) && v <= UINT32_MAX) nodes.push_back(static_cast<uint32_t>(v));
  }
  std::sort(nodes.begin(), nodes.end());
  std::vector<KfdGpuNode> gpus;
  for (uint32_t node : nodes) {
    std::string id_path = node_dir(node) + "/gpu_id";
    Result<std::string> id_text = os.read_file(id_path);
    if (!id_text.ok()) {
      BG_LOG(1) << "amd: skipping KFD node " << node << ": " << id_text.status().message();
      continue;
    }
    ASSIGN_OR_RETURN(uint32_t gpu_id, parse_kfd_gpu_id(*id_text, id_path));
    if (gpu_id == 0) continue;  // a CPU node
    std::string props_path = node_dir(node) + "/properties";
    ASSIGN_OR_RETURN(std::string props_text, os.read_file(props_path));
    KfdGpuNode g{node, gpu_id, {}};
    ASSIGN_OR_RETURN(g.props, parse_kfd_node_properties(props_text, props_path));
    ASSIGN_OR_RETURN(g.props.local_mem_size, read_local_mem(os, node));
    gpus.push_back(std::move(g));
  }
  return gpus;
}

}  // namespace baregrad::amd
