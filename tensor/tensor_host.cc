// Raw host data in and out of tensors: exact byte copies, in-place host views, device moves.
#include "base/error.h"
#include "tensor/jit.h"
#include "tensor/tensor.h"

namespace baregrad::tensor {
namespace {
using Grads = std::vector<std::optional<Tensor>>;

}  // namespace

Tensor Tensor::from_bytes(
    const void* data, size_t bytes, Shape shape, DType dtype, std::string_view device) {
  int64_t n = 1;
  for (int64_t d : shape)
    if (d < 0 || __builtin_mul_overflow(n, d, &n))
      fail("from_bytes", "invalid shape " + shape_str(shape), ErrorKind::kValue);
  if (dtype.ptr || dtype.count != 1 || dtype == dtypes::kVoid)
    fail("from_bytes", "unsupported dtype " + dtype.name(), ErrorKind::kType);
  if (static_cast<uint64_t>(n) * dtype.itemsize() != bytes)
    fail("from_bytes",
         std::to_string(bytes) + " bytes for shape " + shape_str(shape) + " of " + dtype.name() +
             " (" + std::to_string(static_cast<uint64_t>(n) * dtype.itemsize()) + " needed)",
         ErrorKind::kValue);
  Tensor t = empty(std::move(shape), dtype, device);
  if (bytes == 0) return t;
  const auto& db = t.lazy().base->realized;
  db->device->copy_in(db->buffer, data, bytes).throw_if_error("from_bytes");
  return t;
}

Tensor Tensor::of_buffer(const Lazy& view) {
  const std::shared_ptr<LazyBase>& b = view.base;
  if (!b->realized || b->overwritten)
    fail("buf_uop", std::string("a node of shape ") + shape_str(view.shape()) + " whose base " +
                        (b->realized ? "assign() has overwritten" : "is not realized") +
                        ": realize() the tensor first");
  return Tensor(Lazy{b, ShapeTracker::contiguous(b->shape)});
}

std::vector<uint8_t> Tensor::to_bytes() const {
  detail::check_no_host_read("to_bytes");
  Tensor c = lazy().is_base_view() ? detach() : detach().contiguous();
  c.realize();
  const auto& db = c.lazy().base->realized;
  if (!db) fail("to_bytes", "tensor was not realized");
  std::vector<uint8_t> out(static_cast<size_t>(numel()) * dtype().itemsize());
  if (!out.empty())
    db->device->copy_out(out.data(), db->buffer, out.size()).throw_if_error("to_bytes");
  return out;
}

std::optional<Tensor::HostView> Tensor::host_view() const {
  detail::check_no_host_read("host_view");
  realize();
  const Lazy& l = lazy();
  const auto& db = l.base->realized;
  if (!db || l.base->overwritten || !db->device->host_addressable() || l.st.views.size() != 1)
    return std::nullopt;
  const compiler::View& v = l.st.views[0];
  if (v.mask || !db->buffer.va) return std::nullopt;
  db->device->synchronize().throw_if_error("host_view");
  HostView h;
  h.owner = db;
  h.data = reinterpret_cast<const uint8_t*>(db->buffer.va) + v.offset * dtype().itemsize();
  h.shape = v.shape;
  h.strides = v.strides;
  return h;
}

std::string Tensor::device() const { return impl_->lazy.base->device->name(); }

Tensor Tensor::to(std::string_view device) const {
  auto dev = runtime::get_device(device);
  if (!dev.ok()) dev.status().throw_if_error("to");
  if (*dev == impl_->lazy.base->device) return *this;
  // A lazy copy: realized as its own schedule item after the source (runtime copies between
  // devices), captured by TinyJit, differentiable.
  Tensor src = lazy().is_base_view() && !lazy().sym ? *this : contiguous();
  std::string from = this->device();
  return record(lazy_copy(src.lazy(), *dev), "to", {*this},
                [from](const Tensor& g) { return Grads{g.to(from)}; });
}

void Tensor::set_grad(const std::optional<Tensor>& g) { impl_->grad = g ? g->impl_ : nullptr; }

}  // namespace baregrad::tensor
