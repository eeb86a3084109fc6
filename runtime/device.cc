#include "runtime/device.h"

#include <algorithm>
#include <cstdio>

namespace baregrad::runtime {

Status check_copy(const Device& dev, Buffer dst, Buffer src, size_t bytes) {
  if (bytes <= dst.bytes && bytes <= src.bytes && (bytes == 0 || (dst.va && src.va)))
    return Status();
  std::string why = bytes > dst.bytes || bytes > src.bytes ? "" : " (a null buffer)";
  return invalid_argument("copy of " + std::to_string(bytes) + " bytes from a buffer of " +
                          std::to_string(src.bytes) + " into a buffer of " +
                          std::to_string(dst.bytes) + " on " + dev.name() + why);
}

namespace {

// InvalidArgument "<what()> at 0x... is not aligned to N bytes ..." unless `buf` is aligned to
// `align` (a kernel's ProgramSpec::buffer_align). `what` names the buffer and is called only on
// a refusal, so that an aligned launch builds no string.
template <class Name>
Status check_align(const Name& what, const Buffer& buf, int align) {
  if (align <= 1 || buf.va % static_cast<uint64_t>(align) == 0) return Status();
  char va[32];
  std::snprintf(va, sizeof va, "0x%llx", static_cast<unsigned long long>(buf.va));
  return invalid_argument(what() + " at " + va + " is not aligned to " + std::to_string(align) +
                          " bytes, which the kernel's vector accesses assume (alloc() gives 64)");
}

}  // namespace

Status check_launch(const Device& dev,
                    const Program& prg,
                    std::span<const Buffer> bufs,
                    std::span<const int64_t> vars) {
  const compiler::ProgramSpec& spec = prg.spec;
  // Named only on a refusal: a tiny launch takes ~1 us, and building the name cost a tenth.
  auto what = [&] { return "launch " + spec.name + " on " + dev.name(); };
  if (&prg.device() != &dev)
    return invalid_argument(what() + ": the program was compiled for " + prg.device().name());
  if (bufs.size() != spec.bufs.size())
    return invalid_argument(what() + ": expected " + std::to_string(spec.bufs.size()) +
                            " buffers, got " + std::to_string(bufs.size()));
  for (const compiler::BufferArg& b : spec.bufs) {
    size_t need = static_cast<size_t>(b.size) * b.dtype.itemsize();
    const Buffer& buf = bufs[static_cast<size_t>(b.slot)];
    if (buf.bytes < need || !buf.va)
      return invalid_argument(what() + ": buffer " + std::to_string(b.slot) + " (" +
                              b.dtype.name() + ") needs " + std::to_string(need) + " bytes, got " +
                              std::to_string(buf.bytes));
    RETURN_IF_ERROR(check_align([&] { return what() + ": buffer " + std::to_string(b.slot); }, buf,
                                spec.buffer_align));
  }
  if (vars.size() != spec.vars.size())
    return invalid_argument(what() + ": expected " + std::to_string(spec.vars.size()) +
                            " vars, got " + std::to_string(vars.size()));
  return Status();
}

Status GraphInputs::check(const Device& dev, std::span<const Buffer> inputs) const {
  if (inputs.size() != need.size())
    return invalid_argument("graph replay on " + dev.name() + ": " + std::to_string(inputs.size()) +
                            " inputs for a graph of " + std::to_string(need.size()));
  for (size_t i = 0; i < inputs.size(); i++) {
    if (used[i] && (inputs[i].bytes < need[i] || !inputs[i].va))
      return invalid_argument("graph replay on " + dev.name() + ": input " + std::to_string(i) +
                              " needs " + std::to_string(need[i]) + " bytes, got " +
                              std::to_string(inputs[i].bytes) + (inputs[i].va ? "" : " (null)"));
    if (used[i])
      RETURN_IF_ERROR(check_align(
          [&] { return "graph replay on " + dev.name() + ": input " + std::to_string(i); },
          inputs[i], align[i]));
  }
  return Status();
}

Result<GraphInputs> check_graph(const Device& dev,
                                const std::vector<GraphLaunch>& launches,
                                size_t num_inputs) {
  GraphInputs in{std::vector<size_t>(num_inputs, 0), std::vector<bool>(num_inputs, false),
                 std::vector<int>(num_inputs, 1)};
  for (const GraphLaunch& l : launches) {
    if (!l.prg)
      return invalid_argument("graph on " + dev.name() + ": launch " +
                              std::to_string(&l - launches.data()) + " has no program");
    const compiler::ProgramSpec& spec = l.prg->spec;
    const std::string what = "graph of " + spec.name + " on " + dev.name();
    if (l.bufs.size() != spec.bufs.size())
      return invalid_argument(what + ": " + std::to_string(l.bufs.size()) + " buffers for " +
                              std::to_string(spec.bufs.size()) + " slots");
    if (l.input.size() != l.bufs.size())
      return invalid_argument(what + ": " + std::to_string(l.input.size()) +
                              " input bindings for " + std::to_string(l.bufs.size()) + " buffers");
    if (!spec.vars.empty())
      return invalid_argument(what + ": " + std::to_string(spec.vars.size()) +
                              " vars (symbolic kernels are not supported)");
    if (&l.prg->device() != &dev)
      return invalid_argument(what + ": the program was compiled for " + l.prg->device().name());
    for (const compiler::BufferArg& b : spec.bufs) {
      int input = l.input[static_cast<size_t>(b.slot)];
      if (input >= static_cast<int>(num_inputs))
        return invalid_argument(what + ": slot " + std::to_string(b.slot) + " binds input " +
                                std::to_string(input) + " of " + std::to_string(num_inputs));
      size_t need = static_cast<size_t>(b.size) * b.dtype.itemsize();
      if (input >= 0) {
        in.need[static_cast<size_t>(input)] = std::max(in.need[static_cast<size_t>(input)], need);
        in.used[static_cast<size_t>(input)] = true;
        in.align[static_cast<size_t>(input)] =
            std::max(in.align[static_cast<size_t>(input)], spec.buffer_align);
        continue;
      }
      const Buffer& buf = l.bufs[static_cast<size_t>(b.slot)];
      if (buf.bytes < need || !buf.va)
        return invalid_argument(what + ": buffer " + std::to_string(b.slot) + " (" +
                                b.dtype.name() + ") needs " + std::to_string(need) +
                                " bytes, got " + std::to_string(buf.bytes));
      RETURN_IF_ERROR(check_align([&] { return what + ": buffer " + std::to_string(b.slot); }, buf,
                                  spec.buffer_align));
    }
  }
  return in;
}

}  // namespace baregrad::runtime
