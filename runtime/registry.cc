// The device table: DEV= names to devices, one line per name pattern.
#include <functional>
#include <map>
#include <mutex>
#include <thread>

#include "base/options.h"
#include "compiler/target/amd_target.h"
#include "compiler/target/cpu_target.h"
#include "compiler/target/nv_target.h"
#include "drivers/amd/device.h"
#include "drivers/cpu/device.h"
#include "drivers/mock/amd_device/twin_target.h"
#include "drivers/mock/nv_device/twin_target.h"
#include "drivers/null/device.h"
#include "drivers/nv/device.h"
#include "hcq/os.h"
#include "runtime/cl/cl_device.h"
#include "runtime/cuda/cuda_device.h"
#include "runtime/device.h"
#include "runtime/hcq_device.h"

namespace baregrad::runtime {
namespace {

using Opened = Result<std::shared_ptr<Device>>;

// One line of the table: `pattern` is the name, or with `indexed` the name alone (index 0)
// or followed by ":<n>" for n in [0, 999].
struct DeviceLine {
  std::string_view pattern;
  bool indexed;
  std::function<Opened(const std::string& name, int index)> open;
};

int cpu_threads() {
  if (options().threads > 0) return options().threads;
  return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

Opened hcq_device(const std::string& name,
                  std::unique_ptr<compiler::Target> target,
                  std::unique_ptr<hcq::Device> dev) {
  return std::shared_ptr<Device>(new HcqDevice(name, std::move(target), std::move(dev)));
}

Opened open_cpu(const std::string& name, compiler::CpuCompiler compiler) {
  int threads = cpu_threads();
  ASSIGN_OR_RETURN(std::unique_ptr<cpu::Device> dev, cpu::Device::create(threads, name));
  return hcq_device(name, std::make_unique<compiler::CpuTarget>(compiler, threads), std::move(dev));
}

Opened open_nv(const std::string& name, int index) {
  nv::DeviceOptions options;
  options.name = name;
  ASSIGN_OR_RETURN(std::unique_ptr<nv::Device> dev,
                   nv::Device::create(hcq::unowned(hcq::linux_os()), index, options));
  const std::string& arch = dev->info().arch;  // "sm_90"
  Result<std::unique_ptr<compiler::NvTarget>> target =
      arch.compare(0, 3, "sm_") == 0 && arch.size() > 3 &&
              arch.find_first_not_of("0123456789", 3) == std::string::npos
          ? compiler::NvTarget::create(std::stoi(arch.substr(3)))
          : Result<std::unique_ptr<compiler::NvTarget>>(
                invalid_argument("nv: unknown GPU architecture '" + arch + "'"));
  if (!target.ok())
    return Status(target.status().code(),
                  name + " (" + dev->info().name + ", " + arch + "): " + target.status().message());
  return hcq_device(name, std::move(*target), std::move(dev));
}

// The options of an AMD device named `name`: AMD_AQL picks its compute queue.
Result<amd::DeviceOptions> amd_options(const std::string& name) {
  amd::DeviceOptions options;
  options.name = name;
  Result<amd::ComputeQueueMode> mode = amd::compute_queue_mode(baregrad::options().amd_aql);
  if (!mode.ok()) return Status(mode.status().code(), name + ": " + mode.status().message());
  options.compute = *mode;
  return options;
}

Opened open_amd(const std::string& name, int index) {
  ASSIGN_OR_RETURN(amd::DeviceOptions options, amd_options(name));
  ASSIGN_OR_RETURN(std::unique_ptr<amd::Device> dev,
                   amd::Device::create(hcq::unowned(hcq::linux_os()), index, options));
  std::string gfx(dev->arch().name);
  Result<std::unique_ptr<compiler::AmdTarget>> target = compiler::AmdTarget::create(gfx);
  if (!target.ok())
    return Status(target.status().code(), name + " (" + gfx + "): " + target.status().message());
  return hcq_device(name, std::move(*target), std::move(dev));
}

const std::vector<DeviceLine>& device_table() {
  static const std::vector<DeviceLine> table = {
      // CPU:<n> (n > 0) are further CPU devices: their own queues, memory and engine threads.
      {"CPU", true, [](auto& n, int) { return open_cpu(n, compiler::CpuCompiler::kLlvm); }},
      {"CPU:C", false, [](auto& n, int) { return open_cpu(n, compiler::CpuCompiler::kClang); }},
      {"NULL", false,
       [](auto& n, int) -> Opened {
         ASSIGN_OR_RETURN(std::unique_ptr<null::Device> dev, null::Device::create());
         return hcq_device(
             n, std::make_unique<compiler::CpuTarget>(compiler::CpuCompiler::kLlvm, cpu_threads()),
             std::move(dev));
       }},
      // The bring-up instrument: the NVIDIA driver over a fake kernel driver and GPU.
      {"MOCK+NV", true,
       [](auto& n, int) -> Opened {
         ASSIGN_OR_RETURN(mock::MockNv m, mock::open_mock_nv_with_twins(n));
         return hcq_device(n, std::move(m.target), std::move(m.device));
       }},
      {"NV", true, open_nv},
      // The AMD driver over a fake KFD and GPU (a gfx1100); AMD is the driver over /dev/kfd.
      {"MOCK+AMD", true,
       [](auto& n, int) -> Opened {
         ASSIGN_OR_RETURN(amd::DeviceOptions options, amd_options(n));
         ASSIGN_OR_RETURN(mock::MockAmd m, mock::open_mock_amd_with_twins(n, "gfx1100", options));
         return hcq_device(n, std::move(m.target), std::move(m.device));
       }},
      {"AMD", true, open_amd},
      {"CUDA", true,
       [](auto&, int i) -> Opened {
         ASSIGN_OR_RETURN(std::unique_ptr<CudaDevice> d, CudaDevice::create(i));
         return std::shared_ptr<Device>(std::move(d));
       }},
      // Any OpenCL platform; CL:<n> counts the devices of every platform in order.
      {"CL", true,
       [](auto&, int i) -> Opened {
         ASSIGN_OR_RETURN(std::unique_ptr<ClDevice> d, ClDevice::create(i));
         return std::shared_ptr<Device>(std::move(d));
       }},
  };
  return table;
}

// The index `name` selects on an indexed line of `pattern` ("NV" -> 0, "NV:3" -> 3); nullopt
// when it is not that device or the index is not a number of 1 to 3 digits.
std::optional<int> index_of(std::string_view name, std::string_view pattern) {
  if (name.substr(0, pattern.size()) != pattern) return std::nullopt;
  std::string_view rest = name.substr(pattern.size());
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
  std::vector<std::string> names;
  for (const DeviceLine& l : device_table()) {
    names.emplace_back(l.pattern);
    if (l.indexed) names.push_back(std::string(l.pattern) + ":<n>");
  }
  return names;
}

Result<std::shared_ptr<Device>> open_device(std::string_view name) {
  std::string n(name.empty() ? std::string_view(options().dev) : name);
  if (n.empty()) n = "CPU";
  for (const DeviceLine& l : device_table()) {
    if (!l.indexed && n == l.pattern) return l.open(n, 0);
    if (l.indexed)
      if (std::optional<int> i = index_of(n, l.pattern)) return l.open(n, *i);
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
