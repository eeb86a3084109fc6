// Graph: a fixed list of launches and copies recorded once into bound queues (one per engine)
// and replayed as one timeline submission with patched inputs and symbolic values.
#pragma once

#include <memory>
#include <span>
#include <vector>

#include "hcq/hcq.h"

namespace baregrad::hcq {

// Bytes an item touches. A symbolic address (an input) is its own buffer: it overlaps only
// accesses through the same variable.
struct Access {
  Value va;
  size_t bytes = 0;
};

struct GraphItem {
  enum class Kind : uint8_t { kExec, kCopy };
  Kind kind = Kind::kExec;
  const Program* prg = nullptr;  // kExec; must outlive the graph
  std::vector<Value> bufs;       // kExec: buffer addresses, slot order
  std::vector<Value> vars;       // kExec: scalars
  Dim3 grid, block;              // kExec
  Value dst, src, bytes;         // kCopy
  std::vector<Access> reads, writes;
};

class Graph {
 public:
  // Records `items` for `dev`: execs on its compute queue, copies on its copy queue (the
  // compute queue without one). An item waits for the earlier items of other queues whose
  // writes it reads or whose reads or writes it overwrites; items of one queue run in order.
  // `num_vars` symbolic values are passed to each replay.
  static Result<std::unique_ptr<Graph>> create(Device& dev,
                                               std::vector<GraphItem> items,
                                               int num_vars);
  ~Graph();

  // Runs the graph with `vars` (num_vars values) as the next timeline submission. The previous
  // replay is waited for first, since its commands and arguments are patched in place.
  Status replay(std::span<const int64_t> vars);
  size_t size() const { return items_.size(); }
  // Cross-queue waits the recording needed.
  size_t dependencies() const { return deps_; }

 private:
  Graph(Device& dev, int num_vars) : dev_(dev), num_vars_(num_vars) {}

  Device& dev_;
  int num_vars_;
  std::vector<GraphItem> items_;
  std::vector<Buffer> args_mem_;
  std::vector<std::unique_ptr<ArgsState>> args_;
  std::unique_ptr<HwQueue> queues_[2];   // compute, copy (may be null)
  std::unique_ptr<Signal> progress_[2];  // per queue: items done, reset each replay
  uint64_t last_value_ = 0;              // the previous replay's timeline value
  uint64_t last_epoch_ = 0;
  size_t deps_ = 0;
  std::vector<int64_t> vars_;  // num_vars, then timeline - 1, timeline
};

}  // namespace baregrad::hcq
