// The CPU device's packet format: what its software queues record and its workers execute.
// Encoders are pure: they append words to a CmdStream and return.
//
// Every packet is a header word (opcode << 24 | payload words) and its payload. 64-bit fields
// are two words, low first; any of them may be symbolic (patched at submit).
#pragma once

#include <cstdint>

#include "hcq/cmdstream.h"
#include "hcq/hcq.h"

namespace baregrad::cpu {

enum class Opcode : uint8_t {
  kWait = 1,       // signal va, value: stall until *va >= value
  kSignal = 2,     // signal va, value: *va = value
  kTimestamp = 3,  // signal va: *(va + 8) = clock in ns
  kBarrier = 4,    // (none): a full memory fence
  kExec = 5,       // program, args va, grid x y z, block x y z
  kCopy = 6,       // dst va, src va, bytes
  kIndirect = 7,   // va, words: run the packets stored there (a bound queue)
};

constexpr uint32_t header(Opcode op, uint32_t payload_words) {
  return static_cast<uint32_t>(op) << 24 | payload_words;
}
constexpr Opcode opcode_of(uint32_t header) { return static_cast<Opcode>(header >> 24); }
constexpr uint32_t payload_of(uint32_t header) { return header & 0xffffff; }

inline void emit_wait(hcq::CmdStream& cs, hcq::Value sig_va, hcq::Value value) {
  cs.emit(header(Opcode::kWait, 4)).emit_value(sig_va).emit_value(value);
}
inline void emit_signal(hcq::CmdStream& cs, hcq::Value sig_va, hcq::Value value) {
  cs.emit(header(Opcode::kSignal, 4)).emit_value(sig_va).emit_value(value);
}
inline void emit_timestamp(hcq::CmdStream& cs, hcq::Value sig_va) {
  cs.emit(header(Opcode::kTimestamp, 2)).emit_value(sig_va);
}
inline void emit_barrier(hcq::CmdStream& cs) { cs.emit(header(Opcode::kBarrier, 0)); }
inline void emit_exec(
    hcq::CmdStream& cs, uint64_t program, hcq::Value args_va, hcq::Dim3 grid, hcq::Dim3 block) {
  cs.emit(header(Opcode::kExec, 10)).emit64(program).emit_value(args_va);
  cs.emit(grid.x).emit(grid.y).emit(grid.z).emit(block.x).emit(block.y).emit(block.z);
}
inline void emit_copy(hcq::CmdStream& cs, hcq::Value dst, hcq::Value src, hcq::Value bytes) {
  cs.emit(header(Opcode::kCopy, 6)).emit_value(dst).emit_value(src).emit_value(bytes);
}
inline void emit_indirect(hcq::CmdStream& cs, uint64_t va, uint64_t words) {
  cs.emit(header(Opcode::kIndirect, 4)).emit64(va).emit64(words);
}

}  // namespace baregrad::cpu
