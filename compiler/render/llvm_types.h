// LLVM IR spellings of baregrad dtypes and constants (LLVM 19 textual IR, opaque pointers).
#pragma once

#include <cstdint>
#include <string>

#include "compiler/uop.h"

namespace baregrad::compiler {

// "i1", "i32", "half", "bfloat", "float", "double", "<16 x float>", "ptr". With `memory`, bool
// is "i8" (its in-memory form); registers hold bool as "i1".
std::string llvm_type(DType t, bool memory = false);
// The intrinsic overload suffix: "f32", "v16f32", "i8", "v8i64" (register form).
std::string llvm_suffix(DType t);
// A scalar constant of `t`'s element type, without its type: "0x3FF0000000000000", "-5",
// "true", "0xH3C00", "0xR3F80". Ints are wrapped to the element width.
std::string llvm_float_literal(DType t, double v);
std::string llvm_int_literal(DType t, int64_t v);
// The operand text of `v` (as llvm_float_literal / llvm_int_literal) at `t`'s lane count: a
// scalar literal, or "<T x, T x, ...>" for vectors.
std::string llvm_splat(DType t, double v);
// `scalar` (a literal of t's element type) repeated over t's lanes; itself for scalars.
std::string llvm_splat_text(DType t, const std::string& scalar);
// The operand text of a CONST node.
std::string llvm_const(const UOp& c);
// `name` as an LLVM global identifier: "@name", or "@\"name\"" when it needs quoting.
std::string llvm_global(const std::string& name);

}  // namespace baregrad::compiler
