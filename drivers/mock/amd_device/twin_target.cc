#include "drivers/mock/amd_device/twin_target.h"

#include <cstring>
#include <mutex>
#include <vector>

#include "base/format.h"
#include "compiler/target/amd_target.h"
#include "drivers/amd/code_object.h"
#include "drivers/mock/amd_device/mock_amd.h"
#include "drivers/mock/twin/host_twin.h"
#include "drivers/mock/twin/twin_runner.h"

namespace baregrad::mock {
namespace {

// `smem_bytes` >= 0: `fn` is the one-thread form of a twin whose blocks use that much shared
// memory (twin_runner.h), else the grid form. The kernarg segment is the twin's parameter area
// with every buffer's GPU address replaced by its host address.
MockAmdKernel twin_kernel(void (*fn)(), const Binary& b, int64_t smem_bytes) {
  std::vector<size_t> need(static_cast<size_t>(b.num_bufs), 1);
  for (size_t s = 0; s < need.size() && s < b.buf_bytes.size(); s++)
    need[s] = std::max<size_t>(b.buf_bytes[s], 1);
  size_t size = 8 * static_cast<size_t>(b.num_bufs + b.num_vars);
  return [fn, need, size, smem_bytes, name = b.entry](const AmdLaunch& l, hcq::Device&,
                                                      AmdTwinMemory& mem) -> Status {
    if (l.kernargs.size() < size)
      return invalid_argument("kernel '" + name + "': the kernarg segment holds " +
                              std::to_string(l.kernargs.size()) + " bytes, the arguments end at " +
                              std::to_string(size));
    std::vector<uint8_t> params(size + 8, 0);
    std::memcpy(params.data(), l.kernargs.data(), size);
    for (size_t s = 0; s < need.size(); s++) {
      uint64_t va;
      std::memcpy(&va, params.data() + 8 * s, 8);
      std::optional<uint8_t*> host = mem.resolve(va, need[s]);
      if (!host)
        return mem.vm_fault(va, false,
                            "kernel '" + name + "': buffer " + std::to_string(s) + " at " +
                                hex(va) + " is not mapped for its " + std::to_string(need[s]) +
                                " bytes");
      auto p = reinterpret_cast<uint64_t>(*host);
      std::memcpy(params.data() + 8 * s, &p, 8);
    }
    const uint32_t grid[3] = {l.grid.x, l.grid.y, l.grid.z};
    const uint32_t block[3] = {l.block.x, l.block.y, l.block.z};
    run_twin(fn, smem_bytes >= 0, smem_bytes, params.data(), grid, block);
    return Status();
  };
}

class TwinAmdTarget final : public compiler::AmdTarget {
 public:
  TwinAmdTarget(const std::string& gfx, compiler::LdLld lld, amd::Device& dev)
      : compiler::AmdTarget(gfx, std::move(lld)), dev_(dev) {}

  using compiler::AmdTarget::compile;
  // The code object, then its twin, registered with the device for the Binary's id.
  Result<compiler::CompiledKernel> compile(const compiler::ProgramSpec& spec) const override {
    ASSIGN_OR_RETURN(compiler::CompiledKernel k, compiler::AmdTarget::compile(spec));
    ASSIGN_OR_RETURN(HostTwin twin, twins_.compile(spec));
    // Where the code takes its kernarg pointer: after the private segment buffer V# (gfx9).
    const std::string& code = k.binary.code;
    ASSIGN_OR_RETURN(amd::CodeObject co,
                     amd::load_code_object(
                         {reinterpret_cast<const uint8_t*>(code.data()), code.size()}, spec.name));
    uint32_t sgpr = co.descriptor.kernel_code_properties &
                            amd::KERNEL_CODE_PROPERTY_ENABLE_SGPR_PRIVATE_SEGMENT_BUFFER
                        ? 4
                        : 0;
    ASSIGN_OR_RETURN(std::shared_ptr<void> reg,
                     register_mock_amd_binary(
                         dev_, k.binary.id, twin_kernel(twin.fn, k.binary, twin.smem_bytes), sgpr));
    std::lock_guard lock(mu_);
    registrations_.push_back(std::move(reg));
    return k;
  }

 private:
  amd::Device& dev_;
  mutable HostTwinCompiler twins_;
  mutable std::mutex mu_;
  mutable std::vector<std::shared_ptr<void>> registrations_;  // after twins_: gone before them
};

}  // namespace

Result<MockAmd> open_mock_amd_with_twins(const std::string& name,
                                         const std::string& gfx,
                                         amd::DeviceOptions options) {
  MockAmd m;
  options.name = name;
  ASSIGN_OR_RETURN(m.device, open_mock_amd(gfx, options));
  Result<compiler::LdLld> lld = compiler::LdLld::find();
  if (!lld.ok())
    return Status(lld.status().code(), name + " (" + gfx + "): " + lld.status().message());
  m.target = std::make_unique<TwinAmdTarget>(gfx, std::move(*lld), *m.device);
  return m;
}

}  // namespace baregrad::mock
