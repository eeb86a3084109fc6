// A linearized kernel (what renderers consume) and the renderer / compiler interfaces.
//
// Linear IR contract, in the order of `uops` (every source appears before its users):
//   DEFINE_GLOBAL  arg: slot. bufs[slot] in the kernel ABI; dtype: pointer to the element type.
//   DEFINE_VAR     arg: VarArg. vars[i] where i is its position in ProgramSpec::vars.
//   SPECIAL        arg: VarArg named "core_lo" / "core_hi": the ABI's core_lo / core_hi.
//                  GPU targets (TargetInfo::gpu): "gidx0..2" (block index) and "lidx0..2"
//                  (thread index in the block), bounded by global_size / local_size.
//   CONST          a scalar or a vector (every lane the same value).
//   RANGE          src: start, end[, enclosing]; opens `for (r = start; r < end; r++)`.
//                  arg: loop id; a negative id marks a bounds check (end <= start + 1: at
//                  most one iteration), which a renderer may emit as `if (start < end)`.
//   ENDRANGE       src: the RANGE; closes that loop.
//   DEFINE_ACC     src: identity, ...; declares a mutable register initialised to the identity.
//   ACC_LOAD       src: acc, ...; the register's current value (extra sources only order it).
//   ACC_STORE      src: acc, value; assigns the register.
//   INDEX          src: buffer, index (int64)[, valid (bool)]; address of element `index`.
//   LOAD           src: INDEX[, BARRIER]. Loads dtype (a vector dtype loads that many
//                  consecutive elements). When the INDEX has `valid` and it is false, yields 0
//                  and must not touch memory. A load of shared memory follows its BARRIER.
//   STORE          src: INDEX (no valid), value; a vector value stores consecutive elements.
//   DEFINE_LOCAL   arg: elements. Shared memory of one work-group (TargetInfo::has_local
//                  targets only), indexed like a buffer; dtype: pointer to the element type.
//   BARRIER        src: shared-memory STOREs. Every thread of the work-group reaches it before
//                  any goes on; the stores before it are visible to the loads after it.
//   VECTORIZE      src: one scalar per lane. GEP: arg lane, extracts a scalar.
//   ALU ops        elementwise on scalars or vectors of equal lane count; CMP* give bool;
//                  WHERE(cond, a, b); MULACC(a, b, c) = a * b + c, may fuse.
//   CAST / BITCAST conversions (float->int truncates toward zero; bool is 0/1).
// EXP2/LOG2/SIN/POW reach a renderer only when its target declares them native.
//
// Kernel ABI (C):
//   void NAME(void* const* bufs, const int64_t* vars, int64_t core_lo, int64_t core_hi);
// The threaded loop of a kernel runs over [core_lo, core_hi); the device splits
// [0, thread_extent) among its workers. GPU programs have no threaded loop: they run as a grid
// of global_size blocks of local_size threads, every thread independent of the others.
#pragma once

#include <array>
#include <string>
#include <vector>

#include "base/status.h"
#include "compiler/uop.h"

namespace baregrad::compiler {

struct BufferArg {
  int slot = 0;
  DType dtype;       // element type
  int64_t size = 0;  // elements the kernel may touch (the extent of its views)
  bool written = false;
};

struct ProgramSpec {
  std::string name;             // the C symbol of the kernel
  std::vector<UOpPtr> uops;     // linear order
  std::vector<BufferArg> bufs;  // by slot
  std::vector<VarArg> vars;     // order of the vars[] argument
  int64_t thread_extent = 1;    // core_lo/core_hi split [0, thread_extent)
  double flops = 0;             // estimated, for benchmarks
  double bytes = 0;             // estimated unique bytes moved, for benchmarks
  // GPU targets: the launch grid (blocks) and block (threads). Static: kernel shapes are.
  std::array<int64_t, 3> global_size{1, 1, 1};
  std::array<int64_t, 3> local_size{1, 1, 1};
  // TargetInfo::buffer_align of the target it was lowered for: what the kernel assumes of
  // every buffer's base address.
  int buffer_align = 1;
};

// Turns a ProgramSpec into source text for one compiler.
class Renderer {
 public:
  virtual ~Renderer() = default;
  virtual std::string name() const = 0;
  // Source text that defines the kernel with the ABI above.
  virtual std::string render(const ProgramSpec& spec) const = 0;
};

// Turns source text into a relocatable ELF object that defines the kernel symbol.
class Compiler {
 public:
  virtual ~Compiler() = default;
  // Identifies the compiler, its flags and the CPU it targets; part of every cache key.
  virtual std::string cache_key() const = 0;
  // The object file bytes; on failure, a status whose message holds the compiler's own
  // diagnostics followed by the numbered source.
  virtual Result<std::string> compile(const std::string& src, const std::string& name) const = 0;
};

// `src` with line numbers, for compile-error messages.
std::string numbered_source(const std::string& src);

}  // namespace baregrad::compiler
