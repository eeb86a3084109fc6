// A bounds-checked reader of little-endian ELF64 files (System V gABI): the header, the section
// table and its names, symbol tables. The device-code loaders (drivers/nv/cubin.h,
// drivers/amd/code_object.h) build on it; every error is InvalidArgument, prefixed with the
// loader's name ("cubin: ...") and naming what is wrong. Nothing is read past the file.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace baregrad::elf {

// The gABI's structures (Elf64_Ehdr, Elf64_Shdr, Elf64_Sym, Elf64_Rela, Elf64_Phdr).
struct Ehdr {
  uint8_t e_ident[16];
  uint16_t e_type, e_machine;
  uint32_t e_version;
  uint64_t e_entry, e_phoff, e_shoff;
  uint32_t e_flags;
  uint16_t e_ehsize, e_phentsize, e_phnum, e_shentsize, e_shnum, e_shstrndx;
};
struct Shdr {
  uint32_t sh_name, sh_type;
  uint64_t sh_flags, sh_addr, sh_offset, sh_size;
  uint32_t sh_link, sh_info;
  uint64_t sh_addralign, sh_entsize;
};
struct Sym {
  uint32_t st_name;
  uint8_t st_info, st_other;
  uint16_t st_shndx;
  uint64_t st_value, st_size;
};
struct Rela {
  uint64_t r_offset, r_info;
  int64_t r_addend;  // absent in SHT_REL entries (16 bytes)
};
static_assert(sizeof(Ehdr) == 64 && sizeof(Shdr) == 64 && sizeof(Sym) == 24 && sizeof(Rela) == 24);

constexpr uint32_t SHT_PROGBITS = 1, SHT_SYMTAB = 2, SHT_RELA = 4, SHT_NOTE = 7, SHT_NOBITS = 8,
                   SHT_REL = 9, SHT_DYNSYM = 11;
constexpr uint64_t SHF_ALLOC = 0x2;
constexpr uint16_t SHN_UNDEF = 0, SHN_LORESERVE = 0xff00;
constexpr uint8_t STT_OBJECT = 1, STT_FUNC = 2;
constexpr uint16_t ET_DYN = 3;

struct Symbol {
  Sym sym;
  std::string name;
  uint8_t type() const { return sym.st_info & 0xf; }
};

class Reader {
 public:
  // Checks the header (magic, ELF64 little-endian, e_machine == `machine`, which errors call
  // `machine_name`, e.g. "EM_CUDA (190)") and reads the section table and section names.
  static Result<Reader> open(std::span<const uint8_t> file,
                             std::string prefix,
                             uint16_t machine,
                             std::string machine_name);

  const Ehdr& header() const { return eh_; }
  const std::vector<Shdr>& sections() const { return sh_; }
  const std::string& name(size_t s) const { return names_[s]; }
  const std::vector<std::string>& names() const { return names_; }
  // The index of the first section called `name`, or -1.
  int find(std::string_view name) const;
  // The file bytes of section `s`: none for SHT_NOBITS (its offset and size are not checked).
  std::span<const uint8_t> data(size_t s) const;
  // The symbols of the last section of type `type` (SHT_SYMTAB or SHT_DYNSYM), with names;
  // "no symbol table" when there is none.
  Result<std::vector<Symbol>> symbols(uint32_t type = SHT_SYMTAB) const;
  // InvalidArgument "<prefix>: <msg>".
  Status bad(const std::string& msg) const;

 private:
  Reader(std::span<const uint8_t> file, std::string prefix)
      : file_(file), prefix_(std::move(prefix)) {}
  Status header(uint16_t machine, const std::string& machine_name);
  Status section_table();

  std::span<const uint8_t> file_;
  std::string prefix_;
  Ehdr eh_{};
  std::vector<Shdr> sh_;
  std::vector<std::string> names_;
};

}  // namespace baregrad::elf
