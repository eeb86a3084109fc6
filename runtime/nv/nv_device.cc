#include "runtime/nv/nv_device.h"

#include <cstring>
#include <vector>

#include "base/log.h"
#include "base/timer.h"
#include "drivers/mock/nv_device/mock_nv.h"
#include "hcq/os.h"

namespace baregrad::runtime {
namespace {

// A kernel loaded on the device: the relocated cubin, its launch dimensions and (MOCK+NV) the
// registration of its host twin at the program's code address.
struct NvLoaded {
  std::unique_ptr<nv::Program> prg;
  hcq::Dim3 grid, block;
  std::shared_ptr<void> twin;
};

// "sm_90" -> 90.
Result<int> sm_of(const std::string& arch) {
  int sm = 0;
  if (arch.size() > 3 && arch.compare(0, 3, "sm_") == 0) {
    for (char c : arch.substr(3)) {
      if (c < '0' || c > '9')
        return invalid_argument("nv: unknown GPU architecture '" + arch + "'");
      sm = sm * 10 + (c - '0');
    }
    return sm;
  }
  return invalid_argument("nv: unknown GPU architecture '" + arch + "'");
}

// The host twin of `k` as a MOCK+NV kernel: the parameters from the QMD's constant bank 0 (at
// the program's parameter offset), each buffer address resolved to the host memory the fake
// GPU keeps for it. A buffer that is not mapped for the bytes the kernel declares is the
// launch's fault (the twin never runs).
mock::MockKernel twin_kernel(compiler::TwinFn fn,
                             const compiler::NvKernel& k,
                             size_t param_offset) {
  std::vector<size_t> need(k.params.buffer_offsets.size(), 1);
  for (const auto& b : k.spec.bufs)
    if (static_cast<size_t>(b.slot) < need.size())
      need[b.slot] = std::max<size_t>(static_cast<size_t>(b.size) * b.dtype.itemsize(), 1);
  return [fn, need, layout = k.params, param_offset, name = k.spec.name](
             const mock::LaunchInfo& li, hcq::Device&, mock::GpuMemory& mem) -> Status {
    if (li.cbank0.size() < param_offset + layout.size)
      return invalid_argument("kernel '" + name + "': constant bank 0 holds " +
                              std::to_string(li.cbank0.size()) + " bytes, the parameters end at " +
                              std::to_string(param_offset + layout.size));
    std::vector<uint8_t> params(layout.size + 8, 0);
    std::memcpy(params.data(), li.cbank0.data() + param_offset, layout.size);
    for (size_t s = 0; s < layout.buffer_offsets.size(); s++) {
      uint64_t va;
      std::memcpy(&va, params.data() + layout.buffer_offsets[s], 8);
      std::optional<uint8_t*> host = mem.resolve(va, need[s]);
      if (!host)
        return invalid_argument("kernel '" + name + "': buffer " + std::to_string(s) + " at " +
                                nv::hex_string(va) + " is not mapped for its " +
                                std::to_string(need[s]) + " bytes");
      auto p = reinterpret_cast<uint64_t>(*host);
      std::memcpy(params.data() + layout.buffer_offsets[s], &p, 8);
    }
    const uint32_t grid[3] = {li.grid.x, li.grid.y, li.grid.z};
    const uint32_t block[3] = {li.block.x, li.block.y, li.block.z};
    fn(params.data(), grid, block);
    return Status();
  };
}

}  // namespace

Result<std::shared_ptr<Device>> NvRuntimeDevice::open(int index, bool mock) {
  std::string name = std::string(mock ? "MOCK+NV" : "NV") +
                     (index > 0 ? ":" + std::to_string(index) : std::string());
  std::unique_ptr<nv::Device> dev;
  if (mock) {
    ASSIGN_OR_RETURN(dev, mock::open_mock_nv());
  } else {
    ASSIGN_OR_RETURN(dev, nv::Device::create(hcq::linux_os(), index));
  }
  ASSIGN_OR_RETURN(int sm, sm_of(dev->info().arch));
  Result<compiler::NvCompiler> c = compiler::NvCompiler::create(sm);
  if (!c.ok())
    return Status(c.status().code(), name + " (" + dev->info().name + ", sm_" + std::to_string(sm) +
                                         "): " + c.status().message());
  std::shared_ptr<NvRuntimeDevice> d(new NvRuntimeDevice(name, mock));
  d->nv_ = dev.get();
  d->compiler_.emplace(std::move(*c));
  d->attach(std::move(dev));
  BG_LOG(1) << name << ": " << d->nv_->info().name << " (" << d->nv_->info().arch << ", "
            << d->nv_->info().gr.sms << " SMs)";
  return std::shared_ptr<Device>(std::move(d));
}

NvRuntimeDevice::~NvRuntimeDevice() { shutdown(); }

Result<std::shared_ptr<Program>> NvRuntimeDevice::build(
    const compiler::UOpPtr& ast, const std::optional<std::vector<compiler::Opt>>& opts) {
  double t0 = now_ms();
  ASSIGN_OR_RETURN(compiler::NvKernel k, compiler_->compile(ast, opts));
  auto prg = std::make_shared<Program>();
  prg->spec = k.spec;
  prg->source = k.ptx;
  prg->cache_hit = k.cache_hit;
  auto loaded = std::make_shared<NvLoaded>();
  auto elf = std::span(reinterpret_cast<const uint8_t*>(k.cubin.data()), k.cubin.size());
  ASSIGN_OR_RETURN(loaded->prg, nv::Program::load(*nv_, elf, k.spec.name,
                                                  static_cast<int>(k.params.buffer_offsets.size()),
                                                  static_cast<int>(k.params.var_offsets.size())));
  loaded->grid = {k.grid[0], k.grid[1], k.grid[2]};
  loaded->block = {k.block[0], k.block[1], k.block[2]};
  if (mock_) {
    ASSIGN_OR_RETURN(KernelFn fn, twins_.load(k.twin_object, k.twin_symbol));
    loaded->twin = mock::register_mock_kernel(
        loaded->prg->code_va(),
        twin_kernel(compiler::as_twin_fn(fn), k, loaded->prg->args_prefix()));
  }
  prg->handle = loaded;
  prg->compile_ms = now_ms() - t0;
  BG_LOG(1) << "loaded " << k.spec.name << " on " << name_ << " at "
            << nv::hex_string(loaded->prg->code_va()) << " (" << loaded->prg->registers()
            << " registers) in " << prg->compile_ms << " ms";
  return prg;
}

HcqRuntimeDevice::LaunchShape NvRuntimeDevice::shape(const Program& prg) const {
  const auto* l = static_cast<const NvLoaded*>(prg.handle.get());
  return {l->prg.get(), l->grid, l->block};
}

}  // namespace baregrad::runtime
