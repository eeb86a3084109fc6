#pragma once

// The Device interface the tensor layer programs against: memory, kernels, launches. Every
// HCQ backend is one HcqDevice (hcq_device.h: a compiler::Target composed with an
// hcq::Device); DEV=CUDA (cuda/cuda_device.h) and DEV=CL (cl/cl_device.h) are adapters over
// vendor runtimes.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "compiler/opt/kernel.h"
#include "compiler/target/target.h"

namespace baregrad::runtime {

class Device;

// Device memory: `va` is the device address (a host address on host-addressable devices).
struct Buffer {
  uint64_t va = 0;
  size_t bytes = 0;
};

// A kernel compiled and loaded on one device; each device extends it with its loaded form.
// Made as a shared_ptr (compile()), so a launch in flight can hold the one it runs.
class Program : public std::enable_shared_from_this<Program> {
 public:
  // Takes the spec and source of `kernel` (its binary stays: the device loaded it).
  Program(const Device& device, compiler::CompiledKernel&& kernel)
      : spec(std::move(kernel.spec)),
        source(std::move(kernel.source)),
        compile_ms(kernel.compile_ms),
        cache_hit(kernel.cache_hit),
        device_(&device) {}
  virtual ~Program() = default;
  Program(const Program&) = delete;
  Program& operator=(const Program&) = delete;

  compiler::ProgramSpec spec;  // the lowered kernel: name, buffers, vars, launch dims
  std::string source;          // what the renderer produced
  double compile_ms = 0;       // lowering + rendering + compiling (+ loading)
  bool cache_hit = false;      // the binary came from the kernel cache

  // The device that loaded it: launches and graphs on another device are refused.
  const Device& device() const { return *device_; }

 private:
  const Device* device_;
};

// A recorded sequence of launches replayed as one submission (an HCQ graph on HCQ devices).
class Graph {
 public:
  virtual ~Graph() = default;
  // Runs every launch with input i bound to inputs[i]; asynchronous like Device::launch.
  virtual Status replay(std::span<const Buffer> inputs) = 0;
  // Launches per replay.
  virtual size_t size() const = 0;
};

struct GraphLaunch {
  std::shared_ptr<Program> prg;
  std::vector<Buffer> bufs;  // slot order; slot 0 is written, the others read
  std::vector<int> input;    // per slot: the input bound there (bufs ignored), or -1
};

// A device's in-memory program cache (program_cache.h).
struct ProgramCacheStats {
  size_t size = 0;     // programs held now (at most options().program_cache_size)
  size_t built = 0;    // programs compiled and loaded on a miss
  size_t evicted = 0;  // least recently used programs dropped for room
};

class Device {
 public:
  virtual ~Device() = default;
  // The DEV= name, e.g. "CPU".
  virtual std::string name() const = 0;
  // Whether Buffer::va is host memory the CPU may read in place once synchronize() returns.
  virtual bool host_addressable() const { return false; }
  // What the codegen knows about the target this device compiles for.
  virtual const compiler::TargetInfo& target_info() const = 0;
  // Names the compiler, its version and the architecture it targets: kernels compiled under
  // another key may differ (the tuning database of runtime/beam.h keys on it).
  virtual std::string compiler_key() const { return name() + " " + target_info().name; }
  // Allocates `bytes` (64-byte aligned); ResourceExhausted when memory runs out.
  virtual Result<Buffer> alloc(size_t bytes) = 0;
  // Frees a buffer from alloc(); null buffers are ignored.
  virtual void free(Buffer b) = 0;
  // `bytes` (> 0) of the caller's host memory at `host` as a buffer of this device, used in
  // place (free() forgets it, the caller keeps it alive): Unimplemented unless the device's
  // kernels address host memory directly (host_addressable()).
  virtual Result<Buffer> adopt_host(void* host, size_t bytes) {
    (void)host;
    (void)bytes;
    return unimplemented(
        name() + " cannot use host memory in place (its kernels do not address host memory)");
  }
  // Copies host memory into / out of a buffer; InvalidArgument when `bytes` exceeds it.
  virtual Status copy_in(Buffer dst, const void* src, size_t bytes) = 0;
  virtual Status copy_out(void* dst, Buffer src, size_t bytes) = 0;
  // Lowers, renders, compiles and loads a kernel AST; cached by AST, opts and target.
  // InvalidArgument for a malformed AST; Internal with the source for a compiler failure.
  virtual Result<std::shared_ptr<Program>> compile(
      const compiler::UOpPtr& ast,
      const std::optional<std::vector<compiler::Opt>>& opts = std::nullopt) = 0;
  // The state of the compile() cache; zeros for a device without one.
  virtual ProgramCacheStats program_cache_stats() const { return {}; }
  // Copies `bytes` from `src` to `dst`, buffers of this device that do not overlap;
  // asynchronous, ordered after earlier launches and copies (synchronize() waits for it).
  // InvalidArgument (check_copy) before anything is issued.
  virtual Status copy(Buffer dst, Buffer src, size_t bytes) = 0;
  // Runs `prg` with bufs[i] bound to slot i; checks the program's device, counts and sizes
  // first (check_launch).
  virtual Status launch(const Program& prg,
                        std::span<const Buffer> bufs,
                        std::span<const int64_t> vars = {}) = 0;
  // Waits for every launch and copy issued so far.
  virtual Status synchronize() = 0;
  // Records `launches` (with `num_inputs` inputs bound per replay) as a graph.
  virtual Result<std::unique_ptr<Graph>> make_graph(const std::vector<GraphLaunch>& launches,
                                                    size_t num_inputs) = 0;
};

// What Device::copy checks first: InvalidArgument naming "copy", `bytes`, both buffer sizes and
// the device when `bytes` exceeds either buffer or a buffer is null (with bytes > 0).
Status check_copy(const Device& dev, Buffer dst, Buffer src, size_t bytes);
// What Device::launch checks first: InvalidArgument naming the kernel and the device when
// `prg` belongs to another device, or the buffer count, a buffer's size (what the kernel
// declares for its slot), a buffer's base alignment (ProgramSpec::buffer_align: what the
// kernel's vector accesses assume) or the var count does not match.
Status check_launch(const Device& dev,
                    const Program& prg,
                    std::span<const Buffer> bufs,
                    std::span<const int64_t> vars);

// The inputs of a graph of launches, as every Graph::replay checks them.
struct GraphInputs {
  std::vector<size_t> need;  // per input: the bytes the slots it is bound to need
  std::vector<bool> used;    // per input: bound to some slot
  std::vector<int> align;    // per input: the base alignment its kernels assume (bytes)
  // replay()'s check: InvalidArgument naming the device when `inputs` has another count, or
  // a bound input is null, smaller than it needs or not aligned as its kernels assume.
  Status check(const Device& dev, std::span<const Buffer> inputs) const;
};
// What make_graph() checks first: InvalidArgument naming the kernel and the device when a
// launch has no program or one of another device, buffer or binding counts that do not match
// its program, vars (symbolic kernels are not supported), an input index past `num_inputs`, or
// a fixed buffer smaller than its slot or not aligned as its kernel assumes; else what each
// input needs.
Result<GraphInputs> check_graph(const Device& dev,
                                const std::vector<GraphLaunch>& launches,
                                size_t num_inputs);

// Opens a device by name ("CPU", "CPU:C", "NULL", "NV", "NV:1", "MOCK+NV", "CUDA", "CL",
// "CL:1"); an empty name means options().dev, then the CPU. NotFound lists the names this build
// knows.
Result<std::shared_ptr<Device>> open_device(std::string_view name = {});
// The shared device of that name, opened on first use (the one registry of open devices).
Result<std::shared_ptr<Device>> get_device(std::string_view name = {});
// The names open_device accepts on this build ("NV:<n>" stands for every index).
std::vector<std::string> device_names();

}  // namespace baregrad::runtime
