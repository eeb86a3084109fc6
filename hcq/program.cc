// Buffer views, kernel-argument blocks and launch checks.
#include <cstring>

#include "base/format.h"
#include "hcq/hcq.h"

namespace baregrad::hcq {

Buffer Buffer::view(size_t offset, size_t bytes) const {
  CHECK(offset <= size && bytes <= size - offset)
      << "view [" << offset << ", " << offset + bytes << ") of a buffer of " << size << " bytes";
  Buffer b = *this;
  b.va += offset;
  b.size = bytes;
  if (cpu) b.cpu = static_cast<uint8_t*>(cpu) + offset;
  return b;
}

ArgsState::ArgsState(Buffer mem, size_t prefix, int num_bufs, int num_vars)
    : mem_(mem), prefix_(prefix), num_bufs_(num_bufs), num_vars_(num_vars) {
  CHECK(mem_.cpu) << "kernel arguments need CPU-visible memory";
  CHECK(mem_.size >= prefix_ + 8 * static_cast<size_t>(num_bufs + num_vars))
      << "argument block of " << mem_.size << " bytes for " << num_bufs << " buffers and "
      << num_vars << " scalars";
}

void ArgsState::put(size_t offset, Value v) {
  auto* p = static_cast<uint8_t*>(mem_.cpu) + offset;
  if (v.symbolic()) {
    patches_.add(offset, v.var, PatchTable::Width::k64);
  } else {
    std::memcpy(p, &v.imm, 8);
  }
}

void ArgsState::set_buf(int i, Value va) {
  CHECK(i >= 0 && i < num_bufs_) << "buffer argument " << i << " of " << num_bufs_;
  put(prefix_ + 8 * static_cast<size_t>(i), va);
}

void ArgsState::set_var(int i, Value v) {
  CHECK(i >= 0 && i < num_vars_) << "scalar argument " << i << " of " << num_vars_;
  put(prefix_ + 8 * static_cast<size_t>(num_bufs_ + i), v);
}

void ArgsState::apply(std::span<const int64_t> vars) const {
  patches_.apply(static_cast<uint8_t*>(mem_.cpu), vars);
}

bool HwQueue::check_signal(const Signal& s, const char* what) {
  if (&s.device() == &dev_ || s.device().peer_group() == dev_.peer_group()) return true;
  refuse(invalid_argument(std::string(what) + " on a queue of " + dev_.name() + ": signal '" +
                          s.name() + "' belongs to " + s.device().name() + " (peer group " +
                          s.device().peer_group() + "), outside peer group " + dev_.peer_group()));
  return false;
}

bool HwQueue::check_exec(const Program& prg, const ArgsState& args, const std::string& queue) {
  if (engine_ != Engine::kCompute) {
    refuse(invalid_argument("exec of '" + prg.name() + "' on the " + queue +
                            ": only compute queues run kernels"));
    return false;
  }
  if (args.num_bufs() == prg.num_bufs() && args.num_vars() == prg.num_vars()) return true;
  refuse(invalid_argument(
      "exec of '" + prg.name() + "' on the " + queue + ": " + std::to_string(args.num_bufs()) +
      " buffers and " + std::to_string(args.num_vars()) + " scalars for a kernel of " +
      std::to_string(prg.num_bufs()) + " and " + std::to_string(prg.num_vars())));
  return false;
}

bool HwQueue::check_copy(Value dst, Value src, Value bytes, const std::string& queue) {
  if (dst.symbolic() || src.symbolic() || bytes.symbolic()) return true;
  auto n = static_cast<uint64_t>(bytes.imm);
  for (auto [what, v] : {std::pair{"destination", dst.imm}, std::pair{"source", src.imm}}) {
    auto va = static_cast<uint64_t>(v);
    std::optional<Buffer> owner = dev_.allocator().find(va);
    if (!owner) {
      refuse(invalid_argument("copy of " + std::to_string(n) + " bytes on the " + queue + ": " +
                              what + " " + hex(va) + " is in no allocation of " + dev_.name()));
      return false;
    }
    if (va + n > owner->va + owner->size) {
      refuse(invalid_argument("copy of " + std::to_string(n) + " bytes on the " + queue + ": " +
                              what + " " + hex(va) + " runs past the end of the buffer at " +
                              hex(owner->va) + " (" + std::to_string(owner->size) + " bytes)"));
      return false;
    }
  }
  return true;
}

Status Program::check_launch(Dim3 grid, Dim3 block) const {
  if (grid.x == 0 || grid.y == 0 || grid.z == 0 || block.x == 0 || block.y == 0 || block.z == 0)
    return invalid_argument("launch of " + name_ + ": empty grid " + std::to_string(grid.x) + "x" +
                            std::to_string(grid.y) + "x" + std::to_string(grid.z) + " or block " +
                            std::to_string(block.x) + "x" + std::to_string(block.y) + "x" +
                            std::to_string(block.z));
  return Status();
}

}  // namespace baregrad::hcq
