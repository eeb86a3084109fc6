#include "drivers/nv/gpfifo.h"

#include <string>

#include "base/check.h"
#include "base/format.h"
#include "drivers/nv/classes.h"

namespace baregrad::nv {
namespace {

constexpr uint64_t kLevelSubroutine = 1;  // NVC56F_GP_ENTRY1_LEVEL_SUBROUTINE

}  // namespace

Result<uint64_t> gp_entry(uint64_t va, uint32_t words) {
  if (words == 0 || words > kGpEntryMaxWords) {
    return invalid_argument("GPFIFO entry of " + std::to_string(words) +
                            " words: the length must be 1.." + std::to_string(kGpEntryMaxWords));
  }
  if (va % 4 != 0 || va >= kGpEntryAddressLimit) {
    return invalid_argument("GPFIFO entry at " + hex(va) +
                            ": the pushbuffer must be 4-byte aligned and below 2^40");
  }
  uint64_t entry0 = va & 0xfffffffcull;  // GET 31:2, FETCH 1:0 = UNCONDITIONAL
  uint64_t entry1 = (va >> 32 & 0xff) | kLevelSubroutine << 9 | uint64_t{words} << 10;
  return entry0 | entry1 << 32;
}

GpFifoRing::GpFifoRing(uint32_t entries, uint32_t work_submit_token)
    : entries_(entries), token_(work_submit_token) {
  CHECK_GE(entries, 2u) << "a GPFIFO ring needs at least 2 entries";
}

uint32_t GpFifoRing::in_flight(uint32_t gp_get) const {
  CHECK_LT(gp_get, entries_) << "GPGet outside the ring";
  return (put_ + entries_ - gp_get) % entries_;
}

Status GpFifoRing::check_space(uint32_t n, uint32_t gp_get) const {
  if (gp_get >= entries_) {
    return internal("GPFIFO GPGet " + std::to_string(gp_get) + " outside the ring of " +
                    std::to_string(entries_) + " entries");
  }
  uint32_t free = entries_ - 1 - in_flight(gp_get);
  if (n > free) {
    return resource_exhausted("GPFIFO ring full: a submission of " + std::to_string(n) +
                              " entries, " + std::to_string(free) + " of " +
                              std::to_string(entries_) + " free (put " + std::to_string(put_) +
                              ", get " + std::to_string(gp_get) + ")");
  }
  return {};
}

Result<GpSubmit> GpFifoRing::push(uint64_t va, uint32_t words, uint32_t gp_get) {
  RETURN_IF_ERROR(check_space(1, gp_get));
  ASSIGN_OR_RETURN(uint64_t entry, gp_entry(va, words));
  GpSubmit s{put_, entry, (put_ + 1) % entries_, token_};
  put_ = s.gp_put;
  return s;
}

}  // namespace baregrad::nv
