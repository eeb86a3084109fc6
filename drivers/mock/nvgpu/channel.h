// Internal to the fake GPU: a channel's state and the runner that executes it for one pump.
// runner.cc decodes GP entries and pushbuffer segments; methods.cc executes the methods.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>

#include "drivers/mock/nvgpu/fake_gpu.h"

namespace baregrad::mock {

// USERD (Nvc56fControl in clc56f.h, Nvc86fControl in clc86f.h): GPGet 0x88, GPPut 0x8c.
constexpr uint64_t kUserdGpGet = 0x88;
constexpr uint64_t kUserdGpPut = 0x8c;

struct FakeNvGpu::Channel {
  ChannelConfig cfg;
  uint32_t gp_get = 0;
  bool dead = false;
  bool blocked = false;
  // The segment being executed; a blocked acquire resumes at header `pos`, data word
  // `data_index`.
  struct Segment {
    bool active = false;
    uint64_t va = 0;
    uint32_t words = 0;
    uint32_t pos = 0;
    uint32_t data_index = 0;
  } seg;
  std::array<uint32_t, 8> classes{};
  std::unordered_map<uint32_t, uint32_t> host;    // host method data by method (SEM_*)
  std::unordered_map<uint32_t, uint32_t> engine;  // engine method data by subchannel << 16 | method

  uint32_t host_data(uint32_t method) const;
  uint32_t engine_data(uint32_t subchannel, uint32_t method) const;
};

// What one method (or one fetch) did.
enum class Step : uint8_t {
  kNext,     // done; go on
  kIdle,     // nothing to fetch (GPGet == GPPut)
  kBlocked,  // an acquire is not satisfied: resume here next pump
  kStop,     // a fault was recorded; the channel is dead
};

// The name of a method the fake GPU models ("SEM_EXECUTE"), or "" when it does not.
std::string_view method_name(uint32_t cls, uint32_t method);
bool is_compute_class(uint32_t cls);
// SET_SHADER_LOCAL_MEMORY_A_ADDRESS_UPPER: 16:0 up to Ada, 24:0 from Hopper on.
uint32_t local_memory_upper_mask(uint32_t compute_class);

// Executes one channel for one pump, remembering where it is for the fault records.
class ChannelRunner {
 public:
  ChannelRunner(FakeNvGpu& gpu, FakeNvGpu::Channel& ch) : gpu_(gpu), ch_(ch) {}
  // Fetches and executes until the channel is idle, blocked or dead; whether it progressed.
  bool run();

 private:
  // runner.cc: GP entries, pushbuffer segments, memory access and faults.
  Step fetch();
  Step run_segment();
  Step method(uint32_t subchannel, uint32_t method, uint32_t data);
  // The host address of [va, va + bytes); nullopt after recording an MMU fault.
  std::optional<uint8_t*> access(uint64_t va, size_t bytes, Access a, std::string_view what);
  // Records a fault at `address` (default: the method's header, or the QMD in a launch).
  Step fault(FaultKind kind,
             std::string what,
             std::optional<uint64_t> address = std::nullopt,
             Access a = Access::kNone);
  void count(uint64_t GpuCounters::* field, uint64_t n = 1);

  // methods.cc: host, compute and copy methods.
  Step host_method(uint32_t subchannel, uint32_t method, uint32_t data);
  Step set_object(uint32_t subchannel, uint32_t data);
  Step sem_execute(uint32_t data);
  Step acquire(uint64_t addr, uint64_t payload, bool b64, uint32_t operation);
  Step release(uint64_t addr, uint64_t payload, bool b64, bool timestamp, std::string_view what);
  Step compute_method(uint32_t method, uint32_t data);
  Step copy_method(uint32_t method, uint32_t data);
  Step launch_dma(uint32_t data);
  // Reserved bits above an address/size field: an IllegalValue fault naming the field.
  Step check_field(uint32_t data, uint32_t mask, std::string_view field);
  Step launch(uint64_t qmd_va);

  FakeNvGpu& gpu_;
  FakeNvGpu::Channel& ch_;
  bool progressed_ = false;
  // Where the channel is.
  uint64_t header_va_ = 0;
  uint32_t subchannel_ = 0;
  uint32_t cls_ = 0;
  uint32_t method_ = Fault::kNoMethod;
  uint64_t qmd_va_ = 0;
};

}  // namespace baregrad::mock
