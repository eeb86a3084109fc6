#include "runtime/program_cache.h"

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
  auto key = std::make_pair(ast.get(), opts_key(opts));
  {
    std::lock_guard lock(mu_);
    if (auto it = programs_.find(key); it != programs_.end()) return it->second.second;
  }
  ASSIGN_OR_RETURN(std::shared_ptr<Program> prg, build());
  std::lock_guard lock(mu_);
  auto [it, added] = programs_.emplace(key, std::make_pair(ast, prg));
  return it->second.second;
}

void ProgramCache::clear() {
  std::map<std::pair<const compiler::UOp*, std::string>,
           std::pair<compiler::UOpPtr, std::shared_ptr<Program>>>
      old;
  {
    std::lock_guard lock(mu_);
    old.swap(programs_);
  }
}

}  // namespace baregrad::runtime
