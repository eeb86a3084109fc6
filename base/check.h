#pragma once

// Always-on assertions for bugs (never for user or OS errors; use Status for those).
//   CHECK(n > 0) << "n=" << n;
//   CHECK_EQ(a.size(), b.size()) << "shape mismatch";
//   UNREACHABLE() << "unknown op " << op;
// On failure one line "CHECK failed: <cond> at <file>:<line>: <message>" goes to stderr and the
// process aborts. The message operands are evaluated only on failure.

#include <optional>
#include <sstream>
#include <string>
#include <type_traits>
#include <utility>

namespace baregrad::detail {

// Collects the message of a failed check; its destructor prints it and aborts.
class CheckFailure {
 public:
  CheckFailure(std::string headline, const char* file, int line);
  CheckFailure(const CheckFailure&) = delete;
  CheckFailure& operator=(const CheckFailure&) = delete;
  [[noreturn]] ~CheckFailure();

  std::ostream& stream() { return stream_; }

 private:
  std::string headline_;
  const char* file_;
  int line_;
  std::ostringstream stream_;
};

enum class CmpOp { kEq, kNe, kLt, kLe, kGt, kGe };

// Integers that std::cmp_* accepts: compared by value, so CHECK_LT(-1, 1u) holds.
template <class T>
concept CmpInteger =
    std::is_integral_v<T> && !std::is_same_v<T, bool> && !std::is_same_v<T, char> &&
    !std::is_same_v<T, wchar_t> && !std::is_same_v<T, char8_t> && !std::is_same_v<T, char16_t> &&
    !std::is_same_v<T, char32_t>;

template <CmpOp kOp, class A, class B>
constexpr bool compare(const A& a, const B& b) {
  if constexpr (CmpInteger<A> && CmpInteger<B>) {
    if constexpr (kOp == CmpOp::kEq) return std::cmp_equal(a, b);
    if constexpr (kOp == CmpOp::kNe) return std::cmp_not_equal(a, b);
    if constexpr (kOp == CmpOp::kLt) return std::cmp_less(a, b);
    if constexpr (kOp == CmpOp::kLe) return std::cmp_less_equal(a, b);
    if constexpr (kOp == CmpOp::kGt) return std::cmp_greater(a, b);
    if constexpr (kOp == CmpOp::kGe) return std::cmp_greater_equal(a, b);
  } else {
    if constexpr (kOp == CmpOp::kEq) return a == b;
    if constexpr (kOp == CmpOp::kNe) return a != b;
    if constexpr (kOp == CmpOp::kLt) return a < b;
    if constexpr (kOp == CmpOp::kLe) return a <= b;
    if constexpr (kOp == CmpOp::kGt) return a > b;
    if constexpr (kOp == CmpOp::kGe) return a >= b;
  }
}

template <class T>
void print_check_value(std::ostream& os, const T& value) {
  if constexpr (requires { os << value; }) {
    os << value;
  } else {
    os << "<unprintable>";
  }
}

// Returns the headline "a == b (1 vs. 2)" when the comparison fails, nothing when it holds.
template <CmpOp kOp, class A, class B>
std::optional<std::string> check_op(const A& a, const B& b, const char* expr) {
  if (compare<kOp>(a, b)) [[likely]] {
    return std::nullopt;
  }
  std::ostringstream os;
  os << "CHECK failed: " << expr << " (";
  print_check_value(os, a);
  os << " vs. ";
  print_check_value(os, b);
  os << ")";
  return os.str();
}

}  // namespace baregrad::detail

// `while` makes each macro one statement with no dangling-else hazard; the body never returns.
#define CHECK(cond)            \
  while (!(cond)) [[unlikely]] \
  ::baregrad::detail::CheckFailure("CHECK failed: " #cond, __FILE__, __LINE__).stream()

#define BG_CHECK_OP(kop, op, a, b)                                                               \
  while (auto bg_check_headline_ = ::baregrad::detail::check_op<::baregrad::detail::CmpOp::kop>( \
             (a), (b), #a " " #op " " #b))                                                       \
  ::baregrad::detail::CheckFailure(std::move(*bg_check_headline_), __FILE__, __LINE__).stream()

#define CHECK_EQ(a, b) BG_CHECK_OP(kEq, ==, a, b)
#define CHECK_NE(a, b) BG_CHECK_OP(kNe, !=, a, b)
#define CHECK_LT(a, b) BG_CHECK_OP(kLt, <, a, b)
#define CHECK_LE(a, b) BG_CHECK_OP(kLe, <=, a, b)
#define CHECK_GT(a, b) BG_CHECK_OP(kGt, >, a, b)
#define CHECK_GE(a, b) BG_CHECK_OP(kGe, >=, a, b)

// Marks code that must never run; the compiler knows it does not return.
#define UNREACHABLE() ::baregrad::detail::CheckFailure("UNREACHABLE", __FILE__, __LINE__).stream()
