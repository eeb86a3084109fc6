#include "drivers/amd/sdma.h"

#include <algorithm>
#include <string>
#include <vector>

#include "base/check.h"

namespace baregrad::amd {
namespace {

using hcq::Value;

// Header fields. Source: the three *_sdma_pkt_open.h files above:
// SDMA_PKT_*_HEADER_op 7:0, _sub_op 15:8; SDMA_PKT_FENCE_HEADER_mtype 18:16 (navi10 and v6 only);
// SDMA_PKT_POLL_REGMEM_HEADER_func 30:28, _mem_poll 31; SDMA_PKT_POLL_REGMEM_DW5_interval 15:0,
// _retry_count 27:16; SDMA_PKT_TRAP_INT_CONTEXT_int_context 27:0;
// SDMA_PKT_WRITE_UNTILED_DW_3_count 19:0 (words - 1).
constexpr uint32_t header(uint32_t op, uint32_t sub_op) { return op | sub_op << 8; }
constexpr uint32_t kFenceMtypeShift = 16;
constexpr uint32_t kPollFuncShift = 28;
constexpr uint32_t kPollMemPoll = 1u << 31;
constexpr uint32_t kPollRetryShift = 16;
constexpr uint32_t kTrapIntContextMask = 0x0fffffff;
constexpr uint32_t kWriteCountMask = 0x000fffff;

void emit_one_copy(hcq::CmdStream& cs, Value dst, Value src, Value bytes) {
  // COPY_LINEAR: header, COUNT (bytes - 1), PARAMETER (0: no swaps), src lo/hi, dst lo/hi.
  emit_words(cs, {header(kSdmaOpCopy, kSdmaSubopCopyLinear), Word::minus_one(bytes), 0u,
                  Word::lo(src), Word::hi(src), Word::lo(dst), Word::hi(dst)});
}

}  // namespace

Status emit_sdma_copy_linear(
    hcq::CmdStream& cs, SdmaVersion v, Value dst, Value src, uint64_t bytes) {
  const uint64_t max = copy_linear_max_bytes(v);
  if (bytes > max && (src.symbolic() || dst.symbolic())) {
    return invalid_argument("SDMA copy of " + std::to_string(bytes) + " bytes (over " +
                            std::to_string(max) + " per COPY_LINEAR) between symbolic addresses");
  }
  for (uint64_t done = 0; done < bytes;) {
    uint64_t n = std::min(bytes - done, max);
    auto at = [done](Value a) {
      return a.symbolic() ? a
                          : Value::of(static_cast<int64_t>(static_cast<uint64_t>(a.imm) + done));
    };
    emit_one_copy(cs, at(dst), at(src), Value::of(static_cast<int64_t>(n)));
    done += n;
  }
  return {};
}

void emit_sdma_copy_linear_sym(hcq::CmdStream& cs, Value dst, Value src, Value bytes) {
  CHECK(bytes.symbolic()) << "emit_sdma_copy_linear_sym of a constant count";
  emit_one_copy(cs, dst, src, bytes);
}

void emit_sdma_fence(hcq::CmdStream& cs, SdmaVersion v, Value addr, Word data) {
  check_aligned("SDMA FENCE", addr, 4);
  uint32_t mtype = v == SdmaVersion::k4 ? 0 : kSdmaFenceMtypeUc << kFenceMtypeShift;
  emit_words(cs, {header(kSdmaOpFence, 0) | mtype, Word::lo(addr), Word::hi(addr), data});
}

void emit_sdma_poll_regmem(hcq::CmdStream& cs,
                           Value addr,
                           Word ref,
                           uint32_t mask,
                           CompareFunc func,
                           uint32_t interval,
                           uint32_t retry_count) {
  check_aligned("SDMA POLL_REGMEM", addr, 4);
  CHECK(interval <= 0xffff && retry_count <= 0xfff);
  uint32_t h =
      header(kSdmaOpPollRegmem, 0) | static_cast<uint32_t>(func) << kPollFuncShift | kPollMemPoll;
  emit_words(cs, {h, Word::lo(addr), Word::hi(addr), ref, mask,
                  interval | retry_count << kPollRetryShift});
}

void emit_sdma_timestamp(hcq::CmdStream& cs, Value addr) {
  // SDMA_PKT_TIMESTAMP_GET_GLOBAL_WRITE_ADDR_LO holds address bits 31:3.
  check_aligned("SDMA TIMESTAMP", addr, 8);
  emit_words(
      cs, {header(kSdmaOpTimestamp, kSdmaSubopTimestampGetGlobal), Word::lo(addr), Word::hi(addr)});
}

void emit_sdma_trap(hcq::CmdStream& cs, uint32_t int_context) {
  CHECK_LE(int_context, kTrapIntContextMask) << "SDMA TRAP int_context";
  emit_words(cs, {header(kSdmaOpTrap, 0), int_context});
}

void emit_sdma_write(hcq::CmdStream& cs, Value addr, std::initializer_list<Word> data) {
  check_aligned("SDMA WRITE", addr, 4);
  CHECK(data.size() >= 1 && data.size() - 1 <= kWriteCountMask)
      << "SDMA WRITE of " << data.size() << " words";
  std::vector<Word> words = {header(kSdmaOpWrite, kSdmaSubopWriteLinear), Word::lo(addr),
                             Word::hi(addr), static_cast<uint32_t>(data.size() - 1)};
  words.insert(words.end(), data.begin(), data.end());
  emit_words(cs, words);
}

void emit_sdma_nop(hcq::CmdStream& cs, uint32_t dwords) {
  // A zero word is SDMA_OP_NOP with COUNT 0: one word (tinygrad pads IBs with zeros).
  auto out = cs.reserve(dwords);
  std::fill(out.begin(), out.end(), header(kSdmaOpNop, 0));
}

}  // namespace baregrad::amd
