// The lazy graph under Tensor: computations ("bases") in a contiguous logical shape, and views
// of them. Movement ops only change a Lazy's ShapeTracker; nothing runs until realize().
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "compiler/sym_view.h"
#include "compiler/uop.h"
#include "runtime/device.h"

namespace baregrad::tensor {

using compiler::DType;
using compiler::Op;
using compiler::ShapeTracker;

struct LazyBase;

// A view of a base: `st` maps this tensor's shape onto the base's contiguous layout.
struct Lazy {
  std::shared_ptr<LazyBase> base;
  ShapeTracker st;
  // A shape that holds a Variable: `st` for every value of it (st is its current value).
  // Null when the sizes are concrete, or were made concrete (compiler/sym_view.h).
  std::shared_ptr<const compiler::SymTracker> sym = nullptr;

  const std::vector<int64_t>& shape() const { return st.shape(); }
  DType dtype() const;
  int64_t numel() const;
  // True when this is exactly the base (no movement applied).
  bool is_base_view() const;
};

// Device memory holding a realized base; freed with the last reference. Its bytes count in
// counters().mem_used while it lives.
struct DeviceBuffer {
  DeviceBuffer(std::shared_ptr<runtime::Device> dev, runtime::Buffer buf);
  ~DeviceBuffer();
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  std::shared_ptr<runtime::Device> device;
  runtime::Buffer buffer;
};

enum class LazyKind : uint8_t {
  kBuffer,  // realized: `realized` holds the data
  kConst,   // every element is `value`
  kAlu,     // op(srcs...) elementwise
  kReduce,  // op over `axes` of srcs[0]; the reduced dims keep size 1
  kCast,    // srcs[0] converted to dtype (op BITCAST: its bits reinterpreted, same itemsize)
  kIota,    // element i is i (an int dtype): no memory, computed where it is read
  kCopy,    // srcs[0] (a whole base, on another device) copied to `device`: its own schedule item
};

struct LazyBase {
  LazyKind kind;
  DType dtype;
  std::vector<int64_t> shape;  // contiguous logical shape
  // With a symbolic shape: its contiguous symbolic tracker (Lazy::sym of the base view).
  std::shared_ptr<const compiler::SymTracker> sym = nullptr;
  Op op = Op::ADD;        // kAlu / kReduce
  std::vector<int> axes;  // kReduce
  double value = 0;       // kConst
  // kConst of a Variable expression (Tensor::sym_scalar): `value` is its current value.
  std::optional<compiler::Sym> sym_value;
  compiler::Bindings sym_value_vals;
  std::vector<Lazy> srcs;
  std::shared_ptr<DeviceBuffer> realized;  // set once computed (any kind)
  std::shared_ptr<runtime::Device> device;
  // An in-place update: this base's kernel writes into this existing buffer (Tensor::assign).
  std::shared_ptr<DeviceBuffer> write_into;
  // With write_into: where this base's elements go in that buffer (Tensor::write_view); the
  // buffer's own layout when unset.
  std::optional<ShapeTracker> write_view;
  std::shared_ptr<const compiler::SymTracker> write_view_sym = nullptr;
  // The bases built on this one (pruned of dead ones as it grows); assign() finds the lazy work
  // still reading a buffer through them and realizes it before the buffer is overwritten.
  std::vector<std::weak_ptr<LazyBase>> readers;
  // Set when assign() wrote new contents into `realized`: this base's old value is gone, and
  // reading it throws instead of silently seeing the new one.
  bool overwritten = false;
  // Bumped when setitem writes into `realized` in place (all views of this base see it).
  uint64_t version = 0;
  // Tensor::contiguous(): always a kernel output, never fused into its readers.
  bool force_kernel = false;
  // A gradient backward() stored for a tensor that does not require grad, beside parameters
  // (tinygrad fills every tensor's .grad): when assign() overwrites a buffer it still reads,
  // it is neither computed nor given a copy but dropped, and reading it throws (`dropped`).
  bool droppable = false;
  bool dropped = false;
  // Computed from iotas and constants alone, reading an iota (an arange, eye, linspace): what
  // tinygrad makes without a device. Kept when realized; contiguous() (force_kernel) or an
  // assign target is storage. backward() gives such a tensor no .grad, as tinygrad's.
  bool iota_expr = false;

  int64_t numel() const;

  // Releases the sources it alone holds one by one, not recursively: a chain of millions of
  // lazy ops must not overflow the stack when it dies.
  ~LazyBase();
};

// Constructors of lazy nodes; shapes and dtypes are checked by the Tensor layer above.
Lazy lazy_buffer(std::shared_ptr<DeviceBuffer> buf, DType dtype, std::vector<int64_t> shape);
Lazy lazy_const(const std::shared_ptr<runtime::Device>& dev,
                DType dtype,
                double value,
                std::vector<int64_t> shape);
// `src` (a base view) copied to `dev` when realized (Tensor::to).
Lazy lazy_copy(const Lazy& src, std::shared_ptr<runtime::Device> dev);
// A 0-d constant whose value is `value` (a Sym over Variables) at `vals`: kernels reading it
// take the Variables at launch.
Lazy lazy_sym_const(const std::shared_ptr<runtime::Device>& dev,
                    DType dtype,
                    const compiler::Sym& value,
                    const compiler::Bindings& vals);
// 0, 1, ..., n - 1 in the int `dtype`, computed inside the kernels that read it.
Lazy lazy_iota(const std::shared_ptr<runtime::Device>& dev, DType dtype, int64_t n);
// Throws baregrad::Error("[op] ...") naming both devices when `a` and `b` are on different
// devices: a kernel reads every input through its own device's address space.
void check_same_device(std::string_view op, const Lazy& a, const Lazy& b);
// Checks its sources' devices (check_same_device, naming the ALU op) as a last line of defence.
// Lazies in a vector, each copied once (an initializer list {a, b} copies each twice, and a
// copy allocates its views: a tiny op's build is ~1 us).
template <class... L>
std::vector<Lazy> lazies(const L&... l) {
  std::vector<Lazy> v;
  v.reserve(sizeof...(l));
  (v.push_back(l), ...);
  return v;
}
Lazy lazy_alu(Op op, std::vector<Lazy> srcs, DType dtype);
Lazy lazy_reduce(Op op, const Lazy& src, std::vector<int> axes);
Lazy lazy_cast(const Lazy& src, DType dtype);
// A new base holding `src` converted to `dtype`, never folded away (a kernel always writes it).
Lazy lazy_contiguous(const Lazy& src, DType dtype);
// The bits of `src` read as `dtype` (same itemsize), element for element.
Lazy lazy_bitcast(const Lazy& src, DType dtype);
// True when `l` is the whole of a pending bitcast (Tensor::bitcast's result): writes go to its
// source.
bool is_bitcast_view(const Lazy& l);
// The same base seen through a new tracker (and its symbolic form, if it has one).
Lazy lazy_view(const Lazy& src,
               ShapeTracker st,
               std::shared_ptr<const compiler::SymTracker> sym = nullptr);
// `st` when it holds a Variable; else null.
std::shared_ptr<const compiler::SymTracker> keep_sym(std::optional<compiler::SymTracker> st);

}  // namespace baregrad::tensor
