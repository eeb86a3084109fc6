#include "drivers/amd/code_object.h"

#include <algorithm>
#include <cstring>
#include <optional>

#include "base/elf.h"
#include "base/format.h"

namespace baregrad::amd {
namespace {

constexpr uint16_t EM_AMDGPU = 224;
constexpr uint8_t ELFOSABI_AMDGPU_HSA = 64;
// ELFABIVERSION_AMDGPU_HSA_V4 .. _V6: the code objects with this descriptor layout.
constexpr uint8_t kFirstAbiVersion = 2, kLastAbiVersion = 4;
constexpr uint32_t EF_AMDGPU_MACH = 0xff;
constexpr uint64_t kMaxImage = uint64_t{1} << 30;  // refuse absurd section addresses
constexpr uint64_t kDescriptorAlign = 64, kCodeAlign = 256;
constexpr uint64_t SHF_EXECINSTR = 0x4;

class Loader {
 public:
  Loader(std::span<const uint8_t> elf, const std::string& name) : file_(elf), name_(name) {}
  Result<CodeObject> run();

 private:
  Status bad(const std::string& msg) const { return invalid_argument("amdhsa: " + msg); }
  Status open();
  Status layout();
  Status kernel();
  Status descriptor();
  Status relocations();

  std::span<const uint8_t> file_;
  std::string name_;
  std::optional<elf::Reader> elf_;
  CodeObject co_;
};

Status Loader::open() {
  ASSIGN_OR_RETURN(elf::Reader r, elf::Reader::open(file_, "amdhsa", EM_AMDGPU, "EM_AMDGPU (224)"));
  elf_.emplace(std::move(r));
  const elf::Ehdr& eh = elf_->header();
  if (eh.e_ident[7] != ELFOSABI_AMDGPU_HSA)
    return bad("OS ABI " + std::to_string(eh.e_ident[7]) +
               " is not ELFOSABI_AMDGPU_HSA (64): not an HSA code object");
  if (eh.e_ident[8] < kFirstAbiVersion || eh.e_ident[8] > kLastAbiVersion)
    return bad("ABI version " + std::to_string(eh.e_ident[8]) +
               " is not code object v4, v5 or v6 (2..4)");
  if (eh.e_type != elf::ET_DYN)
    return bad("e_type " + std::to_string(eh.e_type) +
               " is not ET_DYN (3): a relocatable object must be linked (ld.lld -shared) first");
  co_.gfx = gfx_of_mach(eh.e_flags & EF_AMDGPU_MACH);
  return {};
}

// Every allocated section at its address; the image ends where the last one does.
Status Loader::layout() {
  uint64_t end = 0;
  const auto& sh = elf_->sections();
  for (size_t i = 0; i < sh.size(); i++) {
    if (!(sh[i].sh_flags & elf::SHF_ALLOC)) continue;
    if (sh[i].sh_addr > kMaxImage || sh[i].sh_size > kMaxImage - sh[i].sh_addr)
      return bad("section " + elf_->name(i) + " (address " + hex(sh[i].sh_addr) + ", size " +
                 hex(sh[i].sh_size) + ") lies beyond any GPU image");
    end = std::max(end, sh[i].sh_addr + sh[i].sh_size);
  }
  co_.image.assign(end, 0);
  for (size_t i = 0; i < sh.size(); i++) {
    if (!(sh[i].sh_flags & elf::SHF_ALLOC) || sh[i].sh_type == elf::SHT_NOBITS) continue;
    auto bytes = elf_->data(i);
    if (!bytes.empty()) std::memcpy(co_.image.data() + sh[i].sh_addr, bytes.data(), bytes.size());
  }
  return {};
}

// NAME.kd (STT_OBJECT) and NAME (STT_FUNC) from the dynamic symbol table, else .symtab.
Status Loader::kernel() {
  Result<std::vector<elf::Symbol>> syms = elf_->symbols(elf::SHT_DYNSYM);
  if (!syms.ok()) syms = elf_->symbols(elf::SHT_SYMTAB);
  if (!syms.ok()) return syms.status();
  const elf::Symbol* kd = nullptr;
  std::string kernels;
  for (const elf::Symbol& s : *syms) {
    if (s.type() != elf::STT_OBJECT || !s.name.ends_with(".kd")) continue;
    kernels += (kernels.empty() ? "" : ", ") + s.name.substr(0, s.name.size() - 3);
    if (s.name == name_ + ".kd") kd = &s;
  }
  if (kd == nullptr)
    return bad("no kernel '" + name_ + "' (" + name_ +
               ".kd missing); kernels: " + (kernels.empty() ? "none" : kernels));
  const elf::Sym& y = kd->sym;
  if (y.st_size != sizeof(KernelDescriptor) || y.st_value > co_.image.size() ||
      co_.image.size() - y.st_value < sizeof(KernelDescriptor))
    return bad(name_ + ".kd (address " + hex(y.st_value) + ", " + std::to_string(y.st_size) +
               " bytes) is not a 64-byte descriptor inside the " +
               std::to_string(co_.image.size()) + "-byte image");
  if (y.st_value % kDescriptorAlign != 0)
    return bad(name_ + ".kd at " + hex(y.st_value) + " is not 64-byte aligned");
  co_.name = name_;
  co_.descriptor_offset = y.st_value;
  std::memcpy(&co_.descriptor, co_.image.data() + y.st_value, sizeof(KernelDescriptor));
  return {};
}

// The entry: inside an executable section, 256-byte aligned; reserved bytes zero.
Status Loader::descriptor() {
  const KernelDescriptor& d = co_.descriptor;
  auto zero = [](const uint8_t* p, size_t n) {
    return std::all_of(p, p + n, [](uint8_t b) { return b == 0; });
  };
  if (!zero(d.reserved0, sizeof(d.reserved0)) || !zero(d.reserved1, sizeof(d.reserved1)) ||
      !zero(d.reserved3, sizeof(d.reserved3)))
    return bad(name_ + ".kd has non-zero reserved bytes (a corrupt descriptor)");
  int64_t entry = static_cast<int64_t>(co_.descriptor_offset) + d.kernel_code_entry_byte_offset;
  bool in_code = false;
  const auto& sh = elf_->sections();
  for (const elf::Shdr& s : sh)
    if ((s.sh_flags & SHF_EXECINSTR) && entry >= 0 && static_cast<uint64_t>(entry) >= s.sh_addr &&
        static_cast<uint64_t>(entry) < s.sh_addr + s.sh_size)
      in_code = true;
  if (!in_code || entry % kCodeAlign != 0)
    return bad(name_ + ".kd's kernel_code_entry_byte_offset " +
               std::to_string(d.kernel_code_entry_byte_offset) + " puts the entry at " +
               std::to_string(entry) + ", not a 256-byte aligned address in executable code");
  co_.code_offset = static_cast<uint64_t>(entry);
  co_.wave32 = d.kernel_code_properties & KERNEL_CODE_PROPERTY_ENABLE_WAVEFRONT_SIZE32;
  // VGPR encoding granules: 8 on gfx90a/gfx942 (unified VGPR/AGPR file) and in wave32, else 4.
  bool unified = co_.gfx == "gfx90a" || co_.gfx == "gfx942";
  int granule = unified || co_.wave32 ? 8 : 4;
  co_.vgprs = static_cast<int>(
                  (d.compute_pgm_rsrc1 & COMPUTE_PGM_RSRC1_GRANULATED_WORKITEM_VGPR_COUNT) + 1) *
              granule;
  co_.user_sgprs = static_cast<int>((d.compute_pgm_rsrc2 & COMPUTE_PGM_RSRC2_USER_SGPR_COUNT) >>
                                    COMPUTE_PGM_RSRC2_USER_SGPR_COUNT_SHIFT);
  return {};
}

Status Loader::relocations() {
  const auto& sh = elf_->sections();
  for (size_t r = 0; r < sh.size(); r++) {
    const elf::Shdr& s = sh[r];
    if (s.sh_type == elf::SHT_REL)
      return bad(elf_->name(r) + ": SHT_REL relocations (ld.lld writes SHT_RELA)");
    if (s.sh_type != elf::SHT_RELA || !(s.sh_flags & elf::SHF_ALLOC)) continue;
    if (s.sh_size % sizeof(elf::Rela) != 0)
      return bad(elf_->name(r) + " has a size that is not a multiple of 24");
    auto bytes = elf_->data(r);
    for (size_t i = 0; i < s.sh_size / sizeof(elf::Rela); i++) {
      elf::Rela e{};
      std::memcpy(&e, bytes.data() + i * sizeof(e), sizeof(e));
      auto type = static_cast<uint32_t>(e.r_info);
      std::string where = elf_->name(r) + " entry " + std::to_string(i) + ": ";
      if (type == R_AMDGPU_NONE) continue;
      if (type != R_AMDGPU_RELATIVE64)
        return bad(where + "relocation type " + std::to_string(type) +
                   " is not applied (known: R_AMDGPU_RELATIVE64)");
      if (e.r_offset > co_.image.size() || co_.image.size() - e.r_offset < 8)
        return bad(where + "R_AMDGPU_RELATIVE64 at " + hex(e.r_offset) + " lies outside the " +
                   std::to_string(co_.image.size()) + "-byte image");
      co_.relocs.push_back({e.r_offset, e.r_addend});
    }
  }
  return {};
}

Result<CodeObject> Loader::run() {
  RETURN_IF_ERROR(open());
  RETURN_IF_ERROR(layout());
  RETURN_IF_ERROR(kernel());
  RETURN_IF_ERROR(descriptor());
  RETURN_IF_ERROR(relocations());
  return std::move(co_);
}

}  // namespace

std::string gfx_of_mach(uint32_t mach) {
  switch (mach) {
    case 0x3f:
      return "gfx90a";  // EF_AMDGPU_MACH_AMDGCN_GFX90A
    case 0x4c:
      return "gfx942";  // EF_AMDGPU_MACH_AMDGCN_GFX942
    case 0x41:
      return "gfx1100";  // EF_AMDGPU_MACH_AMDGCN_GFX1100
    case 0x4e:
      return "gfx1201";  // EF_AMDGPU_MACH_AMDGCN_GFX1201
    default:
      return "mach " + hex(mach);
  }
}

Result<CodeObject> load_code_object(std::span<const uint8_t> elf, const std::string& name) {
  return Loader(elf, name).run();
}

Status relocate(CodeObject& co, uint64_t base) {
  for (const CodeObjectReloc& r : co.relocs) {
    if (r.offset > co.image.size() || co.image.size() - r.offset < 8)
      return invalid_argument("amdhsa: R_AMDGPU_RELATIVE64 at " + hex(r.offset) +
                              " lies outside the " + std::to_string(co.image.size()) +
                              "-byte image");
    uint64_t v = base + static_cast<uint64_t>(r.addend);
    std::memcpy(co.image.data() + r.offset, &v, 8);
  }
  return {};
}

}  // namespace baregrad::amd
