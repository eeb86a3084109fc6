#include "compiler/view.h"

#include <sstream>

#include "base/checked.h"

namespace baregrad::compiler {
namespace {
uint64_t mix(uint64_t h, uint64_t v) { return (h ^ v) * 0x100000001b3ull + (h >> 29); }

template <class T>
void join(std::ostringstream& os, const std::vector<T>& v) {
  os << "(";
  for (size_t i = 0; i < v.size(); i++) os << (i ? ", " : "") << v[i];
  os << (v.size() == 1 ? ",)" : ")");
}
}  // namespace

std::vector<int64_t> View::strides_for(const std::vector<int64_t>& shape) {
  std::vector<int64_t> strides(shape.size(), 0);
  int64_t acc = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    strides[i] = shape[i] == 1 ? 0 : acc;
    // Only a zero-size shape can overflow here (a zero size further out); its strides are moot.
    acc = checked_mul(acc, shape[i]).value_or(0);
  }
  return strides;
}

View View::contiguous(std::vector<int64_t> shape) {
  View v;
  v.strides = strides_for(shape);
  v.shape = std::move(shape);
  return v;
}

int64_t View::numel() const { return numel_or_fail("view", shape); }

bool View::is_contiguous() const { return offset == 0 && !mask && strides == strides_for(shape); }

std::string View::str() const {
  std::ostringstream os;
  os << "View(shape=";
  join(os, shape);
  os << ", strides=";
  join(os, strides);
  os << ", offset=" << offset;
  if (mask) {
    os << ", mask=(";
    for (auto& [lo, hi] : *mask) os << "(" << lo << "," << hi << ")";
    os << ")";
  }
  os << ")";
  return os.str();
}

std::string ShapeTracker::str() const {
  std::string s = "ShapeTracker(";
  for (size_t i = 0; i < views.size(); i++) s += (i ? ", " : "") + views[i].str();
  return s + ")";
}

uint64_t hash_value(const View& v) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (int64_t s : v.shape) h = mix(h, s);
  for (int64_t s : v.strides) h = mix(h, s * 31);
  h = mix(h, v.offset);
  if (v.mask)
    for (auto& [lo, hi] : *v.mask) h = mix(mix(h, lo), hi);
  return h;
}

uint64_t hash_value(const ShapeTracker& st) {
  uint64_t h = 7;
  for (auto& v : st.views) h = mix(h, hash_value(v));
  return h;
}

}  // namespace baregrad::compiler
