#include "compiler/target/llvm_target.h"

#include <algorithm>
#include <cstdio>
#include <memory>
#include <mutex>
#include <vector>

#include "base/log.h"
#include "base/timer.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/Config/llvm-config.h"
#include "llvm/IR/LLVMContext.h"
#include "llvm/IR/LegacyPassManager.h"
#include "llvm/IR/Module.h"
#include "llvm/IR/Verifier.h"
#include "llvm/IRReader/IRReader.h"
#include "llvm/MC/TargetRegistry.h"
#include "llvm/Passes/OptimizationLevel.h"
#include "llvm/Passes/PassBuilder.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/Target/TargetMachine.h"
#include "llvm/Target/TargetOptions.h"
#include "llvm/TargetParser/Host.h"

namespace baregrad::compiler {
namespace {

std::string host_features() {
  std::vector<std::string> names;
  for (const auto& f : llvm::sys::getHostCPUFeatures())
    names.push_back((f.second ? "+" : "-") + f.first().str());
  std::sort(names.begin(), names.end());
  std::string out;
  for (const std::string& n : names) out += (out.empty() ? "" : ",") + n;
  return out;
}

std::string fnv1a_hex(const std::string& s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ull;
  char buf[20];
  std::snprintf(buf, sizeof(buf), "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

// NOTE: Zen4 defaults to 256-bit vectors; with AVX-512 kernels ask for full zmm width.
void set_function_attrs(llvm::Module& m, const std::string& cpu, const std::string& features) {
  bool avx512 = features.find("+avx512f") != std::string::npos;
  for (llvm::Function& f : m) {
    if (f.isDeclaration()) continue;
    f.addFnAttr("target-cpu", cpu);
    f.addFnAttr("target-features", features);
    if (avx512) {
      f.addFnAttr("prefer-vector-width", "512");
      f.addFnAttr("min-legal-vector-width", "512");
    }
  }
}

void optimize(llvm::Module& m, llvm::TargetMachine& tm) {
  llvm::LoopAnalysisManager lam;
  llvm::FunctionAnalysisManager fam;
  llvm::CGSCCAnalysisManager cgam;
  llvm::ModuleAnalysisManager mam;
  llvm::PipelineTuningOptions pto;
  pto.LoopVectorization = true;
  pto.SLPVectorization = true;
  pto.LoopInterleaving = true;
  pto.LoopUnrolling = true;
  llvm::PassBuilder pb(&tm, pto);
  pb.registerModuleAnalyses(mam);
  pb.registerCGSCCAnalyses(cgam);
  pb.registerFunctionAnalyses(fam);
  pb.registerLoopAnalyses(lam);
  pb.crossRegisterProxies(lam, fam, cgam, mam);
  llvm::ModulePassManager mpm = pb.buildPerModuleDefaultPipeline(llvm::OptimizationLevel::O2);
  mpm.run(m, mam);
}

}  // namespace

void init_llvm_native_target() {
  static std::once_flag once;
  std::call_once(once, [] {
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
    llvm::InitializeNativeTargetAsmParser();
  });
}

void init_llvm_nvptx_target() {
  static std::once_flag once;
  std::call_once(once, [] {
    LLVMInitializeNVPTXTargetInfo();
    LLVMInitializeNVPTXTarget();
    LLVMInitializeNVPTXTargetMC();
    LLVMInitializeNVPTXAsmPrinter();
  });
}

void init_llvm_amdgpu_target() {
  static std::once_flag once;
  std::call_once(once, [] {
    LLVMInitializeAMDGPUTargetInfo();
    LLVMInitializeAMDGPUTarget();
    LLVMInitializeAMDGPUTargetMC();
    LLVMInitializeAMDGPUAsmPrinter();
  });
}

LlvmCompiler::LlvmCompiler() {
  init_llvm_native_target();
  triple_ = llvm::sys::getDefaultTargetTriple();
  cpu_ = llvm::sys::getHostCPUName().str();
  features_ = host_features();
}

LlvmCompiler::LlvmCompiler(std::string triple, std::string cpu, std::string features)
    : triple_(std::move(triple)), cpu_(std::move(cpu)), features_(std::move(features)) {
  init_llvm_native_target();
  if (triple_.starts_with("nvptx")) init_llvm_nvptx_target();
  if (triple_.starts_with("amdgcn")) init_llvm_amdgpu_target();
}

std::string LlvmCompiler::cache_key() const {
  return "llvm" + std::to_string(LLVM_VERSION_MAJOR) + "-" + triple_ + "-" + cpu_ + "-" +
         fnv1a_hex(features_) + "-O2";
}

Result<std::string> LlvmCompiler::compile(const std::string& src, const std::string& name) const {
  ScopedTimer timer("llvm compile " + name);
  return run(src, name, Output::kObject);
}

Result<std::string> LlvmCompiler::optimized_ir(const std::string& src) const {
  return run(src, "", Output::kIr);
}

Result<std::string> LlvmCompiler::assembly(const std::string& src, const std::string& name) const {
  return run(src, name, Output::kAssembly);
}

Result<std::string> LlvmCompiler::run(const std::string& src,
                                      const std::string& name,
                                      Output out) const {
  // The context outlives the module: members are destroyed in reverse order.
  auto ctx = std::make_unique<llvm::LLVMContext>();
  llvm::SMDiagnostic diag;
  auto buf = llvm::MemoryBuffer::getMemBuffer(src, name.empty() ? "kernel" : name, false);
  std::unique_ptr<llvm::Module> m = llvm::parseIR(buf->getMemBufferRef(), diag, *ctx);
  if (!m) {
    std::string msg;
    llvm::raw_string_ostream os(msg);
    diag.print("llvm", os, false);
    return invalid_argument("llvm: cannot parse IR:\n" + msg + "\n" + numbered_source(src));
  }
  std::string verify_msg;
  llvm::raw_string_ostream vos(verify_msg);
  if (llvm::verifyModule(*m, &vos))
    return invalid_argument("llvm: invalid IR:\n" + verify_msg + "\n" + numbered_source(src));
  if (!name.empty()) {
    llvm::Function* f = m->getFunction(name);
    if (f == nullptr || f->isDeclaration())
      return invalid_argument("llvm: the IR does not define @" + name + "\n" +
                              numbered_source(src));
  }

  std::string err;
  const llvm::Target* target = llvm::TargetRegistry::lookupTarget(triple_, err);
  if (target == nullptr) return internal("llvm: no target for " + triple_ + ": " + err);
  std::unique_ptr<llvm::TargetMachine> tm(target->createTargetMachine(
      triple_, cpu_, features_, llvm::TargetOptions(), llvm::Reloc::PIC_, std::nullopt,
      llvm::CodeGenOptLevel::Aggressive));
  if (!tm) return internal("llvm: cannot create a TargetMachine for " + triple_ + " " + cpu_);
  m->setTargetTriple(triple_);
  m->setDataLayout(tm->createDataLayout());
  set_function_attrs(*m, cpu_, features_);
  optimize(*m, *tm);

  if (out == Output::kIr || options().debug >= 5) {
    std::string ir;
    llvm::raw_string_ostream os(ir);
    m->print(os, nullptr);
    if (out == Output::kIr) return ir;
    BG_LOG(5) << "optimized LLVM IR of " << name << ":\n" << ir;
  }
  llvm::SmallVector<char, 0> bytes;
  llvm::raw_svector_ostream os(bytes);
  llvm::legacy::PassManager pm;
  auto kind = out == Output::kAssembly ? llvm::CodeGenFileType::AssemblyFile
                                       : llvm::CodeGenFileType::ObjectFile;
  if (tm->addPassesToEmitFile(pm, os, nullptr, kind))
    return internal("llvm: the TargetMachine cannot emit this file type");
  pm.run(*m);
  return std::string(bytes.begin(), bytes.end());
}

}  // namespace baregrad::compiler
