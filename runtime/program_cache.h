// A device's compiled programs by (kernel AST, opts). UOps are interned, so an AST's address
// identifies it while the cache keeps the AST alive. Thread-safe; a miss builds outside the
// lock (two threads may build the same kernel once each; the first stored wins).
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "runtime/device.h"

namespace baregrad::runtime {

class ProgramCache {
 public:
  using Build = std::function<Result<std::shared_ptr<Program>>()>;
  // The program of (ast, opts), from `build` on a miss (an error is returned, not cached).
  Result<std::shared_ptr<Program>> get(const compiler::UOpPtr& ast,
                                       const std::optional<std::vector<compiler::Opt>>& opts,
                                       const Build& build);
  // Drops every program (their loaded forms go once no launch or graph holds them).
  void clear();

 private:
  std::mutex mu_;
  std::map<std::pair<const compiler::UOp*, std::string>,
           std::pair<compiler::UOpPtr, std::shared_ptr<Program>>>
      programs_;
};

}  // namespace baregrad::runtime
