// Chrome trace (JSON) output of profiled submissions.
#include <algorithm>
#include <cstdio>
#include <fstream>

#include "hcq/hcq.h"

namespace baregrad::hcq {
namespace {
std::string json_string(std::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\u%04x", c);
      out += buf;
    } else {
      out += c;
    }
  }
  return out + "\"";
}
}  // namespace

Status write_chrome_trace(
    const std::string& path,
    const std::vector<std::pair<std::string, std::vector<Device::ProfileEvent>>>& devices) {
  std::ofstream f(path, std::ios::trunc);
  if (!f) return errno_error("open(\"" + path + "\") for the trace", errno);
  // Times relative to the earliest event, in microseconds.
  uint64_t t0 = UINT64_MAX;
  for (auto& [name, events] : devices)
    for (auto& e : events) t0 = std::min(t0, e.start_ns);
  f << "{\"displayTimeUnit\": \"ns\", \"traceEvents\": [\n";
  bool first = true;
  auto sep = [&] {
    if (!first) f << ",\n";
    first = false;
  };
  for (size_t pid = 0; pid < devices.size(); pid++) {
    const auto& [name, events] = devices[pid];
    sep();
    f << "{\"ph\": \"M\", \"name\": \"process_name\", \"pid\": " << pid
      << ", \"args\": {\"name\": " << json_string(name) << "}}";
    for (int tid = 0; tid < 2; tid++) {
      sep();
      f << "{\"ph\": \"M\", \"name\": \"thread_name\", \"pid\": " << pid << ", \"tid\": " << tid
        << ", \"args\": {\"name\": \"" << (tid == 0 ? "compute queue" : "copy queue") << "\"}}";
    }
    for (const auto& e : events) {
      sep();
      double ts = static_cast<double>(e.start_ns - t0) / 1000;
      double dur = static_cast<double>(e.end_ns >= e.start_ns ? e.end_ns - e.start_ns : 0) / 1000;
      f << "{\"ph\": \"X\", \"name\": " << json_string(e.name) << ", \"pid\": " << pid
        << ", \"tid\": " << (e.engine == Engine::kCompute ? 0 : 1) << ", \"ts\": " << ts
        << ", \"dur\": " << dur << "}";
    }
  }
  f << "\n]}\n";
  f.close();
  if (!f) return errno_error("write of the trace \"" + path + "\"", errno);
  return Status();
}

}  // namespace baregrad::hcq
