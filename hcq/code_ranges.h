// Where each loaded kernel's code lies in a device's address space, so that a fault report can
// name the kernel by its faulting PC and a fake GPU can find the Binary a dispatched program was
// loaded from. Thread-safe; what every GPU driver's device keeps.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>

namespace baregrad::hcq {

class CodeRanges {
 public:
  // Kernel `name` (of the Binary whose id is `binary_id`, "" when unknown) has its code at
  // [code_va, code_va + bytes); replaces what was registered at code_va.
  void add(uint64_t code_va,
           uint64_t bytes,
           const std::string& name,
           const std::string& binary_id) {
    std::lock_guard lock(mu_);
    ranges_[code_va] = {code_va + bytes, name, binary_id};
  }
  void remove(uint64_t code_va) {
    std::lock_guard lock(mu_);
    ranges_.erase(code_va);
  }
  // The kernel whose code holds `pc`, or "" when none does.
  std::string name_at(uint64_t pc) {
    std::lock_guard lock(mu_);
    auto it = ranges_.upper_bound(pc);
    if (it == ranges_.begin()) return "";
    --it;
    return pc < it->second.end ? it->second.name : "";
  }
  // The binary id of the kernel whose code starts at `code_va` ("" when none).
  std::string binary_at(uint64_t code_va) {
    std::lock_guard lock(mu_);
    auto it = ranges_.find(code_va);
    return it == ranges_.end() ? "" : it->second.binary_id;
  }

 private:
  struct Range {
    uint64_t end;
    std::string name, binary_id;
  };
  std::mutex mu_;
  std::map<uint64_t, Range> ranges_;  // by code_va
};

}  // namespace baregrad::hcq
