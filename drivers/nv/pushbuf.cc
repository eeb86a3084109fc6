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
  for (const Word& w : data) cs_.put(++pos, w);
  return *this;
}

}  // namespace baregrad::nv
