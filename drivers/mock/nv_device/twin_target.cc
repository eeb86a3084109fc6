#include "drivers/mock/nv_device/twin_target.h"

#include <cstring>
#include <mutex>
#include <vector>

#include "base/format.h"
#include "compiler/target/nv_target.h"
#include "drivers/mock/nv_device/mock_nv.h"
#include "drivers/mock/twin/host_twin.h"
#include "drivers/mock/twin/twin_runner.h"
#include "drivers/nv/cubin.h"

namespace baregrad::mock {
namespace {

// `smem_bytes` >= 0: `fn` is the one-thread form of a twin whose blocks use that much shared
// memory (twin_runner.h), else the grid form.
MockKernel twin_kernel(void (*fn)(), const Binary& b, size_t param_offset, int64_t smem_bytes) {
  std::vector<size_t> need(static_cast<size_t>(b.num_bufs), 1);
  for (size_t s = 0; s < need.size() && s < b.buf_bytes.size(); s++)
    need[s] = std::max<size_t>(b.buf_bytes[s], 1);
  size_t size = 8 * static_cast<size_t>(b.num_bufs + b.num_vars);
  return [fn, need, size, param_offset, smem_bytes, name = b.entry](
             const LaunchInfo& li, hcq::Device&, TwinMemory& mem) -> Status {
    if (li.cbank0.size() < param_offset + size)
      return invalid_argument("kernel '" + name + "': constant bank 0 holds " +
                              std::to_string(li.cbank0.size()) + " bytes, the parameters end at " +
                              std::to_string(param_offset + size));
    std::vector<uint8_t> params(size + 8, 0);
    std::memcpy(params.data(), li.cbank0.data() + param_offset, size);
    for (size_t s = 0; s < need.size(); s++) {
      uint64_t va;
      std::memcpy(&va, params.data() + 8 * s, 8);
      std::optional<uint8_t*> host = mem.resolve(va, need[s]);
      if (!host)
        return invalid_argument("kernel '" + name + "': buffer " + std::to_string(s) + " at " +
                                hex(va) + " is not mapped for its " + std::to_string(need[s]) +
                                " bytes");
      auto p = reinterpret_cast<uint64_t>(*host);
      std::memcpy(params.data() + 8 * s, &p, 8);
    }
    const uint32_t grid[3] = {li.grid.x, li.grid.y, li.grid.z};
    const uint32_t block[3] = {li.block.x, li.block.y, li.block.z};
    run_twin(fn, smem_bytes >= 0, smem_bytes, params.data(), grid, block);
    return Status();
  };
}

class TwinNvTarget final : public compiler::NvTarget {
 public:
  TwinNvTarget(int sm, compiler::Ptxas ptxas, nv::Device& dev)
      : compiler::NvTarget(sm, std::move(ptxas)), dev_(dev) {}

  using compiler::NvTarget::compile;
  // The cubin, then its twin, registered with the device for the cubin's Binary id.
  Result<compiler::CompiledKernel> compile(const compiler::ProgramSpec& spec) const override {
    ASSIGN_OR_RETURN(compiler::CompiledKernel k, compiler::NvTarget::compile(spec));
    ASSIGN_OR_RETURN(HostTwin twin, twins_.compile(spec));
    // Where the parameters start in constant bank 0: the cubin's EIATTR_PARAM_CBANK offset.
    const std::string& code = k.binary.code;
    ASSIGN_OR_RETURN(
        nv::CubinImage img,
        nv::load_cubin({reinterpret_cast<const uint8_t*>(code.data()), code.size()}, spec.name));
    ASSIGN_OR_RETURN(
        std::shared_ptr<void> reg,
        register_mock_binary(dev_, k.binary.id,
                             twin_kernel(twin.fn, k.binary, img.param_offset, twin.smem_bytes)));
    std::lock_guard lock(mu_);
    registrations_.push_back(std::move(reg));
    return k;
  }

 private:
  nv::Device& dev_;
  mutable HostTwinCompiler twins_;
  mutable std::mutex mu_;
  mutable std::vector<std::shared_ptr<void>> registrations_;  // after twins_: gone before them
};

}  // namespace

Result<MockNv> open_mock_nv_with_twins(const std::string& name) {
  MockNv m;
  nv::DeviceOptions options;
  options.name = name;
  ASSIGN_OR_RETURN(m.device, open_mock_nv(nv::Generation::kHopper, options));
  const std::string& arch = m.device->info().arch;  // "sm_90"
  int sm = std::stoi(arch.substr(3));
  Result<compiler::Ptxas> ptxas = compiler::Ptxas::find();
  if (!ptxas.ok())
    return Status(ptxas.status().code(), name + " (" + m.device->info().name + ", " + arch +
                                             "): " + ptxas.status().message());
  m.target = std::make_unique<TwinNvTarget>(sm, std::move(*ptxas), *m.device);
  return m;
}

}  // namespace baregrad::mock
