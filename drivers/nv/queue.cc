#include "drivers/nv/queue.h"

#include <algorithm>
#include <cstring>

#include "drivers/nv/methods.h"
#include "drivers/nv/program.h"
#include "drivers/nv/qmd.h"

namespace baregrad::nv {
namespace {
constexpr size_t kQueueWords = 1 << 14;
constexpr size_t kQmdSlotBytes = 512;  // >= the largest QMD, 256-aligned
constexpr size_t kQmdChunkBytes = 64 << 10;
constexpr size_t kQmdSlotsPerChunk = kQmdChunkBytes / kQmdSlotBytes;
// The driver's words in constant bank 0, which compiled code reads (generic addressing of
// shared and local memory, the stack): the shared and local memory windows the channel set up
// and the stack top, as tinygrad's NV backend writes them (shared/reference/hcq-interfaces.md
// 2.8): 32-bit words 6..11 before Blackwell; on Blackwell words 188..191 (the two windows) and
// 223 (the stack top).
constexpr uint64_t kStackTop = 0xfffdc0;
void write_driver_words(uint8_t* cb0, size_t prefix, Generation g) {
  auto put64 = [&](size_t word, uint64_t v) {
    if ((word + 2) * 4 <= prefix) std::memcpy(cb0 + word * 4, &v, 8);
  };
  auto put32 = [&](size_t word, uint32_t v) {
    if ((word + 1) * 4 <= prefix) std::memcpy(cb0 + word * 4, &v, 4);
  };
  if (g == Generation::kBlackwell) {
    put64(188, kSharedMemoryWindow);
    put64(190, kLocalMemoryWindow);
    put32(223, static_cast<uint32_t>(kStackTop));
  } else {
    put64(6, kSharedMemoryWindow);
    put64(8, kLocalMemoryWindow);
    put64(10, kStackTop);
  }
}
// Upper bounds of each command's words (checked before emitting, so that a full stream is a
// refusal, not a CHECK failure).
constexpr size_t kSemaphoreWords = 8;
constexpr size_t kCopyWords = 12;
constexpr size_t kLaunchWords = 6;
constexpr size_t kBarrierWords = 2;

hcq::BufferSpec host_memory() { return {.host = true, .cpu_access = true, .nolru = true}; }
}  // namespace

Queue::Queue(Device& dev, hcq::Engine engine)
    : hcq::HwQueue(dev, engine),
      dev_(dev),
      cs_(std::string(engine == hcq::Engine::kCompute ? "compute" : "copy") + " queue of " +
              dev.name(),
          kQueueWords),
      pb_(cs_) {}

Queue::~Queue() {
  if (submitted_ || bound_.size) (void)dev_.synchronize();       // the GPU may still read QMDs
  if (last_seq_) (void)dev_.wait_sequence(engine(), last_seq_);  // also outside the timeline
  for (uint64_t q : qmds_) dev_.forget_qmd(q);
  for (const hcq::Buffer& b : qmd_mem_) dev_.allocator().free(b);
  for (const Retired& r : retired_) dev_.allocator().free(r.mem);
  if (scratch_.size) dev_.allocator().free(scratch_);
  if (bound_.size) dev_.allocator().free(bound_);
}

bool Queue::fits(size_t words) {
  if (cs_.size() + words <= cs_.capacity()) return true;
  refuse(resource_exhausted(cs_.name() + ": the command buffer of " +
                            std::to_string(cs_.capacity()) + " words is full"));
  return false;
}

bool Queue::ok(Status s) {
  if (s.ok()) return true;
  refuse(std::move(s));
  return false;
}

hcq::HwQueue& Queue::wait(const hcq::Signal& s, hcq::Value v) {
  if (check_signal(s, "wait") && fits(kSemaphoreWords))
    ok(emit_semaphore_acquire(pb_, dev_.classes(), static_cast<int64_t>(s.va()), v));
  return *this;
}

hcq::HwQueue& Queue::signal(const hcq::Signal& s, hcq::Value v) {
  if (check_signal(s, "signal") && fits(kSemaphoreWords))
    ok(emit_semaphore_release(pb_, dev_.classes(), static_cast<int64_t>(s.va()), v));
  return *this;
}

hcq::HwQueue& Queue::timestamp(const hcq::Signal& s) {
  if (!check_signal(s, "timestamp") || !fits(kSemaphoreWords + kCopyWords)) return *this;
  if (!scratch_.size) {
    auto b = dev_.allocator().alloc(16, host_memory());
    if (!ok(b.status())) return *this;
    scratch_ = *b;
  }
  auto scratch = static_cast<int64_t>(scratch_.va);
  if (!ok(emit_semaphore_release(pb_, dev_.classes(), scratch, 0, {.timestamp = true})))
    return *this;
  ok(emit_copy(pb_, dev_.classes(), static_cast<int64_t>(s.va() + 8), scratch + 8, 8));
  return *this;
}

hcq::HwQueue& Queue::memory_barrier() {
  if (engine() == hcq::Engine::kCompute && fits(kBarrierWords)) emit_invalidate_shader_caches(pb_);
  return *this;
}

Result<uint64_t> Queue::qmd_slot(void** cpu) {
  size_t chunk = qmd_next_ / kQmdSlotsPerChunk, slot = qmd_next_ % kQmdSlotsPerChunk;
  if (chunk == qmd_mem_.size()) {
    const Retired* r = retired_.empty() ? nullptr : &retired_.front();
    if (r && dev_.completed_sequence(engine()) >= r->seq) {
      qmd_mem_.push_back(r->mem);
      retired_.pop_front();
    } else {
      ASSIGN_OR_RETURN(hcq::Buffer b, dev_.allocator().alloc(kQmdChunkBytes, host_memory()));
      qmd_mem_.push_back(b);
    }
  }
  qmd_next_++;
  *cpu = static_cast<uint8_t*>(qmd_mem_[chunk].cpu) + slot * kQmdSlotBytes;
  return qmd_mem_[chunk].va + slot * kQmdSlotBytes;
}

hcq::HwQueue& Queue::exec(const hcq::Program& hprg,
                          const hcq::ArgsState& args,
                          hcq::Dim3 grid,
                          hcq::Dim3 block) {
  if (engine() != hcq::Engine::kCompute) {
    refuse(invalid_argument("exec of '" + hprg.name() + "' on the " + cs_.name() +
                            ": only compute queues run kernels"));
    return *this;
  }
  const auto* prg = dynamic_cast<const Program*>(&hprg);
  if (!prg) {
    refuse(invalid_argument("exec of '" + hprg.name() + "' on the " + cs_.name() +
                            ": not a program of the NV driver"));
    return *this;
  }
  if (args.num_bufs() != prg->num_bufs() || args.num_vars() != prg->num_vars()) {
    refuse(invalid_argument("exec of '" + prg->name() + "' on the " + cs_.name() + ": " +
                            std::to_string(args.num_bufs()) + " buffers and " +
                            std::to_string(args.num_vars()) + " scalars for a kernel of " +
                            std::to_string(prg->num_bufs()) + " and " +
                            std::to_string(prg->num_vars())));
    return *this;
  }
  // Local memory grows before the first launch that needs more (its methods precede ours).
  if (prg->local_bytes() > dev_.local_bytes_per_thread() &&
      !ok(dev_.ensure_local_memory(prg->local_bytes())))
    return *this;
  if (!ok(prg->check_launch(grid, block)) || !fits(kLaunchWords)) return *this;
  const hcq::Buffer& cb0 = args.mem();
  if (cb0.va % 64 != 0 || cb0.size > (64 << 10)) {
    refuse(invalid_argument("exec of '" + prg->name() + "': the argument block at " +
                            hex_string(cb0.va) + " (" + std::to_string(cb0.size) +
                            " bytes) is not a 64-byte aligned constant bank of <= 64 KiB"));
    return *this;
  }
  if (cb0.cpu != nullptr)
    write_driver_words(static_cast<uint8_t*>(cb0.cpu),
                       std::min<size_t>(prg->args_prefix(), cb0.size), dev_.classes().generation);
  QmdParams p{.program_address = prg->code_va(),
              .program_bytes = prg->code_bytes(),
              .grid = {grid.x, grid.y, grid.z},
              .block = {block.x, block.y, block.z},
              .shared_memory_bytes = prg->shared_bytes(),
              .registers = prg->registers(),
              .constant_buffers = {{0, cb0.va, static_cast<uint32_t>(cb0.size)}},
              .local_memory_high_bytes = prg->local_bytes(),
              .sass_version = prg->sass_version(),
              .releases = {}};
  for (const CubinConstBank& b : prg->constant_banks())
    if (b.bank != 0)
      p.constant_buffers.push_back({static_cast<uint32_t>(b.bank), prg->image_va() + b.offset,
                                    static_cast<uint32_t>(b.size)});
  auto qmd = build_qmd(dev_.classes(), p);
  if (!ok(qmd.status())) return *this;
  void* cpu = nullptr;
  auto va = qmd_slot(&cpu);
  if (!ok(va.status())) return *this;
  std::memcpy(cpu, qmd->words().data(), qmd->size_bytes());
  if (!ok(emit_launch(pb_, *va))) return *this;
  dev_.note_qmd(*va, prg->name());
  qmds_.insert(*va);
  args_.push_back(&args);
  return *this;
}

hcq::HwQueue& Queue::copy(hcq::Value dst, hcq::Value src, hcq::Value bytes) {
  // Constant ranges are checked now; symbolic ones fault on the GPU.
  if (!dst.symbolic() && !src.symbolic() && !bytes.symbolic()) {
    auto n = static_cast<uint64_t>(bytes.imm);
    for (auto [what, v] : {std::pair{"destination", dst.imm}, std::pair{"source", src.imm}}) {
      auto va = static_cast<uint64_t>(v);
      auto owner = dev_.allocator().find(va);
      if (!owner) {
        refuse(invalid_argument("copy of " + std::to_string(n) + " bytes on the " + cs_.name() +
                                ": " + what + " " + hex_string(va) + " is in no allocation of " +
                                dev_.name()));
        return *this;
      }
      if (va + n > owner->va + owner->size) {
        refuse(invalid_argument("copy of " + std::to_string(n) + " bytes on the " + cs_.name() +
                                ": " + what + " " + hex_string(va) +
                                " runs past the end of the buffer at " + hex_string(owner->va) +
                                " (" + std::to_string(owner->size) + " bytes)"));
        return *this;
      }
    }
    if (!fits(kCopyWords * (n / kCopyChunkBytes + 1))) return *this;
  } else if (!fits(kCopyWords)) {
    return *this;
  }
  ok(emit_copy(pb_, dev_.classes(), dst, src, bytes));
  return *this;
}

Status Queue::bind() {
  if (bound_.size) return failed_precondition(cs_.name() + " is already bound");
  ASSIGN_OR_RETURN(bound_,
                   dev_.allocator().alloc(std::max<size_t>(cs_.size(), 1) * 4, host_memory()));
  cs_.rebind({static_cast<uint32_t*>(bound_.cpu), bound_.size / 4});
  return Status();
}

Status Queue::submit(std::span<const int64_t> vars) {
  RETURN_IF_ERROR(refusal());
  RETURN_IF_ERROR(dev_.error());
  // A bound queue's words and argument blocks are patched in place: the GPU must be done with
  // the last submission of them first, even one made outside the timeline.
  if (bound_.size && last_seq_) RETURN_IF_ERROR(dev_.wait_sequence(engine(), last_seq_));
  cs_.apply(vars);
  for (const hcq::ArgsState* a : args_) a->apply(vars);
  if (cs_.size() == 0) return Status();
  submitted_ = true;
  if (!bound_.size) return dev_.submit_words(engine(), cs_.words(), &last_seq_);
  RETURN_IF_ERROR(dev_.publish(engine(), bound_.va, static_cast<uint32_t>(cs_.size())));
  // An empty ring submission behind the bound words: its completion release (after a WFI)
  // tells when the GPU finished them.
  return dev_.submit_words(engine(), {}, &last_seq_);
}

void Queue::reset() {
  CHECK(!bound_.size) << cs_.name() << ": reset of a bound queue";
  // The QMDs of a submitted recording may not have run yet: their memory is reused once the
  // channel's completion counter reached our last ring submission (which covers every earlier
  // one, on the timeline or not: its release follows a WFI).
  if (submitted_) {
    for (const hcq::Buffer& b : qmd_mem_) retired_.push_back({b, last_seq_});
    qmd_mem_.clear();
  }
  cs_.clear();
  args_.clear();
  qmd_next_ = 0;
  clear_refusal();
}

}  // namespace baregrad::nv
