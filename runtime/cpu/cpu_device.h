// The CPU device: kernels compiled in-process (LLVM) or by clang (C), run on every core.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "compiler/program.h"
#include "runtime/cpu/object_loader.h"
#include "runtime/device.h"
#include "runtime/thread_pool.h"

namespace baregrad::runtime {

enum class CpuBackend { kLlvm, kClang };

class CpuDevice : public Device {
 public:
  // `threads` <= 0 means every core (or options().threads when set).
  explicit CpuDevice(CpuBackend backend = CpuBackend::kLlvm, int threads = 0);
  ~CpuDevice() override;

  std::string name() const override;
  const compiler::TargetInfo& target() const override { return target_; }
  Result<Buffer> alloc(size_t bytes) override;
  void free(Buffer b) override;
  Status copy_in(Buffer dst, const void* src, size_t bytes) override;
  Status copy_out(void* dst, Buffer src, size_t bytes) override;
  Result<std::shared_ptr<Program>> compile(
      const compiler::UOpPtr& ast,
      const std::optional<std::vector<compiler::Opt>>& opts = std::nullopt) override;
  Status launch(const Program& prg,
                std::span<const Buffer> bufs,
                std::span<const int64_t> vars = {}) override;
  Status synchronize() override { return Status(); }

 private:
  Result<std::shared_ptr<Program>> build(const compiler::UOpPtr& ast,
                                         const std::optional<std::vector<compiler::Opt>>& opts);

  CpuBackend backend_;
  compiler::TargetInfo target_;
  std::unique_ptr<compiler::Renderer> renderer_;
  std::unique_ptr<compiler::Compiler> compiler_;
  ObjectLoader loader_;
  ThreadPool pool_;
  std::mutex mu_;
  // (AST, opts) -> program; the entry holds the AST so its address stays unique.
  std::map<std::pair<const compiler::UOp*, std::string>,
           std::pair<compiler::UOpPtr, std::shared_ptr<Program>>>
      programs_;
};

}  // namespace baregrad::runtime
