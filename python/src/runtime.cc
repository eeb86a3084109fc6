// _baregrad runtime pieces: devices (runtime/device.h), options (base/options.h) and the global
// counters (tensor/counters.h).
#include "base/options.h"
#include "compiler/fp8.h"
#include "compiler/uop.h"
#include "python/src/bind.h"
#include "runtime/device.h"
#include "tensor/counters.h"

namespace baregrad::python {
namespace {

// The name of the device `name` opens ("" is the default device); RuntimeError when none.
std::string device_name(const std::string& name) {
  auto dev = runtime::get_device(name);
  if (!dev.ok()) dev.status().throw_if_error("device");
  return (*dev)->name();
}

// The fp8 dtype named `name`; a TypeError naming `op` for any other dtype.
DType fp8_dtype(const char* op, const std::string& name) {
  DType t = dtype_of(name);
  if (!compiler::dtypes::is_fp8(t))
    throw py::type_error(std::string("[") + op + "] " + name + " is not an fp8 dtype");
  return t;
}

// The ALU ops device `name`'s renderer emits as themselves: all but the transcendentals the
// compiler expands into polynomials when the target has no native ones (TargetInfo).
std::vector<std::string> native_ops(const std::string& name) {
  auto dev = runtime::get_device(name);
  if (!dev.ok()) dev.status().throw_if_error("device");
  bool native = (*dev)->target_info().native_transcendentals;
  std::vector<std::string> out;
  for (int i = 0; i < compiler::kNumOps; i++) {
    auto op = static_cast<compiler::Op>(i);
    compiler::OpGroup g = compiler::op_group(op);
    if (g != compiler::OpGroup::Unary && g != compiler::OpGroup::Binary &&
        g != compiler::OpGroup::Ternary)
      continue;
    bool expanded = op == compiler::Op::EXP2 || op == compiler::Op::LOG2 ||
                    op == compiler::Op::SIN || op == compiler::Op::POW;
    if (native || !expanded) out.emplace_back(compiler::op_name(op));
  }
  return out;
}

void synchronize(const std::string& name) {
  auto dev = runtime::get_device(name);
  if (!dev.ok()) dev.status().throw_if_error("device");
  (*dev)->synchronize().throw_if_error("synchronize");
}

// The compiled-program cache of device `name` (runtime::ProgramCacheStats).
py::dict program_cache_stats(const std::string& name) {
  auto dev = runtime::get_device(name);
  if (!dev.ok()) dev.status().throw_if_error("device");
  runtime::ProgramCacheStats s = (*dev)->program_cache_stats();
  py::dict d;
  d["size"] = s.size;
  d["built"] = s.built;
  d["evicted"] = s.evicted;
  return d;
}

py::dict counters() {
  const tensor::Counters& c = tensor::counters();
  py::dict d;
  d["kernel_count"] = c.kernel_count.load();
  d["global_ops"] = c.global_ops.load();
  d["global_mem"] = c.global_mem.load();
  d["mem_used"] = c.mem_used.load();
  return d;
}

}  // namespace

void bind_runtime(py::module_& m) {
  m.def("device_names", &runtime::device_names);
  // The ops of the compiler's IR (compiler/ops.def) in enum order, as (name, group) pairs:
  // baregrad.uop.ops.Ops and GroupOp.
  m.def("ir_ops", [] {
    static const char* kGroups[] = {"Unary",  "Binary",  "Ternary", "Meta",
                                    "Memory", "Control", "Kernel",  "Vector"};
    std::vector<std::pair<std::string, std::string>> ops;
    for (int i = 0; i < compiler::kNumOps; i++) {
      auto op = static_cast<compiler::Op>(i);
      ops.emplace_back(compiler::op_name(op), kGroups[static_cast<int>(compiler::op_group(op))]);
    }
    return ops;
  });
  m.def("device_name", &device_name, py::arg("name"));
  m.def("synchronize", &synchronize, py::arg("name"));
  m.def("native_ops", &native_ops, py::arg("name"));
  m.def("set_option", &set_option, py::arg("name"), py::arg("value"));
  m.def("option_value", &option_value, py::arg("name"));
  m.def("option_names", [] {
    std::vector<std::string> names;
    for (const OptionInfo& o : option_table()) names.emplace_back(o.name);
    return names;
  });
  m.def("program_cache_stats", &program_cache_stats, py::arg("name"));
  m.def("counters", &counters);
  // One fp8 code and its value (compiler/fp8.h): rounded once to nearest even, as Tensor.cast.
  m.def(
      "fp8_encode",
      [](const std::string& dtype, double v) {
        return compiler::fp8_encode(fp8_dtype("float_to_fp8", dtype), v);
      },
      py::arg("dtype"), py::arg("value"));
  m.def(
      "fp8_decode",
      [](const std::string& dtype, int64_t code) {
        DType t = fp8_dtype("fp8_to_float", dtype);
        if (code < 0 || code > 255)
          throw py::value_error("[fp8_to_float] code " + std::to_string(code) + " is not a byte");
        return compiler::fp8_decode(t, static_cast<uint8_t>(code));
      },
      py::arg("dtype"), py::arg("code"));
  m.def("reset_counters", [] { tensor::counters().reset(); });
}

}  // namespace baregrad::python
