#include "tensor/schedule_cache.h"

#include <bit>
#include <mutex>
#include <string>
#include <unordered_map>
#include <unordered_set>

#include "base/options.h"

namespace baregrad::tensor::detail {
namespace {

// What the scheduler reads of a base, in the key's words. Tags keep the fields of different
// kinds of entry from lining up by accident.
enum Tag : uint64_t {
  kTarget = 1,
  kRealized,
  kPending,
  kSrc,
  kView,
  kMask,
  kNoMask,
  kConstValue,
  kWrite,
  kWriteEnd
};

// An unrealized constant: its value is not part of the key (see const_nodes()).
bool is_placeheld(const LazyBase& b) { return b.kind == LazyKind::kConst && !b.realized; }

uint64_t dtype_code(const DType& d) {
  return (uint64_t{static_cast<uint8_t>(d.scalar)} << 32) | (uint64_t{d.count} << 16) |
         (uint64_t{d.ptr} << 8) | uint64_t{static_cast<uint8_t>(d.addr)};
}

class KeyBuilder {
 public:
  explicit KeyBuilder(GraphKey& key) : key_(key) {}

  // False when the graph holds something the cache does not serve.
  bool build(const std::vector<Lazy>& targets) {
    put(kTarget, targets.size());
    for (const Lazy& t : targets)
      if (!put_lazy(t)) return false;
    for (size_t i = 0; i < key_.nodes.size(); i++)  // grows while the walk numbers new bases
      if (!put_base(*key_.nodes[i])) return false;
    put_writes();
    return true;
  }

 private:
  void put(uint64_t w) { key_.words.push_back(w); }
  void put(Tag tag, uint64_t w) {
    put(tag);
    put(w);
  }
  void put_ints(const std::vector<int64_t>& v) {
    put(v.size());
    for (int64_t x : v) put(static_cast<uint64_t>(x));
  }

  uint32_t number(const std::shared_ptr<LazyBase>& b) {
    if (index_.empty() && key_.nodes.size() < kLinear) {  // small graphs: no hashing
      for (size_t i = 0; i < key_.nodes.size(); i++)
        if (key_.nodes[i].get() == b.get()) return static_cast<uint32_t>(i);
    } else {
      if (index_.empty())
        for (size_t i = 0; i < key_.nodes.size(); i++) index_[key_.nodes[i].get()] = i;
      if (auto it = index_.find(b.get()); it != index_.end()) return it->second;
      index_[b.get()] = static_cast<uint32_t>(key_.nodes.size());
    }
    key_.nodes.push_back(b);
    return static_cast<uint32_t>(key_.nodes.size() - 1);
  }

  bool put_view(const ShapeTracker& st) {
    put(kView, st.views.size());
    for (const compiler::View& v : st.views) {
      if (v.sym) return false;
      put_ints(v.shape);
      put_ints(v.strides);
      put(static_cast<uint64_t>(v.offset));
      if (!v.mask) {
        put(kNoMask);
        continue;
      }
      put(kMask, v.mask->size());
      for (auto [lo, hi] : *v.mask) {
        put(static_cast<uint64_t>(lo));
        put(static_cast<uint64_t>(hi));
      }
    }
    return true;
  }

  bool put_lazy(const Lazy& l) {
    if (l.sym) return false;
    put(kSrc, number(l.base));
    return put_view(l.st);
  }

  // The buffers that writes (assign, setitem) go into, by which bases of the graph share
  // them (the scheduler orders the readers of a buffer before its writer) and by size (the
  // output's extent): the rest of the schedule depends on the graph alone.
  void put_writes() {
    std::unordered_map<const DeviceBuffer*, std::vector<uint32_t>> sharing;  // written buffers
    for (const auto& n : key_.nodes)
      if (n->write_into) sharing.emplace(n->write_into.get(), std::vector<uint32_t>{});
    if (sharing.empty()) return;
    for (size_t j = 0; j < key_.nodes.size(); j++)
      for (const DeviceBuffer* b : {key_.nodes[j]->realized.get(), key_.nodes[j]->write_into.get()})
        if (auto it = sharing.find(b); b && it != sharing.end()) it->second.push_back(j);
    for (size_t i = 0; i < key_.nodes.size(); i++) {
      const DeviceBuffer* w = key_.nodes[i]->write_into.get();
      if (!w) continue;
      put(kWrite, i);
      put(w->buffer.bytes);
      for (uint32_t j : sharing[w])
        if (j != i) put(j);
      put(kWriteEnd);
    }
  }

  bool put_base(const LazyBase& b) {
    if (b.sym || b.sym_value || b.write_view_sym || b.overwritten || b.dropped ||
        b.kind == LazyKind::kCopy)
      return false;
    if (b.write_into && !b.realized) {
      put(kWrite);
      if (!b.write_view)
        put(kNoMask);
      else if (!put_view(*b.write_view))
        return false;
    }
    put(b.realized ? kRealized : kPending, dtype_code(b.dtype));
    put(reinterpret_cast<uintptr_t>(b.device.get()));
    put_ints(b.shape);
    put(static_cast<uint64_t>(b.kind));
    if (is_placeheld(b)) {
      put(kConstValue);  // the kernels take it through const_placeholder()
    } else {
      put(std::bit_cast<uint64_t>(b.value));
    }
    if (b.realized) return true;  // the scheduler loads it (its sources are gone)
    put(static_cast<uint64_t>(b.op));
    put(b.force_kernel);
    put(b.axes.size());
    for (int a : b.axes) put(static_cast<uint64_t>(a));
    put(b.srcs.size());
    for (const Lazy& s : b.srcs)
      if (!put_lazy(s)) return false;
    return true;
  }

  static constexpr size_t kLinear = 24;
  GraphKey& key_;
  std::unordered_map<const LazyBase*, uint32_t> index_;
};

uint64_t hash_words(const std::vector<uint64_t>& words) {
  uint64_t h = 0x9e3779b97f4a7c15ULL ^ words.size();
  for (uint64_t w : words) {  // splitmix64's finalizer over a running sum
    h += w + 0x9e3779b97f4a7c15ULL;
    uint64_t z = h;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    h = z ^ (z >> 31);
  }
  return h;
}

struct CachedItem {
  compiler::UOpPtr tpl;        // the kernel with const_placeholder()s
  std::vector<uint32_t> bufs;  // node numbers
  // The placeholders in `tpl`: (placeholder, node number).
  std::vector<std::pair<compiler::UOpPtr, uint32_t>> consts;
  // The kernel with the values it was last served with (`bits`, by consts), given again
  // without a substitution while they do not change.
  compiler::UOpPtr last;
  std::vector<uint64_t> bits;
};
struct Entry {
  std::vector<uint64_t> words;
  std::vector<CachedItem> items;
};

uint64_t value_bits(const LazyBase& b) { return std::bit_cast<uint64_t>(b.value); }

// `ci`'s kernel with the values of `nodes`' constants.
compiler::UOpPtr instantiate(CachedItem& ci, const std::vector<std::shared_ptr<LazyBase>>& nodes) {
  if (ci.consts.empty()) return ci.tpl;
  bool same = true;
  for (size_t i = 0; i < ci.consts.size() && same; i++)
    same = value_bits(*nodes[ci.consts[i].second]) == ci.bits[i];
  if (same) return ci.last;
  std::vector<std::pair<compiler::UOpPtr, compiler::UOpPtr>> repl;
  repl.reserve(ci.consts.size());
  for (size_t i = 0; i < ci.consts.size(); i++) {
    const auto& [ph, n] = ci.consts[i];
    repl.emplace_back(ph, compiler::UOp::cnst(ph->dtype(), nodes[n]->value));
    ci.bits[i] = value_bits(*nodes[n]);
  }
  ci.last = ci.tpl->substitute(repl);
  return ci.last;
}

struct Cache {
  std::mutex mu;
  std::unordered_map<uint64_t, Entry> entries;
  ScheduleCacheStats stats;
};
Cache& cache() {
  static Cache* c = new Cache();  // never destroyed: schedules may run during static teardown
  return *c;
}
}  // namespace

std::optional<GraphKey> graph_key(const std::vector<Lazy>& targets) {
  if (options().schedule_cache_size <= 0) return std::nullopt;
  GraphKey key;
  key.words.reserve(64);
  if (!KeyBuilder(key).build(targets)) {
    std::lock_guard lock(cache().mu);
    cache().stats.uncacheable++;
    return std::nullopt;
  }
  key.hash = hash_words(key.words);
  return key;
}

std::optional<std::vector<ScheduleItem>> cached_schedule(const GraphKey& key) {
  Cache& c = cache();
  std::lock_guard lock(c.mu);
  auto it = c.entries.find(key.hash);
  if (it == c.entries.end() || it->second.words != key.words) {
    c.stats.misses++;
    return std::nullopt;
  }
  c.stats.hits++;
  std::vector<ScheduleItem> out;
  out.reserve(it->second.items.size());
  for (CachedItem& ci : it->second.items) {
    ScheduleItem item{instantiate(ci, key.nodes), {}, {}, false};
    item.bufs.reserve(ci.bufs.size());
    for (uint32_t n : ci.bufs) item.bufs.push_back(key.nodes[n]);
    out.push_back(std::move(item));
  }
  return out;
}

compiler::UOpPtr const_placeholder(uint32_t n, DType dtype) {
  return compiler::UOp::make(compiler::Op::DEFINE_VAR, dtype, {},
                             compiler::VarArg{"schedule_const" + std::to_string(n), 0, 0});
}

std::vector<uint32_t> const_nodes(const GraphKey& key) {
  std::vector<uint32_t> out;
  for (size_t i = 0; i < key.nodes.size(); i++)
    if (is_placeheld(*key.nodes[i])) out.push_back(static_cast<uint32_t>(i));
  return out;
}

std::vector<ScheduleItem> cache_schedule(const GraphKey& key, std::vector<ScheduleItem> items) {
  std::unordered_map<const LazyBase*, uint32_t> number;
  for (size_t i = 0; i < key.nodes.size(); i++)
    number[key.nodes[i].get()] = static_cast<uint32_t>(i);
  std::vector<std::pair<compiler::UOpPtr, uint32_t>> placeholders;
  for (uint32_t n : const_nodes(key))
    placeholders.emplace_back(const_placeholder(n, key.nodes[n]->dtype), n);
  Entry e{key.words, {}};
  bool keep = true;
  for (ScheduleItem& item : items) {
    if (!item.ast) {  // a copy: nothing to instantiate
      keep = false;
      continue;
    }
    CachedItem ci{item.ast, {}, {}, nullptr, {}};
    if (!placeholders.empty()) {
      std::unordered_set<const compiler::UOp*> present;
      for (const compiler::UOp* u : item.ast->toposort())
        if (u->op() == compiler::Op::DEFINE_VAR) present.insert(u);
      for (const auto& [ph, n] : placeholders)
        if (present.count(ph.get())) {
          ci.consts.emplace_back(ph, n);
          ci.bits.push_back(~value_bits(*key.nodes[n]));  // instantiate() below fills it
        }
      item.ast = instantiate(ci, key.nodes);
    }
    if (!item.vars.empty() || item.specialized) keep = false;
    for (const auto& b : item.bufs) {
      auto it = number.find(b.get());
      if (it == number.end()) {  // a base outside the walk
        keep = false;
        break;
      }
      ci.bufs.push_back(it->second);
    }
    e.items.push_back(std::move(ci));
  }
  if (!keep) return items;
  Cache& c = cache();
  std::lock_guard lock(c.mu);
  if (c.entries.size() >= static_cast<size_t>(options().schedule_cache_size)) c.entries.clear();
  c.entries[key.hash] = std::move(e);
  return items;
}

ScheduleCacheStats schedule_cache_stats() {
  Cache& c = cache();
  std::lock_guard lock(c.mu);
  ScheduleCacheStats s = c.stats;
  s.entries = c.entries.size();
  return s;
}

void clear_schedule_cache() {
  Cache& c = cache();
  std::lock_guard lock(c.mu);
  c.entries.clear();
  c.stats = {};
}

}  // namespace baregrad::tensor::detail
