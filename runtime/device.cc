#include "runtime/device.h"

namespace baregrad::runtime {

Status check_copy(const Device& dev, Buffer dst, Buffer src, size_t bytes) {
  if (bytes <= dst.bytes && bytes <= src.bytes && (bytes == 0 || (dst.va && src.va)))
    return Status();
  std::string why = bytes > dst.bytes || bytes > src.bytes ? "" : " (a null buffer)";
  return invalid_argument("copy of " + std::to_string(bytes) + " bytes from a buffer of " +
                          std::to_string(src.bytes) + " into a buffer of " +
                          std::to_string(dst.bytes) + " on " + dev.name() + why);
}

Status check_launch(const Device& dev,
                    const Program& prg,
                    std::span<const Buffer> bufs,
                    std::span<const int64_t> vars) {
  const compiler::ProgramSpec& spec = prg.spec;
  std::string what = "launch " + spec.name + " on " + dev.name();
  if (&prg.device() != &dev)
    return invalid_argument(what + ": the program was compiled for " + prg.device().name());
  if (bufs.size() != spec.bufs.size())
    return invalid_argument(what + ": expected " + std::to_string(spec.bufs.size()) +
                            " buffers, got " + std::to_string(bufs.size()));
  for (const compiler::BufferArg& b : spec.bufs) {
    size_t need = static_cast<size_t>(b.size) * b.dtype.itemsize();
    const Buffer& buf = bufs[static_cast<size_t>(b.slot)];
    if (buf.bytes < need || !buf.va)
      return invalid_argument(what + ": buffer " + std::to_string(b.slot) + " (" + b.dtype.name() +
                              ") needs " + std::to_string(need) + " bytes, got " +
                              std::to_string(buf.bytes));
  }
  if (vars.size() != spec.vars.size())
    return invalid_argument(what + ": expected " + std::to_string(spec.vars.size()) +
                            " vars, got " + std::to_string(vars.size()));
  return Status();
}

}  // namespace baregrad::runtime
