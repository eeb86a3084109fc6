// BEAM search (issue 18; tinygrad's BEAM, with a tuning database and a check of the winner): the
// opts of a kernel chosen by timing real launches over the explicit action space of
// compiler/opt/kernel.h, instead of the hand-written heuristics.
//
//   BEAM=N           beam width; 0 (the default) uses the heuristics
//   BEAM_BUDGET_S    seconds of search per kernel (the best found so far is kept)
//
// Each kernel's result is stored in the on-disk cache (compiler/cache.h) under a key holding the
// whole kernel AST, the device's compiler key (target, architecture, compiler version), its
// thread count and the width, so a second run finds it without timing anything; any change to
// those is another key. A stored result is applied through Kernel::legal like any opt, and the
// winner of a search must give the default kernel's results before it is stored.
#pragma once

#include <functional>
#include <optional>
#include <span>
#include <vector>

#include "runtime/device.h"

namespace baregrad::runtime {

// The actions a search tries from `k`'s current state, each legal on `k`.
std::vector<compiler::Opt> beam_actions(const compiler::Kernel& k,
                                        const compiler::TargetInfo& target);

// The cost of a candidate (opts applied to the kernel from nothing): seconds per launch, or
// nullopt when it does not compile or run.
using BeamCost = std::function<std::optional<double>(const std::vector<compiler::Opt>&)>;

struct BeamResult {
  std::vector<compiler::Opt> opts;  // the best found
  double cost = 0;                  // its cost
  double default_cost = 0;          // the heuristics' cost (the search's first candidate)
  int timed = 0;                    // candidates costed
  std::vector<std::vector<compiler::Opt>> finalists;  // the last beam, cheapest first
};

// Beam search over the opts of `ast` (a kernel AST), seeded with `heuristic` (costed first) and
// each of its prefixes (longest first): each round extends every beam entry by every action of
// beam_actions, costs the candidates not seen before (as kernel states) and keeps the `width`
// cheapest; it stops after two rounds in a row without a 1% gain, or after `budget_s` seconds.
// `progress` is called after each candidate (round, done, of, best cost).
BeamResult beam_search(const compiler::UOpPtr& ast,
                       const compiler::TargetInfo& target,
                       const std::vector<compiler::Opt>& heuristic,
                       const BeamCost& cost,
                       int width,
                       double budget_s,
                       const std::function<void(int, int, int, double)>& progress = {});

// The opts realize() compiles `ast` with on `dev`: nullopt (the heuristics) when BEAM is 0;
// else the tuning database's entry, or a search that times launches on scratch copies of
// `bufs` (slot order) with `vars`' scalars: a progress line on stderr when it is a terminal, then
// one line with the default and the best time. The winner is kept only when every buffer it writes
// ends as the default kernel's does (floats within reordering error); else the default is.
// `vars` gives a program's launch scalars (in its spec's order, which opts may change).
using BeamVars = std::function<std::vector<int64_t>(const compiler::ProgramSpec&)>;
std::optional<std::vector<compiler::Opt>> beam_opts(Device& dev,
                                                    const compiler::UOpPtr& ast,
                                                    std::span<const Buffer> bufs,
                                                    const BeamVars& vars = {});

// Opts as text ("UPCAST:0:4,SWAP:1:2") and back; nullopt for text that is not a list of opts.
std::string opts_text(const std::vector<compiler::Opt>& opts);
std::optional<std::vector<compiler::Opt>> parse_opts(std::string_view text);

}  // namespace baregrad::runtime
