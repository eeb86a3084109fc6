// The LLVM IR emitter behind LlvmIrRenderer: one instance renders one ProgramSpec. Structure,
// memory and loops live in llvm_ir.cc, ALU ops and conversions in llvm_alu.cc.
#pragma once

#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "compiler/program.h"
#include "compiler/render/llvm_ir.h"

namespace baregrad::compiler {

class LlvmEmitter {
 public:
  LlvmEmitter(const ProgramSpec& spec, LlvmAbi abi) : spec_(spec), abi_(abi) {}
  // The whole module text: intrinsic declarations, the kernel body and the ABI wrapper.
  std::string module();

 private:
  struct Loop {
    std::string header, body, latch, exit, counter;
    bool once = false;  // a bounds check (negative RANGE id): a branch, no back edge
  };

  // Structure (llvm_ir.cc).
  void emit(const UOp* u);
  void emit_range(const UOp* u);
  void emit_endrange(const UOp* u);
  void emit_index(const UOp* u);
  void emit_load(const UOp* u);
  void emit_store(const UOp* u);
  void emit_vectorize(const UOp* u);
  std::string body_function();
  // The entry point of each ABI, calling the body.
  std::string wrapper_function() const;
  // The kNvptx and kAmdgpu entry points.
  std::string gpu_kernel();
  std::string twin_function() const;
  std::string twin_thread_function() const;
  void twin_params(std::string* out, std::string* args) const;
  // The body's trailing SPECIAL parameters and the values passed for them.
  void emit_shfl_xor(const UOp* u);
  std::string special_params() const;

  // ALU ops (llvm_alu.cc).
  void emit_alu(const UOp* u);
  std::string emit_binary(const UOp* u);
  std::string emit_unary(const UOp* u);
  std::string emit_int_divmod(const UOp* u);
  std::string emit_shift(const UOp* u);
  // `v` of dtype `from` converted to `to` (lane counts equal); returns the operand text.
  std::string convert(const std::string& v, DType from, DType to);
  std::string float_to_int(const std::string& v, DType from, DType to);
  // A float or double `v` rounded to bfloat `to` (to nearest even, subnormals kept).
  std::string to_bfloat(const std::string& v, DType from, DType to);

  // Helpers.
  // The operand text of `u` (CONSTs need not be listed before their users).
  std::string val(const UOpPtr& u) const;
  void def(const UOp* u, std::string operand) { vals_[u] = std::move(operand); }
  std::string fresh(const char* prefix = "t") {
    return "%" + std::string(prefix) + std::to_string(next_++);
  }
  // Emits `%x = <text>` and returns %x.
  std::string assign(const std::string& text);
  void line(const std::string& text) { body_ += "  " + text + "\n"; }
  void label(const std::string& name);
  // `v` (a scalar of `scalar`) broadcast to `n` lanes.
  std::string broadcast(const std::string& v, DType scalar, int n);
  // Calls an intrinsic `llvm.<base>.<suffixes>` returning `ret`, declaring it once.
  std::string call_intrinsic(const std::string& ret,
                             const std::string& base,
                             const std::string& suffixes,
                             const std::vector<std::string>& args);

  const ProgramSpec& spec_;
  const LlvmAbi abi_;
  std::unordered_map<const UOp*, std::string> vals_;
  std::unordered_map<const UOp*, Loop> loops_;
  std::vector<int> buf_slots_;          // DEFINE_GLOBAL slots in parameter order
  std::vector<std::string> var_names_;  // DEFINE_VAR parameters, by spec_.vars position
  std::set<std::string> declares_;
  std::string globals_;    // module-level definitions (shared memory)
  int64_t smem_used_ = 0;  // kHostTwin: bytes of %smem given to DEFINE_LOCALs so far
  std::string allocas_, body_, cur_block_ = "entry";
  int next_ = 0;
};

}  // namespace baregrad::compiler
