// Symbolic sizes: integer polynomials over named, bounded variables (tinygrad's `sint`).
//
// A shape that holds a Variable (`a[:, :i]` is (3, i)) describes every value of `i` at once;
// a kernel built from it runs with `i` passed at launch. A Sym is a sum of terms coeff *
// v1 * v2 * ..., exact in int64 (arithmetic that leaves int64 throws Error("[sym] ...")).
// Comparisons that the bounds cannot decide are reported as undecided, never guessed.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace baregrad::compiler {

// A named int in [min, max] (inclusive).
struct SymVar {
  std::string name;
  int64_t min = 0;
  int64_t max = 0;
  auto operator<=>(const SymVar&) const = default;
};

// Values of the variables, by name.
using Bindings = std::map<std::string, int64_t>;

class Sym {
 public:
  Sym(int64_t c = 0);  // NOLINT(google-explicit-constructor): sizes are ints first
  static Sym var(const SymVar& v);

  bool is_const() const;
  // The constant (CHECKs is_const()).
  int64_t const_value() const;
  // Inclusive bounds over every value of the variables.
  int64_t vmin() const;
  int64_t vmax() const;
  // The value at `b`; throws Error("[sym] ...") naming a variable `b` lacks.
  int64_t eval(const Bindings& b) const;
  // The variables it uses, by name, each once.
  std::vector<SymVar> vars() const;

  friend Sym operator+(const Sym& a, const Sym& b);
  friend Sym operator-(const Sym& a, const Sym& b);
  friend Sym operator*(const Sym& a, const Sym& b);
  Sym operator-() const;
  bool operator==(const Sym&) const = default;
  std::string str() const;
  uint64_t hash() const;

  // One term: coeff times the product of `vars` (sorted; a variable repeats for a power).
  struct Term {
    std::vector<SymVar> vars;
    int64_t coeff = 0;
    bool operator==(const Term&) const = default;
  };
  const std::vector<Term>& terms() const { return terms_; }

 private:
  void normalize();
  std::pair<int64_t, int64_t> bounds() const;
  std::vector<Term> terms_;  // sorted by vars, no zero coefficients; {} is 0
};

// a < b (resp. a == b) when the bounds decide it for every value; nullopt when they do not.
std::optional<bool> sym_lt(const Sym& a, const Sym& b);
std::optional<bool> sym_eq(const Sym& a, const Sym& b);
// The product of `dims`.
Sym sym_prod(const std::vector<Sym>& dims);
// Plain ints as constant Syms.
std::vector<Sym> to_syms(const std::vector<int64_t>& v);
std::string syms_str(const std::vector<Sym>& v);
// True when some element holds a variable.
bool any_symbolic(const std::vector<Sym>& v);

}  // namespace baregrad::compiler
