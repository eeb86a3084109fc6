#include "drivers/nv/compute_queue.h"

#include <algorithm>
#include <cstring>

#include "base/format.h"
#include "drivers/nv/methods.h"
#include "drivers/nv/program.h"
#include "drivers/nv/qmd.h"

namespace baregrad::nv {
namespace {
constexpr size_t kQmdSlotBytes = 512;  // >= the largest QMD, 256-aligned
constexpr size_t kQmdChunkBytes = 64 << 10;
constexpr size_t kQmdSlotsPerChunk = kQmdChunkBytes / kQmdSlotBytes;
constexpr size_t kLaunchWords = 6;
constexpr size_t kBarrierWords = 2;
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
}  // namespace

ComputeQueue::ComputeQueue(Device& dev) : Queue(dev, hcq::Engine::kCompute) {}

ComputeQueue::~ComputeQueue() {
  drain();  // the GPU may still read our QMDs
  for (uint64_t q : qmds_) dev_.forget_qmd(q);
  for (const hcq::Buffer& b : qmd_mem_) dev_.allocator().free(b);
  for (const Retired& r : retired_) dev_.allocator().free(r.mem);
}

hcq::HwQueue& ComputeQueue::memory_barrier() {
  if (fits(kBarrierWords)) emit_invalidate_shader_caches(pb_);
  return *this;
}

Result<uint64_t> ComputeQueue::qmd_slot(void** cpu) {
  size_t chunk = qmd_next_ / kQmdSlotsPerChunk, slot = qmd_next_ % kQmdSlotsPerChunk;
  if (chunk == qmd_mem_.size()) {
    const Retired* r = retired_.empty() ? nullptr : &retired_.front();
    if (r && dev_.completed_sequence(engine()) >= r->seq) {
      qmd_mem_.push_back(r->mem);
      retired_.pop_front();
    } else {
      ASSIGN_OR_RETURN(hcq::Buffer b,
                       dev_.allocator().alloc(kQmdChunkBytes,
                                              {.host = true, .cpu_access = true, .nolru = true}));
      qmd_mem_.push_back(b);
    }
  }
  qmd_next_++;
  *cpu = static_cast<uint8_t*>(qmd_mem_[chunk].cpu) + slot * kQmdSlotBytes;
  return qmd_mem_[chunk].va + slot * kQmdSlotBytes;
}

hcq::HwQueue& ComputeQueue::exec(const hcq::Program& hprg,
                                 const hcq::ArgsState& args,
                                 hcq::Dim3 grid,
                                 hcq::Dim3 block) {
  const auto* prg = program_of<Program>(hprg, cs_.name(), "NV");
  if (!prg || !check_exec(*prg, args, cs_.name())) return *this;
  // Local memory grows before the first launch that needs more (its methods precede ours).
  if (prg->local_bytes() > dev_.local_bytes_per_thread() &&
      !ok(dev_.ensure_local_memory(prg->local_bytes())))
    return *this;
  if (!ok(prg->check_launch(grid, block)) || !fits(kLaunchWords)) return *this;
  const hcq::Buffer& cb0 = args.mem();
  if (cb0.va % 64 != 0 || cb0.size > (64 << 10)) {
    refuse(invalid_argument("exec of '" + prg->name() + "': the argument block at " + hex(cb0.va) +
                            " (" + std::to_string(cb0.size) +
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

void ComputeQueue::reset() {
  // The QMDs of a submitted recording may not have run yet: their memory is reused once the
  // channel's completion counter reached our last ring submission (which covers every earlier
  // one, on the timeline or not: its release follows a WFI).
  if (submitted()) {
    for (const hcq::Buffer& b : qmd_mem_) retired_.push_back({b, last_seq()});
    qmd_mem_.clear();
  }
  qmd_next_ = 0;
  Queue::reset();
}

}  // namespace baregrad::nv
