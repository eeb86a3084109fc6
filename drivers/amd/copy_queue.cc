#include "drivers/amd/copy_queue.h"

#include "drivers/amd/sdma.h"

namespace baregrad::amd {
namespace {
constexpr size_t kPollWords = 6, kFenceWords = 4, kTrapWords = 2, kTimestampWords = 3;
}  // namespace

hcq::HwQueue& CopyQueue::wait(const hcq::Signal& s, hcq::Value v) {
  if (check_signal(s, "wait") && check_wait_value(s, v) && fits(kPollWords))
    emit_sdma_poll_regmem(cs_, static_cast<int64_t>(s.va()), Word::lo(v), 0xffffffff,
                          CompareFunc::kGreaterEqual);
  return *this;
}

hcq::HwQueue& CopyQueue::signal(const hcq::Signal& s, hcq::Value v) {
  if (!check_signal(s, "signal") || !fits(3 * kFenceWords + kTrapWords)) return *this;
  SdmaVersion sv = dev_.arch().sdma;
  auto va = static_cast<int64_t>(s.va());
  emit_sdma_fence(cs_, sv, va, Word::lo(v));
  emit_sdma_fence(cs_, sv, va + 4, Word::hi(v));
  const KfdEvent& e = dev_.signal_event();
  emit_sdma_fence(cs_, sv, static_cast<int64_t>(e.mailbox_va()), e.id());
  emit_sdma_trap(cs_, e.id());
  return *this;
}

hcq::HwQueue& CopyQueue::timestamp(const hcq::Signal& s) {
  if (check_signal(s, "timestamp") && fits(kTimestampWords))
    emit_sdma_timestamp(cs_, static_cast<int64_t>(s.va() + 8));
  return *this;
}

hcq::HwQueue& CopyQueue::copy(hcq::Value dst, hcq::Value src, hcq::Value bytes) {
  // Constant ranges are checked now; symbolic addresses fault on the GPU.
  if (!check_copy(dst, src, bytes, cs_.name())) return *this;
  uint64_t max = copy_linear_max_bytes(dev_.arch().sdma);
  if (bytes.symbolic()) {
    // One COPY_LINEAR whose COUNT (bytes - 1) is patched at submit, which checks the count fits
    // it: a symbolic size cannot be split into packets when recorded.
    if (!fits(kSdmaCopyLinearDwords)) return *this;
    emit_sdma_copy_linear_sym(cs_, dst, src, bytes);
    bound_copy_count(bytes, max, "SDMA COPY_LINEAR");
    return *this;
  }
  auto n = static_cast<uint64_t>(bytes.imm);
  if (fits(kSdmaCopyLinearDwords * ((n + max - 1) / max)))
    ok(emit_sdma_copy_linear(cs_, dev_.arch().sdma, dst, src, n));
  return *this;
}

}  // namespace baregrad::amd
