// Schedules by the shape of their lazy graph. create_schedule() of a graph built the same way as
// an earlier one (the same ops, dtypes, shapes, views, devices and sharing of nodes; other
// buffers, other values of scalar constants) takes that schedule's kernel ASTs with this graph's
// bases and constants instead of scheduling again: a training or decode loop without TinyJit, and
// every tiny op from Python, rebuild the same graphs on new buffers each step. SCHEDULE_CACHE_SIZE
// bounds the entries (the cache starts over when full); 0 turns it off.
//
// Writes into existing buffers (assign, setitem) are served too: the key holds where each write
// goes (its view) and which bases of the graph share its buffer. Graphs the cache does not serve
// are scheduled as before: symbolic shapes and constants, overwritten or dropped bases, and
// copies between devices. Those are where the schedule depends on more than the graph's shape
// (the current values of Variables).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "tensor/lazy.h"
#include "tensor/schedule.h"

namespace baregrad::tensor::detail {

struct GraphKey {
  std::vector<uint64_t> words;  // the graph's structure, bases numbered in the order first met
  uint64_t hash = 0;
  // The bases, by number. The values of the unrealized constant bases (a Python scalar: x * s)
  // are not in `words`: graphs that differ only in them share one entry (const_nodes()).
  std::vector<std::shared_ptr<LazyBase>> nodes;
};

// The numbers of key's unrealized constant bases.
std::vector<uint32_t> const_nodes(const GraphKey& key);

// The stand-in for the value of constant base number `n` (of dtype `dtype`) in the kernels
// create_schedule() builds for the cache: each entry keeps its kernels with these, and a graph
// served from it gets them replaced by its own constants' values.
compiler::UOpPtr const_placeholder(uint32_t n, DType dtype);

// The key of the graph under `targets`; nullopt when the graph holds something the cache does
// not serve (see above) or the cache is off. create_schedule() asks only when there is something
// to compute.
std::optional<GraphKey> graph_key(const std::vector<Lazy>& targets);

// The schedule cached for `key`, its items reading key.nodes; nullopt on a miss.
std::optional<std::vector<ScheduleItem>> cached_schedule(const GraphKey& key);

// Keeps `items` (the schedule of key's graph, which create_schedule just made with
// const_placeholder() for key.consts) for graphs of the same key, and returns them with this
// graph's constant values in place of the placeholders. Items with Variables are not kept.
std::vector<ScheduleItem> cache_schedule(const GraphKey& key, std::vector<ScheduleItem> items);

struct ScheduleCacheStats {
  uint64_t hits = 0;
  uint64_t misses = 0;       // served graphs scheduled anew (and then kept)
  uint64_t uncacheable = 0;  // graphs the cache does not serve
  size_t entries = 0;
};
ScheduleCacheStats schedule_cache_stats();
void clear_schedule_cache();

}  // namespace baregrad::tensor::detail
