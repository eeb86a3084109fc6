#include "base/elf.h"

#include <bit>
#include <cstring>

#include "base/format.h"

namespace baregrad::elf {
namespace {

static_assert(std::endian::native == std::endian::little, "the ELF reader assumes little-endian");

constexpr uint8_t kElfClass64 = 2, kElfData2Lsb = 1;

// The NUL-terminated string at `at` of string table `table`, or false when it runs out.
bool string_at(std::span<const uint8_t> table, uint32_t at, std::string* out) {
  if (at >= table.size()) return false;
  const void* z = std::memchr(table.data() + at, 0, table.size() - at);
  if (z == nullptr) return false;
  out->assign(reinterpret_cast<const char*>(table.data() + at), static_cast<const char*>(z));
  return true;
}

}  // namespace

Result<Reader> Reader::open(std::span<const uint8_t> file,
                            std::string prefix,
                            uint16_t machine,
                            std::string machine_name) {
  Reader r(file, std::move(prefix));
  RETURN_IF_ERROR(r.header(machine, machine_name));
  RETURN_IF_ERROR(r.section_table());
  return r;
}

Status Reader::bad(const std::string& msg) const { return invalid_argument(prefix_ + ": " + msg); }

Status Reader::header(uint16_t machine, const std::string& machine_name) {
  if (file_.size() < sizeof(Ehdr))
    return bad("truncated: " + std::to_string(file_.size()) + " bytes, an ELF64 header needs 64");
  std::memcpy(&eh_, file_.data(), sizeof(eh_));
  if (std::memcmp(eh_.e_ident,
                  "\x7f"
                  "ELF",
                  4) != 0)
    return bad("bad magic (not an ELF file)");
  if (eh_.e_ident[4] != kElfClass64 || eh_.e_ident[5] != kElfData2Lsb)
    return bad("not a little-endian ELF64 file (class " + std::to_string(eh_.e_ident[4]) +
               ", data " + std::to_string(eh_.e_ident[5]) + ")");
  if (eh_.e_machine != machine)
    return bad("e_machine " + std::to_string(eh_.e_machine) + " is not " + machine_name);
  return {};
}

Status Reader::section_table() {
  if (eh_.e_shentsize != sizeof(Shdr))
    return bad("e_shentsize " + std::to_string(eh_.e_shentsize) + " is not 64");
  uint64_t end = eh_.e_shoff + uint64_t{eh_.e_shnum} * sizeof(Shdr);
  if (eh_.e_shoff > file_.size() || end > file_.size())
    return bad("section header table (offset " + hex(eh_.e_shoff) + ", " +
               std::to_string(eh_.e_shnum) + " x 64 bytes) runs past the end of the " +
               std::to_string(file_.size()) + "-byte file");
  sh_.resize(eh_.e_shnum);
  for (size_t i = 0; i < sh_.size(); i++)
    std::memcpy(&sh_[i], file_.data() + eh_.e_shoff + i * sizeof(Shdr), sizeof(Shdr));
  if (eh_.e_shstrndx >= sh_.size())
    return bad("e_shstrndx " + std::to_string(eh_.e_shstrndx) + " is not a section");
  const Shdr& str = sh_[eh_.e_shstrndx];
  if (str.sh_offset > file_.size() || str.sh_size > file_.size() - str.sh_offset)
    return bad("section name table runs past the end of the file");
  auto strtab = data(eh_.e_shstrndx);
  names_.resize(sh_.size());
  for (size_t i = 0; i < sh_.size(); i++) {
    if (!string_at(strtab, sh_[i].sh_name, &names_[i]))
      return bad("section " + std::to_string(i) + " has a name outside the name table");
    const Shdr& s = sh_[i];
    if (s.sh_type != SHT_NOBITS &&
        (s.sh_offset > file_.size() || s.sh_size > file_.size() - s.sh_offset))
      return bad("section " + names_[i] + " (offset " + hex(s.sh_offset) + ", size " +
                 hex(s.sh_size) + ") runs past the end of the " + std::to_string(file_.size()) +
                 "-byte file");
  }
  return {};
}

int Reader::find(std::string_view name) const {
  for (size_t i = 0; i < names_.size(); i++)
    if (names_[i] == name) return static_cast<int>(i);
  return -1;
}

std::span<const uint8_t> Reader::data(size_t s) const {
  if (sh_[s].sh_type == SHT_NOBITS) return {};
  return file_.subspan(sh_[s].sh_offset, sh_[s].sh_size);
}

Result<std::vector<Symbol>> Reader::symbols(uint32_t type) const {
  int table = -1;
  for (size_t i = 0; i < sh_.size(); i++)
    if (sh_[i].sh_type == type) table = static_cast<int>(i);
  if (table < 0) return bad("no symbol table");
  const Shdr& s = sh_[table];
  const std::string& n = names_[table];
  if (s.sh_size % sizeof(Sym) != 0 || s.sh_link >= sh_.size())
    return bad(n + " has a size that is not a multiple of 24 or a bad string table link");
  auto strtab = data(s.sh_link);
  auto bytes = data(table);
  std::vector<Symbol> out(s.sh_size / sizeof(Sym));
  for (size_t i = 0; i < out.size(); i++) {
    std::memcpy(&out[i].sym, bytes.data() + i * sizeof(Sym), sizeof(Sym));
    if (!string_at(strtab, out[i].sym.st_name, &out[i].name))
      return bad("symbol " + std::to_string(i) + " has a name outside " + names_[s.sh_link]);
  }
  return out;
}

}  // namespace baregrad::elf
