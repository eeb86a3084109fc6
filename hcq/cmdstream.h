// Command streams and symbolic patches: what every queue records before submit().
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace baregrad::hcq {

// A 64-bit value recorded into a command stream or an argument block: a constant, or variable
// `var` of the vector passed to submit() (a buffer address, a size, a timeline value).
struct Value {
  int64_t imm = 0;
  int32_t var = -1;

  static constexpr Value of(int64_t v) { return {v, -1}; }
  static constexpr Value sym(int32_t index) { return {0, index}; }
  constexpr bool symbolic() const { return var >= 0; }
  constexpr Value(int64_t v = 0) : imm(v) {}  // NOLINT: constants convert implicitly

 private:
  constexpr Value(int64_t v, int32_t index) : imm(v), var(index) {}
};

// Symbolic values written into memory at submit. Entries are byte offsets from a base the
// owner passes to apply(), so memory that moves (a stream bound into device memory) keeps them.
class PatchTable {
 public:
  enum class Width : uint8_t { k32, k64 };

  // At `offset`: (((vars[var] + addend) << shift) & mask) replaces the bits of `mask`
  // (read-modify-write when mask is partial, as bitfields in QMDs need; the addend serves
  // fields that hold a count minus one).
  void add(size_t offset,
           int32_t var,
           Width width,
           uint64_t mask = ~0ull,
           int shift = 0,
           int64_t addend = 0);
  // Writes the entries whose variable changed since the last apply, all of them on the first
  // apply or after invalidate(); returns how many it wrote. CHECKs every index against `vars`.
  size_t apply(uint8_t* base, std::span<const int64_t> vars);
  // The next apply writes every entry (the memory behind the base changed).
  void invalidate() { last_.clear(); }
  size_t size() const { return entries_.size(); }
  void clear();

 private:
  struct Entry {
    size_t offset;
    int32_t var;
    Width width;
    uint64_t mask;
    int shift;
    int64_t addend;
  };
  std::vector<Entry> entries_;
  std::vector<int64_t> last_;  // the values of the last apply; empty: none yet
};

// One 32-bit command word: a constant, or bits [shift, shift + 32) of a possibly symbolic Value
// plus an addend (lo: shift 0, hi: shift 32, an address >> 8: shift 8, a count minus one:
// minus_one). CmdStream::put writes a symbolic word as kPlaceholder plus a patch; symbolic shifts
// are 0..32, constant ones 0..63.
struct Word {
  Value value;
  uint32_t shift = 0;
  int64_t addend = 0;

  Word(uint32_t v) : value(static_cast<int64_t>(v)) {}  // NOLINT: constants convert implicitly
  static Word lo(Value v) { return Word(v, 0); }
  static Word hi(Value v) { return Word(v, 32); }
  static Word shr(Value v, uint32_t shift) { return Word(v, shift); }
  // The low 32 bits of v - 1 (fields that hold a count minus one).
  static Word minus_one(Value v) {
    Word w(v, 0);
    w.addend = -1;
    return w;
  }

 private:
  Word(Value v, uint32_t s) : value(v), shift(s) {}
};

// 32-bit command words with a fixed capacity: reserve, emit, patch later. An overrun fails at
// the emit site (CHECK naming the stream), never on the device.
class CmdStream {
 public:
  static constexpr uint32_t kPlaceholder = 0xbadc0ded;  // a symbolic word before its first patch

  CmdStream(std::string name, size_t capacity_words);

  // `n` words at the end of the stream, to be filled by the caller.
  std::span<uint32_t> reserve(size_t n);
  CmdStream& emit(uint32_t w);
  // Low word first.
  CmdStream& emit64(uint64_t v);
  // A constant as two words (low first); a symbolic value as placeholders plus a patch.
  CmdStream& emit_value(Value v);
  // Writes `w` at already reserved word `pos`: its bits, or a placeholder and a patch. A
  // symbolic word with shift > 0 patches the word before it too (pos > 0: a packet's body word
  // always follows its header).
  void put(size_t pos, const Word& w);
  // Rewrites already emitted words (fields only known later, e.g. a packet's length).
  void set(size_t pos, uint32_t w);
  void set64(size_t pos, uint64_t v);

  size_t size() const { return size_; }
  size_t capacity() const { return capacity_; }
  const std::string& name() const { return name_; }
  std::span<const uint32_t> words() const { return {data_, size_}; }
  uint32_t* data() { return data_; }
  PatchTable& patches() { return patches_; }

  // Writes the symbolic words whose variables changed; returns how many patches it wrote.
  size_t apply(std::span<const int64_t> vars);
  // Moves the words into `mem` (e.g. device-visible memory; at least size() words). Later
  // emits and patches write there; the capacity becomes mem.size().
  void rebind(std::span<uint32_t> mem);
  // Empties the stream (and its patches); storage stays where it is.
  void clear();

 private:
  std::string name_;
  std::vector<uint32_t> own_;  // storage until rebind()
  uint32_t* data_;
  size_t size_ = 0;
  size_t capacity_;
  PatchTable patches_;
};

}  // namespace baregrad::hcq
