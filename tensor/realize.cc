// Runs a schedule: allocate each output, compile its kernel (cached; constants that change
// between calls travel as launch scalars, tensor/const_args.h), launch.
#include "base/check.h"
#include "base/checked.h"
#include "base/error.h"
#include "base/log.h"
#include "base/options.h"
#include "runtime/beam.h"
#include "tensor/const_args.h"
#include "tensor/counters.h"
#include "tensor/jit.h"
#include "tensor/schedule.h"

namespace baregrad::tensor {

namespace detail {
void copy_between(runtime::Device& dst_dev,
                  runtime::Buffer dst,
                  runtime::Device& src_dev,
                  runtime::Buffer src,
                  size_t bytes) {
  if (&dst_dev == &src_dev) {
    dst_dev.copy(dst, src, bytes).throw_if_error("to");
    return;
  }
  // Through the host: the source's device finishes its work first (copy_out waits for it).
  std::vector<uint8_t> host(bytes);
  src_dev.copy_out(host.data(), src, bytes).throw_if_error("to");
  dst_dev.copy_in(dst, host.data(), bytes).throw_if_error("to");
}
}  // namespace detail

namespace {
std::shared_ptr<runtime::Program> compile_item(const ScheduleItem& item) {
  KernelPlan plan = plan_kernel(item.ast, /*inline_all=*/detail::jit_capture() != nullptr);
  auto prg = item.bufs[0]->device->compile(plan.ast, std::nullopt);
  if (!prg.ok()) prg.status().throw_if_error("compile");
  return *prg;
}
}  // namespace

void compile_schedule(const std::vector<ScheduleItem>& schedule) {
  for (const ScheduleItem& item : schedule)
    if (item.ast && item.bufs[0]->numel() > 0) compile_item(item);
}

std::pair<double, double> estimate_item(const ScheduleItem& item) {
  if (item.bufs[0]->numel() == 0) return {0, 0};
  if (!item.ast)  // a copy: no arithmetic, its bytes read and written
    return {0, 2.0 * static_cast<double>(item.bufs[0]->numel() * item.bufs[0]->dtype.itemsize())};
  auto prg = compile_item(item);
  return {prg->spec.flops, prg->spec.bytes};
}

void run_schedule(std::vector<ScheduleItem> schedule) {
  for (ScheduleItem& item : schedule) {
    LazyBase* out = item.bufs[0].get();
    auto& dev = out->device;
    std::shared_ptr<DeviceBuffer> realized = out->write_into;
    if (!realized) {
      int64_t bytes =
          bytes_or_fail("realize", out->shape, output_elements(*out), out->dtype.itemsize());
      auto buf = dev->alloc(static_cast<size_t>(bytes));
      if (!buf.ok()) buf.status().throw_if_error("realize");
      realized = std::make_shared<DeviceBuffer>(dev, *buf);
    }
    if (!item.ast) {  // a copy between devices
      if (out->numel() > 0) {
        const auto& src = item.bufs[1]->realized;
        CHECK(src) << "realize: the source of a copy was not computed first";
        size_t bytes = static_cast<size_t>(out->numel()) * out->dtype.itemsize();
        detail::copy_between(*realized->device, realized->buffer, *src->device, src->buffer, bytes);
        if (auto* capture = detail::jit_capture()) capture->record_copy(realized, src, bytes);
      }
    } else if (out->numel() > 0) {
      auto* capture = detail::jit_capture();
      KernelPlan plan = plan_kernel(item.ast, /*inline_all=*/capture != nullptr);
      std::vector<runtime::Buffer> bufs;
      bufs.reserve(item.bufs.size());
      bufs.push_back(realized->buffer);
      for (size_t i = 1; i < item.bufs.size(); i++) {
        CHECK(item.bufs[i]->realized) << "realize: input " << i << " was not computed first";
        bufs.push_back(item.bufs[i]->realized->buffer);
      }
      for (auto [slot, bytes] : plan.shifts) {  // the AST reads these buffers from further on
        runtime::Buffer& b = bufs[static_cast<size_t>(slot)];
        CHECK(static_cast<size_t>(bytes) <= b.bytes)
            << "realize: a shift of " << bytes << " bytes past buffer " << slot << " of "
            << b.bytes;
        b.va += static_cast<uint64_t>(bytes);
        b.bytes -= static_cast<size_t>(bytes);
      }
      std::optional<std::vector<compiler::Opt>> opts;
      if (options().beam > 0)  // BEAM: the opts of a timed search (or of its database)
        opts = runtime::beam_opts(*dev, plan.ast, bufs, [&](const compiler::ProgramSpec& spec) {
          return launch_vars(spec, plan, item.vars);
        });
      auto prg = dev->compile(plan.ast, opts);
      if (!prg.ok()) prg.status().throw_if_error("realize");
      std::vector<int64_t> vars = launch_vars((*prg)->spec, plan, item.vars);
      dev->launch(**prg, bufs, vars).throw_if_error("realize");
      counters().count_kernel((*prg)->spec);
      if (capture) {
        if (item.specialized)
          capture->specialize("kernel " + (*prg)->spec.name +
                              " was built for the current values of its Variables");
        std::vector<std::shared_ptr<DeviceBuffer>> owners{realized};
        for (size_t i = 1; i < item.bufs.size(); i++) owners.push_back(item.bufs[i]->realized);
        capture->record_kernel(*prg, std::move(owners), std::move(vars));
      }
    }
    out->realized = std::move(realized);
    // A computed constant is a buffer from now on: reads load it (a write into it through a
    // view must be seen), and a reduction over a broadcast of it loads, keeping its extent.
    if (out->kind == LazyKind::kConst) out->kind = LazyKind::kBuffer;
    out->write_into.reset();
    out->srcs.clear();  // the graph behind a realized buffer is no longer needed
    item.bufs.clear();  // nor are this kernel's inputs, unless someone else holds them
  }
}

}  // namespace baregrad::tensor
