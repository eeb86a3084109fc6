// The cubin loader: one kernel of a ptxas ELF64 (EM_CUDA) as the GPU needs it. Every loadable
// section is laid out in one image (code, constant banks, globals), the launch facts come from
// the section table and the `.nv.info` attribute records (format byte, attribute byte, u16
// size-or-value, then `size` payload bytes for EIFMT_SVAL), and the relocations are kept to be
// applied once the image's GPU address is known. Malformed input is refused with
// InvalidArgument naming what is wrong; every offset is bounds-checked.
// Sources: tinygrad runtime/support/elf.py + ops_nv.py (NVProgram), CuAssembler's relocation
// and EIATTR tables, and the cubins of /usr/local/cuda/bin/ptxas (see tests/unit/nv_cubin_test.cc).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "base/status.h"

namespace baregrad::nv {

// .nv.info attribute formats and the attributes the loader reads (NVIDIA's names).
enum EiFormat : uint8_t {
  EIFMT_NVAL = 0x01,  // no value
  EIFMT_BVAL = 0x02,  // a byte in the u16 field
  EIFMT_HVAL = 0x03,  // the u16 field is the value
  EIFMT_SVAL = 0x04,  // the u16 field is the payload size
};
enum EiAttribute : uint8_t {
  EIATTR_PARAM_CBANK = 0x0a,         // u32 symbol of .nv.constant0.<fn>, u16 offset, u16 size
  EIATTR_FRAME_SIZE = 0x11,          // u32 symbol, u32 bytes (.nv.info)
  EIATTR_MIN_STACK_SIZE = 0x12,      // u32 symbol, u32 bytes (.nv.info)
  EIATTR_KPARAM_INFO = 0x17,         // u32 index, u16 ordinal, u16 offset, u32 flags (size >> 18)
  EIATTR_CBANK_PARAM_SIZE = 0x19,    // HVAL: parameter bytes
  EIATTR_MAXREG_COUNT = 0x1b,        // HVAL: register limit ptxas compiled for
  EIATTR_EXIT_INSTR_OFFSETS = 0x1c,  // u32 code offsets of the EXIT instructions
  EIATTR_MAX_STACK_SIZE = 0x23,      // u32 symbol, u32 bytes (.nv.info)
  EIATTR_REGCOUNT = 0x2f,            // u32 symbol, u32 registers (.nv.info)
};

// Relocation types the loader applies (after tinygrad's NVProgram); others are refused.
constexpr uint32_t R_CUDA_64 = 0x02;           // u64 at the offset = address
constexpr uint32_t R_CUDA_ABS32_LO_32 = 0x38;  // u32 at offset + 4 (instruction bits 32..63)
constexpr uint32_t R_CUDA_ABS32_HI_32 = 0x39;  // = low / high 32 bits of the address

// A relocation in image terms: patch `offset` with (image address + target) per `type`.
struct CubinReloc {
  uint64_t offset = 0;  // bytes into the image
  uint64_t target = 0;  // symbol's image offset + addend
  uint32_t type = 0;
};

// A constant bank the program binds: `.nv.constantN` (module-wide) or `.nv.constantN.<fn>`.
struct CubinConstBank {
  int bank = 0;
  uint64_t offset = 0;  // bytes into the image
  uint64_t size = 0;
};

// A kernel parameter from EIATTR_KPARAM_INFO.
struct CubinParam {
  uint32_t ordinal = 0;
  uint32_t offset = 0;  // bytes into the parameter area
  uint32_t size = 0;
};

struct CubinImage {
  std::string name;
  int sm = 0;  // from e_flags, e.g. 90
  // The loadable sections, each at a multiple of max(align, 128): `image` holds the bytes of
  // the initialised ones; uninitialised ones (.nv.global) follow, zeros up to image_size.
  std::vector<uint8_t> image;
  uint64_t image_size = 0;   // bytes to upload: image, then zeros
  uint64_t code_offset = 0;  // .text.<name> in the image
  uint64_t code_size = 0;
  int registers = 0;                   // EIATTR_REGCOUNT
  int max_registers = -1;              // EIATTR_MAXREG_COUNT, -1 when absent
  uint32_t shared_bytes = 0;           // size of .nv.shared.<name> (static shared memory)
  uint32_t local_bytes = 0;            // EIATTR_MIN_STACK_SIZE: per-thread stack incl. callees
  uint32_t frame_bytes = 0;            // EIATTR_FRAME_SIZE of the kernel itself
  uint32_t max_stack_bytes = 0;        // EIATTR_MAX_STACK_SIZE, 0 when absent
  uint32_t param_offset = 0;           // EIATTR_PARAM_CBANK: the parameter area's start in cbank 0
  uint32_t param_size = 0;             // EIATTR_CBANK_PARAM_SIZE
  uint32_t cbank0_size = 0;            // size of .nv.constant0.<name> (param_offset + param_size)
  std::vector<CubinParam> params;      // by ordinal
  std::vector<uint32_t> exit_offsets;  // EIATTR_EXIT_INSTR_OFFSETS
  std::vector<CubinConstBank> constant_banks;  // by bank, cbank 0 included
  std::vector<CubinReloc> relocs;
};

// Loads kernel `name` from `elf`. InvalidArgument naming the problem for a truncated or
// non-CUDA ELF, a section / table / record past its end, a missing kernel or attribute, or a
// relocation of an unknown type (or against an undefined symbol) in a loaded section.
// Relocations in sections that are not loaded (debug info) are ignored.
Result<CubinImage> load_cubin(std::span<const uint8_t> elf, const std::string& name);

// Applies every relocation for the image uploaded at GPU address `base`, in place. Relocations
// patch initialised bytes only (InvalidArgument otherwise).
Status relocate(CubinImage& img, uint64_t base);

// "R_CUDA_64", "R_CUDA_ABS32_LO_32", ... or "0x<hex>" for others.
std::string reloc_name(uint32_t type);

}  // namespace baregrad::nv
