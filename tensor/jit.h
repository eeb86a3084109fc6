// TinyJit: runs a step function eagerly once, captures the kernels of its second call, and from
// the third call on replays them on the new inputs' buffers without building, scheduling or
// compiling anything. A replay computes bit for bit what an eager call would.
//
// What a capture holds, as tinygrad's TinyJit:
//  - the function's tensor inputs are realized first and bound by position; every call must
//    pass the same number of inputs with the same shapes, dtypes and devices;
//  - every other buffer a kernel reads (parameters, optimizer state) is bound by address: state
//    must be updated with assign(), which writes in place;
//  - random tensors (rand, randn, dropout, ...) are drawn again on each replay, in the order of
//    the eager call; other host data made inside the function (from_data, arange, eye) is
//    captured once as a constant: pass data that changes per call as an input;
//  - host-side work in the function (to_vector(), reading lr) runs on the eager calls only;
//  - the returned tensors alias buffers the next replay overwrites: copy what must be kept;
//  - intermediate buffers that nothing outside the step holds share memory by liveness;
//  - on devices with graphs (HCQ devices) a replay is one graph submission, unless random
//    uploads or copies between devices sit between the kernels.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "runtime/device.h"
#include "tensor/tensor.h"

namespace baregrad::tensor {
namespace detail {
class JitCapture;
}  // namespace detail

class TinyJit {
 public:
  using Fn = std::function<std::vector<Tensor>(const std::vector<Tensor>& inputs)>;
  // prune: steps of the capture that do not depend on the inputs (weights * 2 of constant
  // weights) run on the capturing call only (tinygrad's TinyJit(prune=True)).
  explicit TinyJit(Fn fn, bool prune = false);
  ~TinyJit();
  TinyJit(const TinyJit&) = delete;
  TinyJit& operator=(const TinyJit&) = delete;

  // Runs (calls 1 and 2) or replays (later calls) the function; the outputs are realized.
  // Throws Error("[jit] ...") for inputs unlike the captured ones, and when the second call
  // did something a replay cannot repeat (the message says what).
  //
  // Symbolic shapes: `vals` are the values of the Variables of this call. A capture for which
  // nothing was computed from the values (its kernels took the Variables as launch scalars, or
  // did not use them: an input sliced at a Variable offset is realized before the capture) is
  // shared(): a replay launches it with `vals`, and inputs of symbolic shape may have other
  // sizes. Otherwise replays need the captured values.
  std::vector<Tensor> operator()(const std::vector<Tensor>& inputs,
                                 const compiler::Bindings& vals = {});
  // Whether the capture serves every value of its Variables (see operator()), and if not why.
  // A capture that may be shared is verified on the first call with other values: that call is
  // captured again, and the capture is shared when both launch the same programs in the same
  // way (a constant computed on the host from a value makes other programs); otherwise the new
  // capture serves its values only.
  bool shared() const;
  bool may_share() const;
  std::string why_not_shared() const;
  // The values of the Variables the capture was made with.
  const compiler::Bindings& captured_vals() const;

  int calls() const { return calls_; }
  bool captured() const { return captured_ != nullptr; }
  // Kernel launches one replay runs (0 before the capture).
  size_t kernel_count() const;
  // Those launches in replay order: each kernel's name and device (empty before the capture).
  std::vector<std::pair<std::string, std::string>> kernels() const;
  // Whether replays run as one device graph submission (else launch by launch).
  bool uses_graph() const;
  // Bytes of the capture's private intermediate buffers, and what they take after planning.
  size_t intermediate_bytes() const;
  size_t planned_bytes() const;
  // Forgets the capture: the next call runs eagerly again.
  void reset();
  // Releases the memory of the capture's private intermediates (tinygrad's
  // captured.free_intermediates()); the next replay allocates it again. Inputs, outputs and
  // buffers that live outside the step (parameters, state it assigns) are kept.
  void free_intermediates();

  // What verification compares of one captured step.
  struct StepView {
    const runtime::Program* prg;  // null for a random upload
    const std::vector<int>* input;
    const std::vector<std::string>* var_names;
  };

 private:
  struct Captured;
  std::vector<Tensor> capture(const std::vector<Tensor>& xs, const compiler::Bindings& vals);
  std::vector<Tensor> replay(const std::vector<Tensor>& xs, const compiler::Bindings& vals);
  static void prune(detail::JitCapture& cap, const std::vector<Tensor>& xs);
  static void plan(detail::JitCapture& cap,
                   const std::unordered_map<const DeviceBuffer*, int>& input_of,
                   Captured& c);
  static void make_graph(Captured& c, size_t num_inputs);
  // Sets the addresses of the private intermediates' memory (Captured::slots) in the steps.
  static void place_slots(Captured& c);
  static void reallocate(Captured& c, size_t num_inputs);
  // The captured outputs as tensors over this replay's buffers.
  std::vector<Tensor> outputs(const std::vector<Tensor>& xs, const compiler::Bindings& vals) const;

  Fn fn_;
  bool prune_ = false;
  int calls_ = 0;
  std::unique_ptr<Captured> captured_;
};

namespace detail {

// Host `values` stored as `dtype`, little-endian, rounded or wrapped like a cast.
std::vector<uint8_t> encode_values(const std::vector<double>& values, DType dtype);

// What run_schedule, assign and the random generators report while a TinyJit captures.
class JitCapture {
 public:
  // Rewrites a buffer with fresh host data (a random draw) on the device it lives on.
  using Regenerate = std::function<void(runtime::Device&, runtime::Buffer)>;

  void record_kernel(std::shared_ptr<runtime::Program> prg,
                     std::vector<std::shared_ptr<DeviceBuffer>> bufs,
                     std::vector<int64_t> vars = {});
  // Something in the captured call was computed for the current values of its Variables (a
  // kernel built for them, a size or scalar taken from one): its replays need those values.
  void specialize(std::string why);
  void record_upload(std::shared_ptr<DeviceBuffer> buf, Regenerate regen);
  // A copy of `src` into `dst` (a Tensor::to between devices), repeated by each replay.
  void record_copy(std::shared_ptr<DeviceBuffer> dst,
                   std::shared_ptr<DeviceBuffer> src,
                   size_t bytes);
  // Marks the capture as not replayable; the JIT throws `why` when the call ends.
  void reject(std::string why);

 private:
  friend class baregrad::tensor::TinyJit;
  struct Step {
    std::shared_ptr<runtime::Program> prg;            // null for an upload or a copy
    std::vector<std::shared_ptr<DeviceBuffer>> bufs;  // slot order; an upload has one, a copy two
    Regenerate regen;
    std::vector<int64_t> vars;  // launch scalars (symbolic shapes' Variables)
    size_t copy_bytes = 0;      // a copy: how many bytes
  };
  std::vector<Step> steps_;
  std::vector<std::string> rejected_;
  std::vector<std::string> specialized_;
};

// Copies `bytes` of `src` into `dst`, on one device or between two (through the host).
void copy_between(runtime::Device& dst_dev,
                  runtime::Buffer dst,
                  runtime::Device& src_dev,
                  runtime::Buffer src,
                  size_t bytes);

// JitCapture::specialize on the capture running on this thread, if any.
void jit_specialize(std::string why);

// The capture running on this thread, or null (also while capturing is off).
JitCapture* jit_capture();
// Turns capturing on this thread off (tinygrad's Context(CAPTURING=0): kernels run then are not
// captured; a replay reads what they wrote) or on again; returns whether it was on.
bool set_jit_capturing(bool on);
// Throws "[jit] cannot access tensor data during JIT capture" while a capture runs: a value
// read to the host there would be baked into every replay (tinygrad's JitError).
void check_no_host_read(const char* op);

}  // namespace detail
}  // namespace baregrad::tensor
