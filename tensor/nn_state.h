// Named model state (tinygrad's get_state_dict / load_state_dict): a StateDict lists the state
// tensors of layers under dotted names, e.g.
//   nn::StateDict sd;
//   sd.add("l1", l1).add("bn", bn);       // "l1.weight", "l1.bias", "bn.running_mean", ...
//   safe_save(get_state_dict(sd), path);  // and later: load_state_dict(sd, safe_load(path));
// The listed tensors share storage with the layers, so loading assigns into the layers.
#pragma once

#include <concepts>
#include <map>
#include <string>
#include <vector>

#include "tensor/nn.h"

namespace baregrad::tensor::nn {

// A layer that lists its state tensors: named(out, prefix) appends (prefix + name, tensor).
template <class M>
concept Module = requires(const M& m, NamedTensors& out, const std::string& prefix) {
  { m.named(out, prefix) } -> std::same_as<void>;
};

// An ordered list of (name, tensor) with unique names.
class StateDict {
 public:
  // Adds every state tensor of `layer` as "<prefix>.<name>" ("<name>" when prefix is empty).
  // NOTE: replacing a layer's member tensor afterwards is not seen; add the layer again.
  template <Module M>
  StateDict& add(const std::string& prefix, const M& layer) {
    NamedTensors got;
    layer.named(got, prefix.empty() ? prefix : prefix + ".");
    for (auto& [name, t] : got) add_tensor(name, t);
    return *this;
  }
  // Adds one tensor under `name`; throws baregrad::Error("[StateDict] ...") on a duplicate name.
  StateDict& add_tensor(const std::string& name, const Tensor& t);
  // The entries in the order they were added.
  const NamedTensors& entries() const { return entries_; }

 private:
  NamedTensors entries_;
};

// Name -> tensor, ready for safe_save.
std::map<std::string, Tensor> get_state_dict(const StateDict& sd);
// The tensors that require grad (trainable parameters), in order; running stats are left out.
std::vector<Tensor> get_parameters(const StateDict& sd);
// Assigns loaded[name] to each entry of `sd`. Throws baregrad::Error("[load_state_dict] ...")
// before assigning anything when any entry's shape or dtype differs, and (strict only) when
// keys are missing from `loaded` or unexpected in it; the message lists every such key, with
// both shapes (dtypes) for mismatches. Non-strict skips missing keys and ignores extra ones.
void load_state_dict(const StateDict& sd,
                     const std::map<std::string, Tensor>& loaded,
                     bool strict = true);

}  // namespace baregrad::tensor::nn
