// StateDict, get_state_dict, get_parameters and load_state_dict of nn_state.h.
#include "tensor/nn_state.h"

#include <set>

#include "base/error.h"

namespace baregrad::tensor::nn {
namespace {

std::string joined(const std::vector<std::string>& items) {
  std::string s;
  for (const auto& i : items) s += (s.empty() ? "" : ", ") + i;
  return s;
}

}  // namespace

StateDict& StateDict::add_tensor(const std::string& name, const Tensor& t) {
  for (const auto& [n, _] : entries_)
    if (n == name) fail("StateDict", "duplicate name \"" + name + "\"", ErrorKind::kValue);
  entries_.emplace_back(name, t);
  return *this;
}

std::map<std::string, Tensor> get_state_dict(const StateDict& sd) {
  return {sd.entries().begin(), sd.entries().end()};
}

std::vector<Tensor> get_parameters(const StateDict& sd) {
  std::vector<Tensor> out;
  for (const auto& [_, t] : sd.entries())
    if (t.requires_grad()) out.push_back(t);
  return out;
}

void load_state_dict(const StateDict& sd,
                     const std::map<std::string, Tensor>& loaded,
                     bool strict) {
  std::vector<std::string> missing, unexpected, shapes, types;
  std::set<std::string> known;
  for (const auto& [name, t] : sd.entries()) {
    known.insert(name);
    auto it = loaded.find(name);
    if (it == loaded.end()) {
      missing.push_back(name);
    } else if (it->second.shape() != t.shape()) {
      shapes.push_back(name + " (checkpoint " + shape_str(it->second.shape()) + ", model " +
                       shape_str(t.shape()) + ")");
    } else if (it->second.dtype() != t.dtype()) {
      types.push_back(name + " (checkpoint " + it->second.dtype().name() + ", model " +
                      t.dtype().name() + ")");
    }
  }
  for (const auto& [name, _] : loaded)
    if (!known.count(name)) unexpected.push_back(name);
  std::string msg;
  auto section = [&](const char* what, const std::vector<std::string>& items) {
    if (!items.empty()) msg += (msg.empty() ? "" : "; ") + std::string(what) + ": " + joined(items);
  };
  if (strict) {
    section("missing keys", missing);
    section("unexpected keys", unexpected);
  }
  section("shape mismatches", shapes);
  section("dtype mismatches", types);
  if (!msg.empty()) fail("load_state_dict", msg, ErrorKind::kValue);
  for (const auto& [name, t] : sd.entries()) {
    auto it = loaded.find(name);
    if (it != loaded.end()) Tensor(t).assign(it->second);
  }
}

}  // namespace baregrad::tensor::nn
