// The pushbuffer method encoder: method headers and their data words over an hcq::CmdStream.
// Encoders are pure: they append words (and patches for symbolic values) and return.
//
// A header word is (host class clc56f.h, NVC56F_DMA_*; the same format on c86f/c96f):
//   31:29 SEC_OP | 28:16 COUNT (or IMMD_DATA) | 15:13 SUBCHANNEL | 11:0 method byte offset >> 2
#pragma once

#include <cstdint>
#include <initializer_list>
#include <span>

#include "hcq/cmdstream.h"

namespace baregrad::nv {

// NVC56F_DMA_SEC_OP_*.
enum class SecOp : uint32_t {
  kIncMethod = 1,       // INC_METHOD: data word i goes to method + 4 * i
  kNonIncMethod = 3,    // NON_INC_METHOD: every data word goes to method
  kImmdDataMethod = 4,  // IMMD_DATA_METHOD: 13-bit data in the header, no data words
  kOneInc = 5,          // ONE_INC: the first word to method, the rest to method + 4
};

// Subchannel assignment (tinygrad's): host/FIFO methods on 0, the compute object on 1 and the
// copy object on 4 (each bound with SET_OBJECT).
enum class Subchannel : uint32_t { kHost = 0, kCompute = 1, kCopy = 4 };

constexpr uint32_t kMaxMethodCount = 0x1fff;  // NVC56F_DMA_METHOD_COUNT 28:16
constexpr uint32_t kMaxImmediate = 0x1fff;    // NVC56F_DMA_IMMD_DATA 28:16
constexpr uint32_t kMaxMethod = 0x3ffc;       // NVC56F_DMA_METHOD_ADDRESS 11:0, in words

// A header word; CHECKs the method (4-aligned, <= kMaxMethod) and the count/immediate field.
uint32_t method_header(SecOp op, Subchannel sc, uint32_t method, uint32_t count_or_data);

using hcq::Word;  // a constant or symbolic data word

// Appends methods to a command stream. An overrun CHECK-fails in the stream, at the emit site.
class PushBuffer {
 public:
  explicit PushBuffer(hcq::CmdStream& cs) : cs_(cs) {}

  // INC_METHOD header with count = data.size(), then the data.
  PushBuffer& inc(Subchannel sc, uint32_t method, std::initializer_list<Word> data);
  // The same with constant words (e.g. a whole QMD).
  PushBuffer& inc(Subchannel sc, uint32_t method, std::span<const uint32_t> data);
  // NON_INC_METHOD header, then the data (all written to `method`).
  PushBuffer& non_inc(Subchannel sc, uint32_t method, std::initializer_list<Word> data);
  // IMMD_DATA_METHOD: one word, `data` <= kMaxImmediate (CHECKed).
  PushBuffer& immd(Subchannel sc, uint32_t method, uint32_t data);

  hcq::CmdStream& stream() { return cs_; }

 private:
  PushBuffer& burst(SecOp op, Subchannel sc, uint32_t method, std::initializer_list<Word> data);

  hcq::CmdStream& cs_;
};

}  // namespace baregrad::nv
