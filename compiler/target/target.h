#pragma once

// compiler::Target: kernel AST -> lowered program -> source -> device code, and the compiled
// kernel cache, written once for every kind of device. A target implements render(),
// assemble(), layout() and cache_key(); a driver loads the Binary it produces
// (hcq::Device::load_program). Targets: CPU (LLVM, clang: cpu_target.h), NVIDIA (nv_target.h),
// OpenCL C (cl_target.h), AMD (amd_target.h).
//
//   ASSIGN_OR_RETURN(CompiledKernel k, target.compile(ast));
//   ASSIGN_OR_RETURN(std::unique_ptr<hcq::Program> prg, dev.load_program(k.binary));

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/binary.h"
#include "base/status.h"
#include "compiler/opt/kernel.h"
#include "compiler/program.h"
#include "compiler/target/target_info.h"

namespace baregrad::compiler {

// One kernel compiled by a Target.
struct CompiledKernel {
  ProgramSpec spec;        // the lowered program: buffers, vars, launch dims
  std::string source;      // what the renderer produced (C, LLVM IR)
  Binary binary;           // what a driver loads
  bool cache_hit = false;  // the code came from the kernel cache
  double compile_ms = 0;   // lowering, rendering and compiling
};

// Thread-safe: every method may be called from several threads at once.
class Target {
 public:
  virtual ~Target() = default;
  Target(const Target&) = delete;
  Target& operator=(const Target&) = delete;

  // What the codegen knows about this target.
  const TargetInfo& info() const { return info_; }
  // Lowers `ast` for this target (`opts` replace the heuristics) and compiles it.
  // InvalidArgument for a malformed AST or an illegal opt; see compile(spec) for the rest.
  Result<CompiledKernel> compile(const UOpPtr& ast,
                                 const std::optional<std::vector<Opt>>& opts = std::nullopt) const;
  // Compiles a lowered program: layout(), render(), then the code from the kernel cache
  // (keyed by cache_key() and the source) or from assemble(). InvalidArgument when the launch
  // does not fit the target; the compiler's error, with the numbered source, when it fails.
  virtual Result<CompiledKernel> compile(const ProgramSpec& spec) const;
  // The kernel as a person reads it (DEBUG=4 prints it): C on CPU targets, PTX on NVIDIA.
  virtual Result<std::string> listing(const CompiledKernel& k) const { return k.source; }
  // Identifies the compiler, its version and flags and the machine: part of every cache key.
  virtual std::string cache_key() const = 0;
  // The source text of a lowered program (C, LLVM IR): what assemble() compiles.
  virtual std::string render(const ProgramSpec& spec) const = 0;

 protected:
  explicit Target(TargetInfo info) : info_(std::move(info)) {}
  // The binary's format, arch, buffer slots and launch dimensions for `spec`;
  // InvalidArgument when the launch does not fit the device.
  virtual Status layout(const ProgramSpec& spec, Binary* b) const = 0;
  // Source -> code (an ELF object, a cubin) defining `spec.name`.
  virtual Result<std::string> assemble(const std::string& source,
                                       const ProgramSpec& spec) const = 0;

 private:
  TargetInfo info_;
};

}  // namespace baregrad::compiler
