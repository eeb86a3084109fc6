#include "drivers/nv/pushbuf.h"

#include "base/check.h"

namespace baregrad::nv {

uint32_t method_header(SecOp op, Subchannel sc, uint32_t method, uint32_t count_or_data) {
  CHECK(method % 4 == 0 && method <= kMaxMethod) << "method 0x" << std::hex << method;
  CHECK_LE(count_or_data, kMaxMethodCount) << "method 0x" << std::hex << method;
  return static_cast<uint32_t>(op) << 29 | count_or_data << 16 | static_cast<uint32_t>(sc) << 13 |
         method >> 2;
}

PushBuffer& PushBuffer::inc(Subchannel sc, uint32_t method, std::initializer_list<Word> data) {
  return burst(SecOp::kIncMethod, sc, method, data);
}

PushBuffer& PushBuffer::inc(Subchannel sc, uint32_t method, std::span<const uint32_t> data) {
  CHECK(!data.empty()) << "method 0x" << std::hex << method << " without data";
  auto out = cs_.reserve(1 + data.size());
  out[0] = method_header(SecOp::kIncMethod, sc, method, static_cast<uint32_t>(data.size()));
  for (size_t i = 0; i < data.size(); i++) out[1 + i] = data[i];
  return *this;
}

PushBuffer& PushBuffer::non_inc(Subchannel sc, uint32_t method, std::initializer_list<Word> data) {
  return burst(SecOp::kNonIncMethod, sc, method, data);
}

PushBuffer& PushBuffer::immd(Subchannel sc, uint32_t method, uint32_t data) {
  cs_.emit(method_header(SecOp::kImmdDataMethod, sc, method, data));
  return *this;
}

PushBuffer& PushBuffer::burst(SecOp op,
                              Subchannel sc,
                              uint32_t method,
                              std::initializer_list<Word> data) {
  CHECK(data.size() != 0) << "method 0x" << std::hex << method << " without data";
  uint32_t header = method_header(op, sc, method, static_cast<uint32_t>(data.size()));
  auto out = cs_.reserve(1 + data.size());  // all or nothing: an overrun fails here
  size_t pos = cs_.size() - out.size();
  out[0] = header;
  for (const Word& w : data) put(++pos, w);
  return *this;
}

void PushBuffer::put(size_t pos, const Word& w) {
  CHECK_LE(w.shift, 32u);
  uint32_t* word = cs_.data() + pos;
  if (!w.value.symbolic()) {
    *word = static_cast<uint32_t>(static_cast<uint64_t>(w.value.imm) >> w.shift);
    return;
  }
  *word = hcq::CmdStream::kPlaceholder;
  auto& patches = cs_.patches();
  if (w.shift == 0) {
    patches.add(pos * 4, w.value.var, hcq::PatchTable::Width::k32, 0xffffffffull);
    return;
  }
  // NOTE: PatchTable only shifts left. Bits [shift, shift + 32) of the value land in this word
  // as the upper half of a 64-bit patch over (previous word, this word) shifted left by
  // 32 - shift; the mask keeps the previous word. A data word always follows its header, so
  // the previous word exists.
  CHECK_GT(pos, 0u);
  patches.add((pos - 1) * 4, w.value.var, hcq::PatchTable::Width::k64, 0xffffffff00000000ull,
              static_cast<int>(32 - w.shift));
}

}  // namespace baregrad::nv
