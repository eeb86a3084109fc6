#include "runtime/beam.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <set>
#include <string>

#include "base/error.h"
#include "base/log.h"
#include "base/options.h"
#include "base/timer.h"
#include "compiler/cache.h"
#include "compiler/codegen/pipeline.h"

namespace baregrad::runtime {
namespace {

using compiler::AxisKind;
using compiler::Kernel;
using compiler::Opt;
using compiler::OptOp;

// Register pressure and compile time grow with the expanded lanes; beyond this, skip.
constexpr int64_t kMaxExpanded = 256;
// Bumped whenever the meaning of a stored entry changes.
constexpr const char* kDbVersion = "beam-db v1";
// Rounds without a 1% gain before the search stops.
constexpr int kPatience = 2;
// A stored entry meaning "the heuristics won".
constexpr const char* kDefault = "DEFAULT";

int64_t expanded(const Kernel& k) {
  int64_t n = 1;
  for (int i = 0; i < k.ndim(); i++)
    if (k.kinds()[i] == AxisKind::kUpcast || k.kinds()[i] == AxisKind::kUnroll) n *= k.shape()[i];
  return n;
}

// The kernel after `opts`, or nullopt when one is not legal.
std::optional<Kernel> applied(const compiler::UOpPtr& ast, const std::vector<Opt>& opts) {
  Kernel k(ast);
  for (const Opt& o : opts) {
    if (!k.legal(o)) return std::nullopt;
    k.apply(o);
  }
  return k;
}

// Frees its buffers on the way out.
struct Scratch {
  Device& dev;
  std::vector<Buffer> bufs;
  ~Scratch() {
    for (Buffer b : bufs) dev.free(b);
  }
};

// True when `b` holds what `a` holds, as values of `dt`: bit for bit for integers and bools;
// for floats within a reordered reduction's rounding (scaled by the largest magnitude), with
// NaNs in the same places.
bool same_values(const std::vector<uint8_t>& a, const std::vector<uint8_t>& b, compiler::DType dt) {
  if (a.size() != b.size()) return false;
  if (dt != compiler::dtypes::kFloat32 && dt != compiler::dtypes::kFloat64) return a == b;
  auto values = [&](const std::vector<uint8_t>& raw) {
    std::vector<double> v;
    for (size_t i = 0; i + dt.itemsize() <= raw.size(); i += dt.itemsize()) {
      if (dt == compiler::dtypes::kFloat32) {
        float f;
        std::memcpy(&f, &raw[i], 4);
        v.push_back(f);
      } else {
        double d;
        std::memcpy(&d, &raw[i], 8);
        v.push_back(d);
      }
    }
    return v;
  };
  std::vector<double> x = values(a), y = values(b);
  double scale = 0;
  for (double v : x)
    if (std::isfinite(v)) scale = std::max(scale, std::abs(v));
  for (size_t i = 0; i < x.size(); i++) {
    if (std::isnan(x[i]) || std::isnan(y[i])) {
      if (std::isnan(x[i]) != std::isnan(y[i])) return false;
      continue;
    }
    if (std::isinf(x[i]) || std::isinf(y[i])) {
      if (x[i] != y[i]) return false;
      continue;
    }
    if (std::abs(x[i] - y[i]) > 1e-4 * scale + 1e-3 * std::abs(x[i])) return false;
  }
  return true;
}

}  // namespace

std::string opts_text(const std::vector<Opt>& opts) {
  std::string s;
  for (const Opt& o : opts) s += (s.empty() ? "" : " ") + o.str();
  return s;
}

std::optional<std::vector<Opt>> parse_opts(std::string_view text) {
  static const std::pair<const char*, OptOp> kOps[] = {{"UPCAST", OptOp::kUpcast},
                                                       {"UNROLL", OptOp::kUnroll},
                                                       {"LOCAL", OptOp::kLocal},
                                                       {"SWAP", OptOp::kSwap},
                                                       {"SPLIT_REDUCE", OptOp::kSplitReduce},
                                                       {"GROUP", OptOp::kGroup},
                                                       {"GROUPTOP", OptOp::kGroupTop},
                                                       {"STAGE", OptOp::kStage}};
  std::vector<Opt> out;
  std::string s(text);
  size_t pos = 0;
  while (pos < s.size()) {
    size_t open = s.find('(', pos), close = s.find(')', pos);
    if (open == std::string::npos || close == std::string::npos || close < open)
      return std::nullopt;
    std::string name = s.substr(pos, open - pos);
    auto it = std::find_if(std::begin(kOps), std::end(kOps),
                           [&](const auto& p) { return name == p.first; });
    int axis = 0, amt = 0, used = 0;
    std::string args = s.substr(open, close - open + 1);
    if (it == std::end(kOps) || std::sscanf(args.c_str(), "(%d, %d)%n", &axis, &amt, &used) != 2 ||
        used != static_cast<int>(args.size()))
      return std::nullopt;
    out.push_back({it->second, axis, amt});
    pos = close + 1;
    if (pos < s.size() && (s[pos++] != ' ' || pos == s.size())) return std::nullopt;
  }
  return out;
}

std::vector<Opt> beam_actions(const Kernel& k, const compiler::TargetInfo& target) {
  std::vector<Opt> out;
  auto add = [&](Opt o) {
    if (k.legal(o)) out.push_back(o);
  };
  int64_t lanes = expanded(k);
  int64_t group = 1;  // threads of the work-group the LOCAL axes make on GPU targets
  for (int a = 0; a < k.ndim(); a++)
    if (k.kinds()[a] == AxisKind::kLocal) group *= k.shape()[a];
  for (int a = 0; a < k.ndim(); a++) {
    AxisKind kind = k.kinds()[a];
    if (kind == AxisKind::kGlobal) {
      for (int amt : {2, 3, 4, 5, 7, 8, 16})
        if (lanes * amt <= kMaxExpanded) add({OptOp::kUpcast, a, amt});
      if (target.has_local && k.count(AxisKind::kLocal) < 3)
        for (int amt : {2, 4, 8, 16, 32})
          if (group * amt <= target.max_block) add({OptOp::kLocal, a, amt});
    }
    if (kind == AxisKind::kReduce) {
      for (int amt : {2, 3, 4, 8, 16})
        if (lanes * amt <= kMaxExpanded) add({OptOp::kUnroll, a, amt});
      for (int amt : {2, 4, 8, 16, 32, 64}) add({OptOp::kSplitReduce, a, amt});
      if (target.has_local)
        for (int amt : {16, 32, 64, 128}) {
          add({OptOp::kGroup, a, amt});
          add({OptOp::kGroupTop, a, amt});
        }
      if (target.has_local)
        for (int amt : {8, 16, 32}) add({OptOp::kStage, a, amt});
    }
    for (int b = a + 1; b < k.ndim(); b++)
      if (k.shape()[a] != k.shape()[b] || k.kinds()[a] != k.kinds()[b]) add({OptOp::kSwap, a, b});
  }
  return out;
}

BeamResult beam_search(const compiler::UOpPtr& ast,
                       const compiler::TargetInfo& target,
                       const std::vector<Opt>& heuristic,
                       const BeamCost& cost,
                       int width,
                       double budget_s,
                       const std::function<void(int, int, int, double)>& progress) {
  double t0 = now_ms();
  auto out_of_time = [&] { return (now_ms() - t0) / 1000 > budget_s; };
  struct Entry {
    std::vector<Opt> opts;
    double cost;
  };
  std::set<std::pair<const compiler::UOp*, std::string>> seen;  // kernel states already costed
  BeamResult r;
  std::vector<Entry> timed;
  auto try_candidate = [&](const std::vector<Opt>& opts) {
    std::optional<Kernel> kk = applied(ast, opts);
    if (!kk || !seen.insert({kk->ast().get(), kk->str()}).second) return false;
    std::optional<double> c = cost(opts);
    r.timed++;
    if (c) timed.push_back({opts, *c});
    return true;
  };
  try_candidate(heuristic);
  r.default_cost = timed.empty() ? INFINITY : timed[0].cost;
  for (size_t n = heuristic.size(); n-- > 0 && !out_of_time();)  // its prefixes, longest first
    try_candidate(std::vector<Opt>(heuristic.begin(), heuristic.begin() + n));
  auto by_cost = [](const Entry& a, const Entry& b) { return a.cost < b.cost; };
  std::sort(timed.begin(), timed.end(), by_cost);
  std::vector<Entry> beam(timed.begin(), timed.begin() + std::min<size_t>(timed.size(), width));
  double best = beam.empty() ? INFINITY : beam[0].cost;
  int stale = 0;  // rounds in a row without a 1% gain
  for (int round = 1; !beam.empty() && !out_of_time() && stale < kPatience; round++) {
    std::vector<std::vector<Opt>> next;
    for (const Entry& e : beam) {
      std::optional<Kernel> kk = applied(ast, e.opts);
      for (const Opt& a : beam_actions(*kk, target)) {
        next.push_back(e.opts);
        next.back().push_back(a);
      }
    }
    timed.assign(beam.begin(), beam.end());
    int done = 0;
    for (const auto& opts : next) {
      if (out_of_time()) break;
      try_candidate(opts);
      done++;
      if (progress)
        progress(round, done, static_cast<int>(next.size()),
                 std::min_element(timed.begin(), timed.end(), by_cost)->cost);
    }
    std::sort(timed.begin(), timed.end(), by_cost);
    beam.assign(timed.begin(), timed.begin() + std::min<size_t>(timed.size(), width));
    double round_best = beam[0].cost;
    BG_LOG(1) << "beam round " << round << ": " << next.size() << " candidates, best "
              << round_best * 1e3 << " ms: " << opts_text(beam[0].opts);
    stale = round_best < best * 0.99 ? 0 : stale + 1;
    best = std::min(best, round_best);
  }
  if (!beam.empty()) {
    r.opts = beam[0].opts;
    r.cost = beam[0].cost;
  }
  for (const Entry& e : beam) r.finalists.push_back(e.opts);
  return r;
}

std::optional<std::vector<Opt>> beam_opts(Device& dev,
                                          const compiler::UOpPtr& ast,
                                          std::span<const Buffer> bufs,
                                          const BeamVars& vars) {
  int width = options().beam;
  if (width <= 0) return std::nullopt;
  const compiler::TargetInfo& target = dev.target_info();
  std::string key = std::string(kDbVersion) + "\n" + dev.compiler_key() + "\nthreads " +
                    std::to_string(target.threads) + "\nwidth " + std::to_string(width) + "\n" +
                    ast->str();
  compiler::KernelCache& db = compiler::KernelCache::global();
  if (std::optional<std::string> hit = db.get(key)) {
    if (*hit == kDefault) return std::nullopt;
    std::optional<std::vector<Opt>> opts = parse_opts(*hit);
    if (opts && applied(ast, *opts)) return opts;
    BG_LOG(1) << "beam: ignoring a stored entry that no longer applies: " << *hit;
  }
  std::optional<Kernel> k;
  try {
    k.emplace(ast);
  } catch (const baregrad::Error&) {
    return std::nullopt;  // compile() reports what is wrong with the AST
  }
  std::string name = compiler::kernel_name(*k);
  Scratch scratch{dev, {}};
  for (Buffer b : bufs) {
    Result<Buffer> s = dev.alloc(std::max<size_t>(b.bytes, 1));
    if (!s.ok()) return std::nullopt;  // no room to search in: the heuristics it is
    scratch.bufs.push_back(*s);
    if (b.bytes && !dev.copy(*s, b, b.bytes).ok()) return std::nullopt;
  }
  if (!dev.synchronize().ok()) return std::nullopt;
  auto run = [&](const std::optional<std::vector<Opt>>& opts, int times) -> std::optional<double> {
    Result<std::shared_ptr<Program>> prg = dev.compile(ast, opts);
    if (!prg.ok()) return std::nullopt;
    std::vector<int64_t> scalars = vars ? vars((*prg)->spec) : std::vector<int64_t>{};
    double best = INFINITY;
    for (int i = 0; i < times; i++) {
      double t = now_ms();
      if (!dev.launch(**prg, scratch.bufs, scalars).ok() || !dev.synchronize().ok())
        return std::nullopt;
      best = std::min(best, now_ms() - t);
    }
    return best / 1000;
  };
  double best_so_far = INFINITY;
  BeamCost cost = [&](const std::vector<Opt>& opts) -> std::optional<double> {
    std::optional<double> first = run(opts, 1);  // compiles; a slow candidate stops here
    if (!first || *first > 3 * best_so_far) return first;
    std::optional<double> c = run(opts, 3);
    if (c) best_so_far = std::min(best_so_far, *c);
    return c;
  };
  run(std::nullopt, 2);  // the first launches on fresh scratch memory pay its page faults
  bool tty = isatty(2);
  double t0 = now_ms();
  std::vector<Opt> heuristic = compiler::hand_coded_optimizations(*k, target);
  BeamResult r =
      beam_search(ast, target, heuristic, cost, width, options().beam_budget_s,
                  [&](int round, int done, int of, double best) {
                    if (tty)
                      std::fprintf(stderr, "\r[beam] %s: round %d, %d/%d, best %.3f ms   ",
                                   name.c_str(), round, done, of, best * 1e3);
                  });
  if (tty) std::fprintf(stderr, "\r\033[K");
  // The winner must compute what the default kernel computes, from the same scratch inputs:
  // every buffer the kernel writes starts as the real one and must end the same.
  Result<std::shared_ptr<Program>> plain = dev.compile(ast, std::nullopt);
  auto written = [&](const std::optional<std::vector<Opt>>& opts)
      -> std::optional<std::vector<std::vector<uint8_t>>> {
    std::vector<std::vector<uint8_t>> out;
    for (const compiler::BufferArg& a : (*plain)->spec.bufs)
      if (a.written && !dev.copy(scratch.bufs[a.slot], bufs[a.slot], bufs[a.slot].bytes).ok())
        return std::nullopt;
    if (!run(opts, 1)) return std::nullopt;
    for (const compiler::BufferArg& a : (*plain)->spec.bufs) {
      if (!a.written) continue;
      out.emplace_back(bufs[a.slot].bytes);
      if (!dev.copy_out(out.back().data(), scratch.bufs[a.slot], out.back().size()).ok())
        return std::nullopt;
    }
    return out;
  };
  // One-shot timings on a shared machine are noisy, and the first candidates run cold: the
  // default and the finalists are timed again, interleaved, and a finalist must beat the
  // default by 3% to replace it.
  std::vector<std::optional<std::vector<Opt>>> final_round{std::nullopt};  // the default first
  for (const std::vector<Opt>& f : r.finalists)  // the heuristics' own opts are the default
    if (f != heuristic && final_round.size() < 4) final_round.push_back(f);
  std::vector<double> final_best(final_round.size(), INFINITY);
  for (int rep = 0; rep < 3; rep++)
    for (size_t i = 0; i < final_round.size(); i++)
      if (std::optional<double> c = run(final_round[i], 1))
        final_best[i] = std::min(final_best[i], *c);
  bool wins = false;
  if (final_round.size() > 1) {
    size_t pick = std::min_element(final_best.begin() + 1, final_best.end()) - final_best.begin();
    r.default_cost = final_best[0];
    r.opts = *final_round[pick];
    r.cost = final_best[pick];
    wins = plain.ok() && r.cost < 0.97 * r.default_cost;
  }
  if (wins) {
    auto want = written(std::nullopt), got = written(r.opts);
    bool same = want && got && want->size() == got->size();
    size_t i = 0;
    for (const compiler::BufferArg& a : (*plain)->spec.bufs) {
      if (!a.written) continue;
      same = same && same_values((*want)[i], (*got)[i], a.dtype);
      i++;
    }
    if (!same) {
      std::fprintf(stderr,
                   "[beam] %s: the fastest candidate (%s) computes something else than the default "
                   "kernel; keeping the default (a compiler bug: please report it)\n",
                   name.c_str(), opts_text(r.opts).c_str());
      wins = false;
    }
  }
  std::fprintf(stderr, "[beam] %s: %.3f ms -> %.3f ms (%s), %d candidates in %.1f s\n",
               name.c_str(), r.default_cost * 1e3, (wins ? r.cost : r.default_cost) * 1e3,
               wins ? opts_text(r.opts).c_str() : "the heuristics", r.timed,
               (now_ms() - t0) / 1000);
  db.put(key, wins ? opts_text(r.opts) : kDefault);
  if (!wins) return std::nullopt;
  return r.opts;
}

}  // namespace baregrad::runtime
