// The device registry: DEV= names to devices.
#include <map>
#include <mutex>

#include "base/options.h"
#include "runtime/cpu/cpu_device.h"
#include "runtime/cuda/cuda_device.h"
#include "runtime/device.h"
#include "runtime/nv/nv_device.h"

namespace baregrad::runtime {
namespace {

// "NV" -> 0, "NV:3" -> 3 for `prefix` "NV"; nullopt when `n` is not that device or the index
// is not a small non-negative number.
std::optional<int> indexed(std::string_view n, std::string_view prefix) {
  if (n.substr(0, prefix.size()) != prefix) return std::nullopt;
  std::string_view rest = n.substr(prefix.size());
  if (rest.empty()) return 0;
  if (rest[0] != ':' || rest.size() < 2 || rest.size() > 4) return std::nullopt;
  int i = 0;
  for (char c : rest.substr(1)) {
    if (c < '0' || c > '9') return std::nullopt;
    i = i * 10 + (c - '0');
  }
  return i;
}

}  // namespace

std::vector<std::string> device_names() {
  return {"CPU", "CPU:C", "NULL", "NV", "NV:<n>", "MOCK+NV", "MOCK+NV:<n>", "CUDA", "CUDA:<n>"};
}

Result<std::shared_ptr<Device>> open_device(std::string_view name) {
  std::string n(name.empty() ? std::string_view(options().dev) : name);
  if (n.empty() || n == "CPU") return std::shared_ptr<Device>(new CpuDevice(CpuBackend::kLlvm));
  if (n == "CPU:C") return std::shared_ptr<Device>(new CpuDevice(CpuBackend::kClang));
  if (n == "NULL") return std::shared_ptr<Device>(new CpuDevice(CpuBackend::kLlvm, 0, true));
  if (auto i = indexed(n, "MOCK+NV")) return NvRuntimeDevice::open(*i, true);
  if (auto i = indexed(n, "NV")) return NvRuntimeDevice::open(*i, false);
  if (std::optional<int> ord = CudaDevice::ordinal_of(n)) {
    ASSIGN_OR_RETURN(std::unique_ptr<CudaDevice> d, CudaDevice::create(*ord));
    return std::shared_ptr<Device>(std::move(d));
  }
  std::string known;
  for (auto& d : device_names()) known += (known.empty() ? "" : ", ") + d;
  return not_found("no device named '" + n + "' (this build has: " + known + ")");
}

Result<std::shared_ptr<Device>> get_device(std::string_view name) {
  static std::mutex mu;
  static std::map<std::string, std::shared_ptr<Device>, std::less<>> devices;
  std::string key(name.empty() ? std::string_view(options().dev) : name);
  if (key.empty()) key = "CPU";
  std::lock_guard lock(mu);
  if (auto it = devices.find(key); it != devices.end()) return it->second;
  ASSIGN_OR_RETURN(std::shared_ptr<Device> dev, open_device(key));
  devices.emplace(key, dev);
  return dev;
}

}  // namespace baregrad::runtime
