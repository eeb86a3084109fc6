#include "hcq/cmdstream.h"

#include <cstring>

#include "base/check.h"

namespace baregrad::hcq {

void PatchTable::add(
    size_t offset, int32_t var, Width width, uint64_t mask, int shift, int64_t addend) {
  CHECK(var >= 0) << "patch at offset " << offset << " has no variable";
  entries_.push_back({offset, var, width, mask, shift, addend});
  last_.clear();
}

size_t PatchTable::apply(uint8_t* base, std::span<const int64_t> vars) {
  bool all = last_.size() != entries_.size();
  if (all) last_.assign(entries_.size(), 0);
  size_t written = 0;
  for (size_t i = 0; i < entries_.size(); i++) {
    const Entry& e = entries_[i];
    CHECK(static_cast<size_t>(e.var) < vars.size())
        << "patch at offset " << e.offset << " uses variable " << e.var << " of " << vars.size();
    int64_t v = vars[e.var];
    if (!all && last_[i] == v) continue;
    last_[i] = v;
    uint64_t bits =
        ((static_cast<uint64_t>(v) + static_cast<uint64_t>(e.addend)) << e.shift) & e.mask;
    if (e.width == Width::k32) {
      uint32_t old;
      std::memcpy(&old, base + e.offset, 4);
      uint32_t m = static_cast<uint32_t>(e.mask);
      uint32_t w = (old & ~m) | static_cast<uint32_t>(bits);
      std::memcpy(base + e.offset, &w, 4);
    } else {
      uint64_t old;
      std::memcpy(&old, base + e.offset, 8);
      uint64_t w = (old & ~e.mask) | bits;
      std::memcpy(base + e.offset, &w, 8);
    }
    written++;
  }
  return written;
}

void PatchTable::clear() {
  entries_.clear();
  last_.clear();
}

CmdStream::CmdStream(std::string name, size_t capacity_words)
    : name_(std::move(name)), own_(capacity_words), data_(own_.data()), capacity_(capacity_words) {}

std::span<uint32_t> CmdStream::reserve(size_t n) {
  CHECK(size_ + n <= capacity_) << name_ << ": " << n << " more words do not fit (" << size_
                                << " of " << capacity_ << " used)";
  std::span<uint32_t> out(data_ + size_, n);
  size_ += n;
  return out;
}

CmdStream& CmdStream::emit(uint32_t w) {
  reserve(1)[0] = w;
  return *this;
}

CmdStream& CmdStream::emit64(uint64_t v) {
  auto s = reserve(2);
  s[0] = static_cast<uint32_t>(v);
  s[1] = static_cast<uint32_t>(v >> 32);
  return *this;
}

CmdStream& CmdStream::emit_value(Value v) {
  if (!v.symbolic()) return emit64(static_cast<uint64_t>(v.imm));
  patches_.add(size_ * 4, v.var, PatchTable::Width::k64);
  emit(kPlaceholder);
  return emit(kPlaceholder);
}

void CmdStream::put(size_t pos, const Word& w) {
  CHECK(pos < size_) << name_ << ": put of word " << pos << " past the end (" << size_ << ")";
  if (!w.value.symbolic()) {
    CHECK_LT(w.shift, 64u);
    data_[pos] = static_cast<uint32_t>(
        (static_cast<uint64_t>(w.value.imm) + static_cast<uint64_t>(w.addend)) >> w.shift);
    return;
  }
  CHECK_LE(w.shift, 32u) << name_ << ": a symbolic word takes bits [shift, shift + 32)";
  data_[pos] = kPlaceholder;
  if (w.shift == 0) {
    patches_.add(pos * 4, w.value.var, PatchTable::Width::k32, 0xffffffffull, 0, w.addend);
    return;
  }
  // NOTE: PatchTable only shifts left. Bits [shift, shift + 32) of the value land in this word
  // as the upper half of a 64-bit patch over (previous word, this word) shifted left by
  // 32 - shift; the mask keeps the previous word.
  CHECK_GT(pos, 0u) << name_ << ": a shifted symbolic word cannot be the stream's first";
  patches_.add((pos - 1) * 4, w.value.var, PatchTable::Width::k64, 0xffffffff00000000ull,
               static_cast<int>(32 - w.shift), w.addend);
}

void CmdStream::set(size_t pos, uint32_t w) {
  CHECK(pos < size_) << name_ << ": set of word " << pos << " past the end (" << size_ << ")";
  data_[pos] = w;
}

void CmdStream::set64(size_t pos, uint64_t v) {
  CHECK(pos + 2 <= size_) << name_ << ": set64 of word " << pos << " past the end (" << size_
                          << ")";
  data_[pos] = static_cast<uint32_t>(v);
  data_[pos + 1] = static_cast<uint32_t>(v >> 32);
}

size_t CmdStream::apply(std::span<const int64_t> vars) {
  return patches_.apply(reinterpret_cast<uint8_t*>(data_), vars);
}

void CmdStream::rebind(std::span<uint32_t> mem) {
  CHECK(mem.size() >= size_) << name_ << ": rebind into " << mem.size() << " words, " << size_
                             << " used";
  if (mem.data() != data_) std::memcpy(mem.data(), data_, size_ * 4);
  data_ = mem.data();
  capacity_ = mem.size();
  own_.clear();
  own_.shrink_to_fit();
}

void CmdStream::clear() {
  size_ = 0;
  patches_.clear();
}

}  // namespace baregrad::hcq
