// The Device interface the tensor layer programs against: memory, kernels, launches.
// A later issue makes every device an HCQ device; this interface stays the seam.
#pragma once

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
#include "compiler/program.h"

namespace baregrad::runtime {

// Device memory. `ptr` is host-addressable on the CPU device only.
struct Buffer {
  void* ptr = nullptr;
  size_t bytes = 0;
};

// A compiled kernel ready to launch.
struct Program {
  compiler::ProgramSpec spec;
  std::string source;            // what the renderer produced
  double compile_ms = 0;         // lowering + rendering + compiling (0 on a cache hit)
  bool cache_hit = false;        // the binary came from the kernel cache
  void* entry = nullptr;         // device-specific entry point
  std::shared_ptr<void> handle;  // the device's loaded form (an hcq::Program)
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

class Device {
 public:
  virtual ~Device() = default;
  // The DEV= name, e.g. "CPU".
  virtual std::string name() const = 0;
  // Whether Buffer::ptr is host memory the CPU may read in place once synchronize() returns.
  virtual bool host_addressable() const { return false; }
  // The codegen target this device compiles for.
  virtual const compiler::TargetInfo& target() const = 0;
  // Allocates `bytes` (64-byte aligned); ResourceExhausted when memory runs out.
  virtual Result<Buffer> alloc(size_t bytes) = 0;
  // Frees a buffer from alloc(); null buffers are ignored.
  virtual void free(Buffer b) = 0;
  // Copies host memory into / out of a buffer; InvalidArgument when `bytes` exceeds it.
  virtual Status copy_in(Buffer dst, const void* src, size_t bytes) = 0;
  virtual Status copy_out(void* dst, Buffer src, size_t bytes) = 0;
  // Lowers, renders, compiles and loads a kernel AST; cached by AST, opts and target.
  // InvalidArgument for a malformed AST; Internal with the source for a compiler failure.
  virtual Result<std::shared_ptr<Program>> compile(
      const compiler::UOpPtr& ast,
      const std::optional<std::vector<compiler::Opt>>& opts = std::nullopt) = 0;
  // Copies `bytes` from `src` to `dst`, buffers of this device that do not overlap;
  // asynchronous, ordered after earlier launches and copies (synchronize() waits for it).
  // InvalidArgument (check_copy) before anything is issued; Unimplemented on devices without.
  virtual Status copy(Buffer dst, Buffer src, size_t bytes) {
    (void)dst;
    (void)src;
    (void)bytes;
    return unimplemented(name() + " has no device-to-device copy");
  }
  // Runs `prg` with bufs[i] bound to slot i; checks counts and sizes first.
  virtual Status launch(const Program& prg,
                        std::span<const Buffer> bufs,
                        std::span<const int64_t> vars = {}) = 0;
  // Waits for every launch and copy issued so far.
  virtual Status synchronize() = 0;
  // Records `launches` (with `num_inputs` inputs bound per replay) as a graph; Unimplemented
  // on devices without graphs.
  virtual Result<std::unique_ptr<Graph>> make_graph(const std::vector<GraphLaunch>& launches,
                                                    size_t num_inputs) {
    (void)launches;
    (void)num_inputs;
    return unimplemented(name() + " has no graphs");
  }
};

// What Device::copy checks first: InvalidArgument naming "copy", `bytes`, both buffer sizes and
// the device when `bytes` exceeds either buffer or a buffer is null (with bytes > 0).
inline Status check_copy(const Device& dev, Buffer dst, Buffer src, size_t bytes) {
  if (bytes <= dst.bytes && bytes <= src.bytes && (bytes == 0 || (dst.ptr && src.ptr)))
    return Status();
  std::string why = bytes > dst.bytes || bytes > src.bytes ? "" : " (a null buffer)";
  return invalid_argument("copy of " + std::to_string(bytes) + " bytes from a buffer of " +
                          std::to_string(src.bytes) + " into a buffer of " +
                          std::to_string(dst.bytes) + " on " + dev.name() + why);
}

// Opens a device by name ("CPU", "CPU:C", "NULL", "NV", "NV:1", "MOCK+NV"); an empty name
// means options().dev, then the CPU. NotFound lists the names this build knows.
Result<std::shared_ptr<Device>> open_device(std::string_view name = {});
// The shared device of that name, opened on first use (the one registry of open devices).
Result<std::shared_ptr<Device>> get_device(std::string_view name = {});
// The names open_device accepts on this build.
std::vector<std::string> device_names();

}  // namespace baregrad::runtime
