#include "runtime/program_cache.h"

#include "base/options.h"

namespace baregrad::runtime {
namespace {

std::string opts_key(const std::optional<std::vector<compiler::Opt>>& opts) {
  if (!opts) return "heuristic";
  std::string s;
  for (auto& o : *opts) s += o.str();
  return s;
}

}  // namespace

Result<std::shared_ptr<Program>> ProgramCache::get(
    const compiler::UOpPtr& ast,
    const std::optional<std::vector<compiler::Opt>>& opts,
    const Build& build) {
  Key key(ast.get(), opts_key(opts));
  {
    std::lock_guard lock(mu_);
    if (auto it = index_.find(key); it != index_.end()) {
      lru_.splice(lru_.begin(), lru_, it->second);
      return it->second->prg;
    }
  }
  ASSIGN_OR_RETURN(std::shared_ptr<Program> prg, build());
  std::list<Entry> dropped;  // destroyed after the lock is released
  std::lock_guard lock(mu_);
  built_++;
  if (auto it = index_.find(key); it != index_.end()) return it->second->prg;
  lru_.push_front(Entry{key, ast, prg});
  index_.emplace(key, lru_.begin());
  size_t cap = std::max(1, options().program_cache_size);
  while (lru_.size() > cap) {
    index_.erase(lru_.back().key);
    dropped.splice(dropped.begin(), lru_, std::prev(lru_.end()));
    evicted_++;
  }
  return prg;
}

void ProgramCache::clear() {
  std::list<Entry> old;
  {
    std::lock_guard lock(mu_);
    index_.clear();
    old.swap(lru_);
  }
}

ProgramCacheStats ProgramCache::stats() const {
  std::lock_guard lock(mu_);
  return {lru_.size(), built_, evicted_};
}

}  // namespace baregrad::runtime
