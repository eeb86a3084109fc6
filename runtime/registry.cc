// The device registry: DEV= names to devices.
#include <map>
#include <mutex>

#include "base/options.h"
#include "runtime/cpu/cpu_device.h"
#include "runtime/device.h"

namespace baregrad::runtime {

std::vector<std::string> device_names() { return {"CPU", "CPU:C", "NULL"}; }

Result<std::shared_ptr<Device>> open_device(std::string_view name) {
  std::string n(name.empty() ? std::string_view(options().dev) : name);
  if (n.empty() || n == "CPU") return std::shared_ptr<Device>(new CpuDevice(CpuBackend::kLlvm));
  if (n == "CPU:C") return std::shared_ptr<Device>(new CpuDevice(CpuBackend::kClang));
  if (n == "NULL") return std::shared_ptr<Device>(new CpuDevice(CpuBackend::kLlvm, 0, true));
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
