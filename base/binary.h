#pragma once

// A kernel compiled for one kind of device: what a compiler::Target produces and a driver's
// hcq::Device::load_program() loads. Plain data, so that the compiler and the drivers share it
// without knowing each other.

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace baregrad {

// The code formats drivers load. A driver refuses a format (or an arch) it cannot run.
enum class BinaryFormat : uint8_t {
  kHostElf,  // a relocatable ELF object for the host CPU (CPU ABI of compiler/program.h)
  kCubin,    // an NVIDIA cubin (ELF) with one entry function
  kOpenClC,  // OpenCL C source text, built by the OpenCL device it is loaded on
  kAmdHsa,   // an AMD HSA code object (ELF, amdgcn-amd-amdhsa) with one kernel and its descriptor
};
// "host-elf", "cubin", "opencl-c", "amdhsa".
const char* binary_format_name(BinaryFormat f);
// The host CPU's architecture as Binary::arch names it: "x86_64", "aarch64".
const char* host_arch();

struct Binary {
  BinaryFormat format = BinaryFormat::kHostElf;
  std::string arch;   // the machine the code is for: "x86_64", "sm_90", "gfx1100"
  std::string entry;  // the kernel's symbol in `code`
  std::string code;   // the object bytes
  // Identifies the code (a hash of format, arch, entry and code): the same kernel compiled
  // twice has the same id. Drivers keep it with each loaded program, for reports.
  std::string id;

  // The argument block: one 8-byte address per buffer slot, then one 8-byte value per scalar.
  int num_bufs = 0;
  int num_vars = 0;
  // buf_bytes[slot]: how many bytes from its address the kernel may touch (address checks).
  std::vector<size_t> buf_bytes;

  // The launch: `grid` workgroups of `block` threads. CPU kernels take grid[0] items, split
  // over the cores as [core_lo, core_hi) ranges (block is 1).
  std::array<uint32_t, 3> grid{1, 1, 1};
  std::array<uint32_t, 3> block{1, 1, 1};
  // The compiler's estimate of one launch's work (0: unknown). The CPU device runs a launch too
  // small to repay waking another core on the core that executes the queue.
  double flops = 0;
  double bytes = 0;
  // NOTE: registers, shared and local memory are facts of the code object (a cubin's EIATTRs),
  // which its loader reads; they are not repeated here.
};

}  // namespace baregrad
