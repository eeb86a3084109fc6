// Graph: a fixed list of launches and copies, on one device or on several devices of one peer
// group, recorded once into bound queues (one per device and engine) and replayed as one
// timeline submission per device with patched inputs and symbolic values.
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
  // The device that runs the item; null means the graph's device. Buffers of another device
  // that the item touches must be mapped into this one (Allocator::map_into).
  Device* dev = nullptr;
  const Program* prg = nullptr;  // kExec; a program of `dev`; must outlive the graph
  std::vector<Value> bufs;       // kExec: buffer addresses, slot order
  std::vector<Value> vars;       // kExec: scalars
  Dim3 grid, block;              // kExec
  Value dst, src, bytes;         // kCopy
  std::vector<Access> reads, writes;
};

class Graph {
 public:
  // Records `items`: execs on their device's compute queue, copies on its copy queue (the
  // compute queue without one). An item waits for the earlier items of other queues (of any
  // device) whose writes it reads or whose reads or writes it overwrites; items of one queue run
  // in order. Every device the items name must share `dev`'s peer group. `num_vars` symbolic
  // values are passed to each replay.
  static Result<std::unique_ptr<Graph>> create(Device& dev,
                                               std::vector<GraphItem> items,
                                               int num_vars);
  ~Graph();

  // Runs the graph with `vars` (num_vars values): one timeline submission on each of its
  // devices, which signals that device's timeline when the device's items are done. The
  // previous replay is waited for first (on every device), since its commands and arguments are
  // patched in place. Nothing is submitted when a device of the graph has failed.
  Status replay(std::span<const int64_t> vars);
  size_t size() const { return items_.size(); }
  // Cross-queue waits the recording needed (within a device and across devices).
  size_t dependencies() const { return deps_; }
  // The devices the graph runs on, `dev` of create() first.
  std::vector<Device*> devices() const;
  // The bound queues: one per device and engine used.
  size_t queues() const { return lanes_.size(); }

 private:
  // One bound queue: a device and an engine.
  struct Lane {
    Device* dev = nullptr;
    int slot = 0;  // index into devs_
    bool copy = false;
    std::unique_ptr<HwQueue> q;
    std::unique_ptr<Signal> progress;  // items done, reset each replay (several lanes only)
    int count = 0;                     // items recorded
  };
  struct PerDevice {
    Device* dev = nullptr;
    uint64_t last_value = 0;  // the previous replay's timeline value on this device
    uint64_t last_epoch = 0;  // the epoch last_value belongs to
    uint64_t epoch = 0;       // the timeline epoch the lanes were recorded in
    std::vector<Buffer> args_mem;
  };

  explicit Graph(int num_vars) : num_vars_(num_vars) {}
  // (Re)records every lane against the devices' current timeline signals and binds it.
  Status record();
  // Waits for the previous replay, resets the progress signals and submits every lane; runs
  // with every device's submit lock held and vars_ holding this replay's timeline values.
  Status publish(std::span<const int64_t> vars);
  // The symbolic values of device slot d's previous and own timeline values.
  Value prev_of(int d) const { return Value::sym(num_vars_ + 2 * d); }
  Value self_of(int d) const { return Value::sym(num_vars_ + 2 * d + 1); }

  int num_vars_;
  std::vector<GraphItem> items_;
  std::vector<PerDevice> devs_;
  std::vector<Lane> lanes_;
  std::vector<int> item_lane_;                    // per item
  std::vector<std::unique_ptr<ArgsState>> args_;  // per item (null for copies)
  size_t deps_ = 0;
  std::vector<int64_t> vars_;  // num_vars, then (timeline - 1, timeline) per device
};

}  // namespace baregrad::hcq
