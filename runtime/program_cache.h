// A device's compiled programs by (kernel AST, opts), least recently used first out beyond
// options().program_cache_size. UOps are interned, so an AST's address identifies it while the
// cache keeps the AST alive. Thread-safe; a miss builds outside the lock (two threads may build
// the same kernel once each; the first stored wins). Programs are shared: one evicted while a
// launch or a graph still holds it stays loaded until that lets go.
#pragma once

#include <cstddef>
#include <functional>
#include <list>
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
  // Programs held now, and built / evicted since the cache was made.
  ProgramCacheStats stats() const;

 private:
  using Key = std::pair<const compiler::UOp*, std::string>;
  struct Entry {
    Key key;
    compiler::UOpPtr ast;  // keeps key.first alive
    std::shared_ptr<Program> prg;
  };
  mutable std::mutex mu_;
  std::list<Entry> lru_;  // most recently used first
  std::map<Key, std::list<Entry>::iterator> index_;
  size_t built_ = 0, evicted_ = 0;
};

}  // namespace baregrad::runtime
