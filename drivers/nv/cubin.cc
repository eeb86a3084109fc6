#include "drivers/nv/cubin.h"

#include <algorithm>
#include <bit>
#include <cctype>
#include <cstdio>
#include <cstring>
#include <optional>

#include "base/elf.h"
#include "base/format.h"

namespace baregrad::nv {
namespace {

using elf::SHF_ALLOC;
using elf::SHN_LORESERVE;
using elf::SHN_UNDEF;
using elf::SHT_NOBITS;
using elf::SHT_PROGBITS;
using elf::SHT_REL;
using elf::SHT_RELA;
using elf::STT_FUNC;

constexpr uint16_t EM_CUDA = 190;
constexpr uint64_t kSectionAlign = 128;            // tinygrad's force_section_align
constexpr uint64_t kMaxAlign = 0x1000;             // GPU sections need 256 at most
constexpr uint64_t kMaxImage = uint64_t{1} << 32;  // refuse absurd NOBITS sizes

Status bad(const std::string& msg) { return invalid_argument("cubin: " + msg); }

class Reader {
 public:
  Reader(std::span<const uint8_t> elf, const std::string& name) : file_(elf), name_(name) {}
  Result<CubinImage> run();

 private:
  std::span<const uint8_t> data(size_t s) const { return elf_->data(s); }
  Status header();
  Status layout();
  Status kernel();
  // Walks the attribute records of section `s`, calling f(attr, format, value16, payload).
  template <class F>
  Status records(size_t s, F&& f) const;
  Status info();
  Status relocations();
  int find(const std::string& section) const { return elf_->find(section); }

  std::span<const uint8_t> file_;
  std::string name_;
  std::optional<elf::Reader> elf_;
  std::vector<elf::Shdr> sh_;
  std::vector<std::string> names_;
  std::vector<elf::Symbol> syms_;
  std::vector<int64_t> place_;  // image offset of each section, -1 when not loaded
  int text_ = -1;
  uint32_t sym_ = 0;  // the kernel's symbol index
  bool have_regs_ = false, have_cbank_ = false, have_param_size_ = false;
  CubinImage img_;
};

// The ELF header, sections and symbols; the SM from e_flags: ABI version 8 and later keep it in
// bits 8..15, older ones in bits 0..7.
Status Reader::header() {
  ASSIGN_OR_RETURN(elf::Reader r, elf::Reader::open(file_, "cubin", EM_CUDA, "EM_CUDA (190)"));
  elf_.emplace(std::move(r));
  const elf::Ehdr& eh = elf_->header();
  img_.sm = static_cast<int>(eh.e_ident[8] >= 8 ? (eh.e_flags >> 8) & 0xff : eh.e_flags & 0xff);
  sh_ = elf_->sections();
  names_ = elf_->names();
  ASSIGN_OR_RETURN(syms_, elf_->symbols(elf::SHT_SYMTAB));
  return {};
}

// Loadable sections, each at a multiple of max(sh_addralign, 128): allocated PROGBITS first
// (their bytes are the image), then NOBITS other than shared memory (zeros up to image_size).
Status Reader::layout() {
  place_.assign(sh_.size(), -1);
  uint64_t off = 0;
  for (uint32_t type : {SHT_PROGBITS, SHT_NOBITS}) {
    for (size_t i = 0; i < sh_.size(); i++) {
      const elf::Shdr& s = sh_[i];
      if (!(s.sh_flags & SHF_ALLOC) || s.sh_type != type ||
          (type == SHT_NOBITS && names_[i].starts_with(".nv.shared.")))
        continue;
      uint64_t align = std::max<uint64_t>(s.sh_addralign, kSectionAlign);
      if (align > kMaxAlign || s.sh_size > kMaxImage)
        return bad("section " + names_[i] + " has size " + hex(s.sh_size) + " / alignment " +
                   hex(s.sh_addralign) + " beyond any GPU image");
      off = (off + align - 1) / align * align;
      if (off + s.sh_size > kMaxImage) return bad("the image would exceed 4 GiB");
      place_[i] = static_cast<int64_t>(off);
      off += s.sh_size;
    }
    if (type == SHT_PROGBITS) img_.image.assign(off, 0);  // file bytes + 4 KiB per section
  }
  img_.image_size = off;
  for (size_t i = 0; i < sh_.size(); i++)
    if (place_[i] >= 0 && sh_[i].sh_type == SHT_PROGBITS &&
        sh_[i].sh_size > 0)  // data() may be null
      std::memcpy(img_.image.data() + place_[i], file_.data() + sh_[i].sh_offset, sh_[i].sh_size);
  return {};
}

Status Reader::kernel() {
  text_ = find(".text." + name_);
  if (text_ < 0) {
    std::string kernels;
    for (const std::string& n : names_)
      if (n.starts_with(".text.")) kernels += (kernels.empty() ? "" : ", ") + n.substr(6);
    return bad("no kernel '" + name_ + "' (.text." + name_ +
               " missing); kernels: " + (kernels.empty() ? "none" : kernels));
  }
  if (place_[text_] < 0) return bad(".text." + name_ + " is not an allocated PROGBITS section");
  img_.name = name_;
  img_.code_offset = static_cast<uint64_t>(place_[text_]);
  img_.code_size = sh_[text_].sh_size;
  bool found = false;
  for (size_t i = 0; i < syms_.size() && !found; i++)
    if (syms_[i].name == name_ && syms_[i].type() == STT_FUNC) {
      sym_ = static_cast<uint32_t>(i);
      found = true;
    }
  if (!found) return bad("no function symbol '" + name_ + "' in .symtab");
  if (int sh = find(".nv.shared." + name_); sh >= 0)
    img_.shared_bytes = static_cast<uint32_t>(sh_[sh].sh_size);
  // Constant banks: ".nv.constantN" for the whole module, ".nv.constantN.<name>" for this kernel.
  for (size_t i = 0; i < sh_.size(); i++) {
    const std::string& n = names_[i];
    if (!n.starts_with(".nv.constant") || place_[i] < 0) continue;
    size_t digits = 12, end = digits;
    while (end < n.size() && std::isdigit(static_cast<unsigned char>(n[end]))) end++;
    if (end == digits || end - digits > 2) continue;
    std::string rest = n.substr(end);
    if (!rest.empty() && rest != "." + name_) continue;  // another kernel's bank
    int bank = std::stoi(n.substr(digits, end - digits));
    img_.constant_banks.push_back({bank, static_cast<uint64_t>(place_[i]), sh_[i].sh_size});
    if (bank == 0 && rest == "." + name_) img_.cbank0_size = static_cast<uint32_t>(sh_[i].sh_size);
  }
  std::sort(img_.constant_banks.begin(), img_.constant_banks.end(),
            [](const CubinConstBank& a, const CubinConstBank& b) { return a.bank < b.bank; });
  if (find(".nv.constant0." + name_) < 0) return bad("no .nv.constant0." + name_ + " section");
  return {};
}

template <class F>
Status Reader::records(size_t s, F&& f) const {
  auto bytes = data(s);
  size_t pos = 0;
  while (pos < bytes.size()) {
    if (bytes.size() - pos < 4)
      return bad(names_[s] + " ends inside a record header at +" + hex(pos));
    uint8_t fmt = bytes[pos], attr = bytes[pos + 1];
    uint16_t v = static_cast<uint16_t>(bytes[pos + 2] | bytes[pos + 3] << 8);
    std::span<const uint8_t> payload;
    if (fmt == EIFMT_SVAL) {
      if (bytes.size() - pos - 4 < v)
        return bad(names_[s] + " record " + hex(attr) + " at +" + hex(pos) + " has a " +
                   std::to_string(v) + "-byte payload past the end of the section");
      payload = bytes.subspan(pos + 4, v);
      pos = (pos + 4 + v + 3) & ~size_t{3};  // records are 4-byte aligned
    } else if (fmt == EIFMT_NVAL || fmt == EIFMT_BVAL || fmt == EIFMT_HVAL) {
      pos += 4;
    } else {
      return bad(names_[s] + " has an unknown record format " + hex(fmt) + " at +" + hex(pos));
    }
    RETURN_IF_ERROR(f(attr, fmt, v, payload));
  }
  return {};
}

Status Reader::info() {
  auto u32 = [](std::span<const uint8_t> p, size_t at) {
    uint32_t v;
    std::memcpy(&v, p.data() + at, 4);
    return v;
  };
  auto need = [&](size_t s, uint8_t attr, std::span<const uint8_t> p, size_t n) -> Status {
    if (p.size() >= n) return {};
    return bad(names_[s] + " attribute " + hex(attr) + " has a " + std::to_string(p.size()) +
               "-byte payload, needs " + std::to_string(n));
  };
  // Per-symbol attributes: {u32 symbol, u32 value} for this kernel's symbol.
  auto per_symbol = [&](size_t s, uint8_t attr, std::span<const uint8_t> p) -> Status {
    if (attr != EIATTR_REGCOUNT && attr != EIATTR_MIN_STACK_SIZE && attr != EIATTR_FRAME_SIZE &&
        attr != EIATTR_MAX_STACK_SIZE)
      return {};
    RETURN_IF_ERROR(need(s, attr, p, 8));
    if (u32(p, 0) != sym_) return {};
    uint32_t v = u32(p, 4);
    if (attr == EIATTR_REGCOUNT) {
      img_.registers = static_cast<int>(v);
      have_regs_ = true;
    }
    if (attr == EIATTR_MIN_STACK_SIZE) img_.local_bytes = v;
    if (attr == EIATTR_FRAME_SIZE) img_.frame_bytes = v;
    if (attr == EIATTR_MAX_STACK_SIZE) img_.max_stack_bytes = v;
    return {};
  };
  uint32_t cbank_size = 0;
  for (size_t s = 0; s < sh_.size(); s++) {
    bool global = names_[s] == ".nv.info", mine = names_[s] == ".nv.info." + name_;
    if (!global && !mine) continue;
    RETURN_IF_ERROR(records(
        s, [&](uint8_t attr, uint8_t fmt, uint16_t v, std::span<const uint8_t> p) -> Status {
          if (fmt == EIFMT_SVAL) RETURN_IF_ERROR(per_symbol(s, attr, p));
          if (!mine) return {};
          switch (attr) {
            case EIATTR_PARAM_CBANK:
              RETURN_IF_ERROR(need(s, attr, p, 8));
              img_.param_offset = u32(p, 4) & 0xffff;
              cbank_size = u32(p, 4) >> 16;
              have_cbank_ = true;
              return {};
            case EIATTR_CBANK_PARAM_SIZE:
              img_.param_size = v;
              have_param_size_ = true;
              return {};
            case EIATTR_MAXREG_COUNT:
              img_.max_registers = v;
              return {};
            case EIATTR_KPARAM_INFO: {
              RETURN_IF_ERROR(need(s, attr, p, 12));
              uint32_t flags = u32(p, 8);
              img_.params.push_back({u32(p, 4) & 0xffff, u32(p, 4) >> 16, flags >> 18});
              return {};
            }
            case EIATTR_EXIT_INSTR_OFFSETS:
              if (fmt != EIFMT_SVAL || p.size() % 4 != 0)
                return bad(names_[s] + " EIATTR_EXIT_INSTR_OFFSETS is not a list of u32");
              for (size_t i = 0; i < p.size(); i += 4) img_.exit_offsets.push_back(u32(p, i));
              return {};
            default:
              return {};
          }
        }));
  }
  if (!have_regs_) {
    // Older cubins keep the register count in the top byte of the code section's sh_info.
    img_.registers = static_cast<int>(sh_[text_].sh_info >> 24);
    if (img_.registers == 0) return bad("no EIATTR_REGCOUNT for " + name_ + " in .nv.info");
  }
  if (!have_cbank_) return bad("no EIATTR_PARAM_CBANK in .nv.info." + name_);
  if (!have_param_size_) img_.param_size = cbank_size;
  if (img_.param_size != cbank_size)
    return bad("EIATTR_CBANK_PARAM_SIZE " + std::to_string(img_.param_size) +
               " != the EIATTR_PARAM_CBANK size " + std::to_string(cbank_size));
  if (uint64_t{img_.param_offset} + img_.param_size > img_.cbank0_size)
    return bad("parameters at " + hex(img_.param_offset) + " + " + hex(img_.param_size) +
               " run past .nv.constant0." + name_ + " (" + hex(img_.cbank0_size) + " bytes)");
  std::sort(img_.params.begin(), img_.params.end(),
            [](const CubinParam& a, const CubinParam& b) { return a.ordinal < b.ordinal; });
  for (const CubinParam& p : img_.params)
    if (uint64_t{p.offset} + p.size > img_.param_size)
      return bad("EIATTR_KPARAM_INFO parameter " + std::to_string(p.ordinal) + " at " +
                 hex(p.offset) + " (" + std::to_string(p.size) + " bytes) lies outside the " +
                 std::to_string(img_.param_size) + "-byte parameter area");
  for (uint32_t e : img_.exit_offsets)
    if (e >= img_.code_size)
      return bad("EIATTR_EXIT_INSTR_OFFSETS " + hex(e) + " lies outside .text." + name_);
  return {};
}

Status Reader::relocations() {
  for (size_t r = 0; r < sh_.size(); r++) {
    const elf::Shdr& s = sh_[r];
    if (s.sh_type != SHT_REL && s.sh_type != SHT_RELA) continue;
    if (s.sh_info >= sh_.size() || place_[s.sh_info] < 0) continue;  // e.g. .rela.debug_frame
    size_t entsize = s.sh_type == SHT_RELA ? 24 : 16;
    if (s.sh_size % entsize != 0)
      return bad(names_[r] + " has a size that is not a multiple of " + std::to_string(entsize));
    const elf::Shdr& target = sh_[s.sh_info];
    if (target.sh_type != SHT_PROGBITS)
      return bad(names_[r] + " relocates " + names_[s.sh_info] + ", which has no file bytes");
    auto bytes = data(r);
    for (size_t i = 0; i < s.sh_size / entsize; i++) {
      elf::Rela e{};
      std::memcpy(&e, bytes.data() + i * entsize, entsize);
      uint32_t type = static_cast<uint32_t>(e.r_info), sym = static_cast<uint32_t>(e.r_info >> 32);
      std::string where = names_[r] + " entry " + std::to_string(i) + ": ";
      if (type != R_CUDA_64 && type != R_CUDA_ABS32_LO_32 && type != R_CUDA_ABS32_HI_32)
        return bad(where + "unknown relocation type " + hex(type) + " at " + names_[s.sh_info] +
                   "+" + hex(e.r_offset) +
                   " (known: R_CUDA_64, R_CUDA_ABS32_LO_32, R_CUDA_ABS32_HI_32)");
      if (e.r_offset > target.sh_size || target.sh_size - e.r_offset < 8)
        return bad(where + reloc_name(type) + " at " + hex(e.r_offset) + " lies outside " +
                   names_[s.sh_info] + " (" + hex(target.sh_size) + " bytes)");
      if (sym >= syms_.size())
        return bad(where + "symbol index " + std::to_string(sym) + " is outside .symtab");
      const elf::Sym& y = syms_[sym].sym;
      if (y.st_shndx == SHN_UNDEF)
        return bad(where + reloc_name(type) + " against undefined symbol '" + syms_[sym].name +
                   "'");
      if (y.st_shndx >= SHN_LORESERVE || y.st_shndx >= sh_.size() || place_[y.st_shndx] < 0)
        return bad(where + reloc_name(type) + " against '" + syms_[sym].name +
                   "', which is not in a loaded section");
      CubinReloc rel;
      rel.offset = static_cast<uint64_t>(place_[s.sh_info]) + e.r_offset;
      rel.target = static_cast<uint64_t>(place_[y.st_shndx]) + y.st_value +
                   static_cast<uint64_t>(s.sh_type == SHT_RELA ? e.r_addend : 0);
      rel.type = type;
      img_.relocs.push_back(rel);
    }
  }
  return {};
}

Result<CubinImage> Reader::run() {
  RETURN_IF_ERROR(header());
  RETURN_IF_ERROR(layout());
  RETURN_IF_ERROR(kernel());
  RETURN_IF_ERROR(info());
  RETURN_IF_ERROR(relocations());
  return std::move(img_);
}

}  // namespace

std::string reloc_name(uint32_t type) {
  switch (type) {
    case R_CUDA_64:
      return "R_CUDA_64";
    case R_CUDA_ABS32_LO_32:
      return "R_CUDA_ABS32_LO_32";
    case R_CUDA_ABS32_HI_32:
      return "R_CUDA_ABS32_HI_32";
    default:
      return hex(type);
  }
}

Result<CubinImage> load_cubin(std::span<const uint8_t> elf, const std::string& name) {
  return Reader(elf, name).run();
}

Status relocate(CubinImage& img, uint64_t base) {
  for (const CubinReloc& r : img.relocs) {
    if (r.offset > img.image.size() || img.image.size() - r.offset < 8)
      return bad(reloc_name(r.type) + " at " + hex(r.offset) + " lies outside the " +
                 std::to_string(img.image.size()) + "-byte image");
    uint64_t addr = base + r.target;
    uint8_t* at = img.image.data() + r.offset;
    if (r.type == R_CUDA_64) {
      std::memcpy(at, &addr, 8);
    } else {
      uint32_t half = static_cast<uint32_t>(r.type == R_CUDA_ABS32_HI_32 ? addr >> 32 : addr);
      std::memcpy(at + 4, &half, 4);
    }
  }
  return {};
}

}  // namespace baregrad::nv
