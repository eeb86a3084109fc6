// drivers/nv/cubin: the loader on cubins ptxas produced (checked against ptxas' -v report, the
// section table as a separate minimal reader here sees it, the parameter layout the compiler
// chose, and cuobjdump when the toolkit has it), relocations, and malformed inputs refused with
// exact messages and never a crash. Skipped (saying why) when there is no ptxas.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>

#include "base/options.h"
#include "compiler/ast.h"
#include "drivers/nv/cubin.h"
#include "tests/unit/nv_target_rig.h"

namespace baregrad::nv {
namespace {

using compiler::compile_nv;
using compiler::NvKernel;

#define REQUIRE_PTXAS()                                                              \
  do {                                                                               \
    Result<compiler::Ptxas> p = compiler::Ptxas::find();                             \
    if (!p.ok()) GTEST_SKIP() << "cubin tests need ptxas: " << p.status().message(); \
  } while (0)

// out[i] = a[i] * s + b[i] * t + c[i]: four buffers and two vars (48 parameter bytes).
compiler::UOpPtr kernel_ast() {
  using namespace compiler;
  DType f = dtypes::kFloat32;
  auto a = global(0, f), b = global(1, f), c = global(2, f), o = global(3, f);
  auto st = ShapeTracker::contiguous({1000});
  auto v = load(a, st) * cast(UOp::var("s", 0, 9), f) + load(b, st) * cast(UOp::var("t", 0, 9), f) +
           load(c, st);
  return sink({store(o, st, v)});
}

const NvKernel& compiled(int sm) {
  static std::map<int, NvKernel>* kernels = new std::map<int, NvKernel>();
  auto it = kernels->find(sm);
  if (it == kernels->end()) {
    Result<NvKernel> k = compile_nv(compiler::nv(sm), kernel_ast());
    CHECK(k.ok()) << k.status().to_string();
    it = kernels->emplace(sm, std::move(*k)).first;
  }
  return it->second;
}

std::vector<uint8_t> bytes_of(const std::string& s) { return {s.begin(), s.end()}; }

Result<CubinImage> load(const std::vector<uint8_t>& elf, const std::string& name) {
  return load_cubin(std::span(elf.data(), elf.size()), name);
}

template <class T>
T get(const std::vector<uint8_t>& b, size_t off) {
  T v;
  std::memcpy(&v, b.data() + off, sizeof(T));
  return v;
}
template <class T>
void put(std::vector<uint8_t>& b, size_t off, T v) {
  std::memcpy(b.data() + off, &v, sizeof(T));
}

// A minimal section-table reader, separate from the loader: the oracle for section sizes and
// the tool that builds malformed inputs.
struct Section {
  size_t header;  // file offset of its section header
  std::string name;
  uint32_t type;
  uint64_t offset, size;
};
std::vector<Section> sections(const std::vector<uint8_t>& elf) {
  uint64_t shoff = get<uint64_t>(elf, 0x28);
  uint16_t shnum = get<uint16_t>(elf, 0x3c), shstrndx = get<uint16_t>(elf, 0x3e);
  uint64_t stroff = get<uint64_t>(elf, shoff + shstrndx * 64 + 0x18);
  std::vector<Section> out;
  for (size_t i = 0; i < shnum; i++) {
    size_t h = shoff + i * 64;
    const char* name = reinterpret_cast<const char*>(elf.data() + stroff + get<uint32_t>(elf, h));
    out.push_back({h, name, get<uint32_t>(elf, h + 4), get<uint64_t>(elf, h + 0x18),
                   get<uint64_t>(elf, h + 0x20)});
  }
  return out;
}
const Section& section(const std::vector<Section>& all, const std::string& name) {
  for (const Section& s : all)
    if (s.name == name) return s;
  ADD_FAILURE() << "no section " << name;
  return all.front();
}
int section_index(const std::vector<Section>& all, const std::string& name) {
  for (size_t i = 0; i < all.size(); i++)
    if (all[i].name == name) return static_cast<int>(i);
  return -1;
}

// `elf` with a new section appended (its name appended to a moved copy of .shstrtab); the
// section header table is rewritten at the end of the file.
std::vector<uint8_t> add_section(std::vector<uint8_t> elf,
                                 const std::string& name,
                                 uint32_t type,
                                 uint32_t link,
                                 uint32_t info,
                                 uint64_t entsize,
                                 const std::vector<uint8_t>& data) {
  uint64_t shoff = get<uint64_t>(elf, 0x28);
  uint16_t shnum = get<uint16_t>(elf, 0x3c), shstrndx = get<uint16_t>(elf, 0x3e);
  std::vector<uint8_t> headers(elf.begin() + static_cast<ptrdiff_t>(shoff),
                               elf.begin() + static_cast<ptrdiff_t>(shoff + shnum * 64));
  uint64_t str_off = get<uint64_t>(headers, shstrndx * 64 + 0x18);
  uint64_t str_size = get<uint64_t>(headers, shstrndx * 64 + 0x20);
  std::vector<uint8_t> strtab(elf.begin() + static_cast<ptrdiff_t>(str_off),
                              elf.begin() + static_cast<ptrdiff_t>(str_off + str_size));
  uint32_t name_off = static_cast<uint32_t>(strtab.size());
  strtab.insert(strtab.end(), name.begin(), name.end());
  strtab.push_back(0);
  put<uint64_t>(headers, shstrndx * 64 + 0x18, elf.size());
  put<uint64_t>(headers, shstrndx * 64 + 0x20, strtab.size());
  elf.insert(elf.end(), strtab.begin(), strtab.end());
  while (elf.size() % 8) elf.push_back(0);
  uint64_t data_off = elf.size();
  elf.insert(elf.end(), data.begin(), data.end());
  while (elf.size() % 8) elf.push_back(0);
  std::vector<uint8_t> h(64, 0);
  put<uint32_t>(h, 0, name_off);
  put<uint32_t>(h, 4, type);
  put<uint64_t>(h, 0x18, data_off);
  put<uint64_t>(h, 0x20, data.size());
  put<uint32_t>(h, 0x28, link);
  put<uint32_t>(h, 0x2c, info);
  put<uint64_t>(h, 0x30, 8);
  put<uint64_t>(h, 0x38, entsize);
  headers.insert(headers.end(), h.begin(), h.end());
  put<uint64_t>(elf, 0x28, elf.size());
  put<uint16_t>(elf, 0x3c, static_cast<uint16_t>(shnum + 1));
  elf.insert(elf.end(), headers.begin(), headers.end());
  return elf;
}

struct Rela {
  uint64_t offset;
  uint32_t sym, type;
  int64_t addend;
};
std::vector<uint8_t> rela_bytes(const std::vector<Rela>& rs) {
  std::vector<uint8_t> out(rs.size() * 24);
  for (size_t i = 0; i < rs.size(); i++) {
    put<uint64_t>(out, i * 24, rs[i].offset);
    put<uint64_t>(out, i * 24 + 8, uint64_t{rs[i].sym} << 32 | rs[i].type);
    put<int64_t>(out, i * 24 + 16, rs[i].addend);
  }
  return out;
}

// The .symtab index of the kernel's symbol, read with the minimal reader.
uint32_t kernel_symbol(const std::vector<uint8_t>& elf, const std::string& name) {
  auto all = sections(elf);
  for (const Section& s : all) {
    if (s.type != 2) continue;
    uint32_t link = get<uint32_t>(elf, s.header + 0x28);
    for (uint32_t i = 0; i < s.size / 24; i++) {
      uint32_t n = get<uint32_t>(elf, s.offset + i * 24);
      const char* str = reinterpret_cast<const char*>(elf.data() + all[link].offset + n);
      if (name == str && (elf[s.offset + i * 24 + 4] & 0xf) == 2) return i;
    }
  }
  ADD_FAILURE() << "no symbol " << name;
  return 0;
}

// cuobjdump -elf's view of the parameter area {offset, size}, when the toolkit has cuobjdump.
std::optional<std::pair<uint32_t, uint32_t>> cuobjdump_params(const std::string& cubin,
                                                              const std::string& name) {
  std::string tool = options().cuda_path + "/bin/cuobjdump";
  if (::access(tool.c_str(), X_OK) != 0) return std::nullopt;
  std::string path = (std::filesystem::temp_directory_path() / ("nv_cubin_test_" + name)).string();
  std::ofstream(path, std::ios::binary)
      .write(cubin.data(), static_cast<std::streamsize>(cubin.size()));
  std::string out;
  Result<int> rc = compiler::run_subprocess({tool, "-elf", path}, &out, 60000);
  std::filesystem::remove(path);
  EXPECT_TRUE(rc.ok() && *rc == 0) << tool << ": " << out;
  // NOTE: no std::regex: GCC 12 reports false maybe-uninitialized warnings inside it at -O2
  // with ASan. The attribute's "Value:" line follows its name; take its last hex number.
  auto value_after = [&](const std::string& attr) -> std::optional<uint32_t> {
    size_t at = out.find(attr);
    if (at == std::string::npos) return std::nullopt;
    size_t v = out.find("Value:", at);
    if (v == std::string::npos) return std::nullopt;
    size_t eol = out.find('\n', v);
    size_t hex = out.rfind("0x", eol);
    if (hex == std::string::npos || hex < v) return std::nullopt;
    return static_cast<uint32_t>(std::stoul(out.substr(hex), nullptr, 16));
  };
  std::optional<uint32_t> size = value_after("EIATTR_CBANK_PARAM_SIZE");
  std::optional<uint32_t> cbank = value_after("EIATTR_PARAM_CBANK");
  EXPECT_TRUE(size.has_value()) << out;
  EXPECT_TRUE(cbank.has_value()) << out;
  if (!size || !cbank) return std::nullopt;
  return std::make_pair(*cbank & 0xffff, *size);
}

TEST(NvCubin, LoadsWhatPtxasAndTheSectionTableSay) {
  REQUIRE_PTXAS();
  for (int sm : {80, 90, 120}) {
    SCOPED_TRACE("sm_" + std::to_string(sm));
    const NvKernel& k = compiled(sm);
    std::vector<uint8_t> elf = bytes_of(k.cubin);
    const std::string& name = k.spec.name;
    Result<CubinImage> img = load(elf, name);
    ASSERT_TRUE(img.ok()) << img.status().to_string();
    auto all = sections(elf);
    const Section& text = section(all, ".text." + name);
    const Section& cb0 = section(all, ".nv.constant0." + name);
    EXPECT_EQ(img->name, name);
    EXPECT_EQ(img->sm, sm);
    EXPECT_EQ(img->registers, k.ptxas.registers) << k.ptxas_log;
    EXPECT_EQ(img->local_bytes, k.ptxas.stack_bytes) << k.ptxas_log;
    EXPECT_EQ(img->max_registers, 255);  // no -maxrregcount
    EXPECT_EQ(img->code_size, text.size);
    EXPECT_EQ(img->code_offset % 128, 0u);
    ASSERT_LE(img->code_offset + img->code_size, img->image.size());
    EXPECT_EQ(img->image_size, img->image.size());  // no uninitialised globals
    EXPECT_EQ(
        0, std::memcmp(img->image.data() + img->code_offset, elf.data() + text.offset, text.size));
    // The parameter area follows the driver's prefix of cbank 0, as ptxas (CUDA 12/13) lays it
    // out: 0x160 bytes on sm_80, 0x210 on sm_90, 224 words on Blackwell.
    EXPECT_EQ(img->param_offset, sm == 80 ? 0x160u : sm == 90 ? 0x210u : 0x380u);
    EXPECT_EQ(img->param_size, 48u);
    EXPECT_EQ(img->param_size, k.params.size);
    EXPECT_EQ(img->cbank0_size, cb0.size);
    EXPECT_EQ(cb0.size, img->param_offset + img->param_size);
    ASSERT_EQ(img->params.size(), 6u);
    for (uint32_t i = 0; i < 6; i++) {
      EXPECT_EQ(img->params[i].ordinal, i);
      EXPECT_EQ(img->params[i].offset, 8 * i);
      EXPECT_EQ(img->params[i].size, 8u);
    }
    ASSERT_FALSE(img->constant_banks.empty());
    EXPECT_EQ(img->constant_banks[0].bank, 0);
    EXPECT_EQ(img->constant_banks[0].size, cb0.size);
    ASSERT_FALSE(img->exit_offsets.empty());
    for (uint32_t e : img->exit_offsets) {
      EXPECT_LT(e, img->code_size);
      EXPECT_EQ(e % 16, 0u);  // SASS instructions are 16 bytes
    }
    EXPECT_TRUE(img->relocs.empty());
    if (auto cu = cuobjdump_params(k.cubin, name)) {
      EXPECT_EQ(cu->first, img->param_offset);
      EXPECT_EQ(cu->second, img->param_size);
    } else {
      std::printf("[   INFO   ] no %s/bin/cuobjdump: ptxas -v is the only outside oracle\n",
                  options().cuda_path.c_str());
    }
  }
}

TEST(NvCubin, UnknownKernelNamesTheKernelsThere) {
  REQUIRE_PTXAS();
  const NvKernel& k = compiled(90);
  Result<CubinImage> img = load(bytes_of(k.cubin), "nope");
  ASSERT_FALSE(img.ok());
  EXPECT_EQ(img.status().message(),
            "cubin: no kernel 'nope' (.text.nope missing); kernels: " + k.spec.name);
}

TEST(NvCubin, MalformedHeadersAreRefusedByName) {
  REQUIRE_PTXAS();
  const NvKernel& k = compiled(90);
  const std::string& name = k.spec.name;
  std::vector<uint8_t> good = bytes_of(k.cubin);
  auto message = [&](const std::vector<uint8_t>& elf) {
    Result<CubinImage> r = load(elf, name);
    EXPECT_FALSE(r.ok());
    if (!r.ok()) {
      EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    }
    return r.ok() ? std::string("(loaded)") : r.status().message();
  };
  EXPECT_EQ(message(std::vector<uint8_t>(good.begin(), good.begin() + 10)),
            "cubin: truncated: 10 bytes, an ELF64 header needs 64");
  std::vector<uint8_t> e = good;
  e[1] = 'X';
  EXPECT_EQ(message(e), "cubin: bad magic (not an ELF file)");
  e = good;
  put<uint16_t>(e, 0x12, 62);
  EXPECT_EQ(message(e), "cubin: e_machine 62 is not EM_CUDA (190)");
  e = good;
  uint16_t shnum = get<uint16_t>(e, 0x3c);
  put<uint64_t>(e, 0x28, e.size() - 64);
  char buf[64];
  std::snprintf(buf, sizeof(buf), "0x%zx", e.size() - 64);
  EXPECT_EQ(message(e), "cubin: section header table (offset " + std::string(buf) + ", " +
                            std::to_string(shnum) + " x 64 bytes) runs past the end of the " +
                            std::to_string(e.size()) + "-byte file");
  e = good;
  auto all = sections(e);
  const Section& text = section(all, ".text." + name);
  put<uint64_t>(e, text.header + 0x18, e.size() - 16);
  char off[32], size[32];
  std::snprintf(off, sizeof(off), "0x%zx", e.size() - 16);
  std::snprintf(size, sizeof(size), "0x%llx", static_cast<unsigned long long>(text.size));
  EXPECT_EQ(message(e), "cubin: section .text." + name + " (offset " + off + ", size " + size +
                            ") runs past the end of the " + std::to_string(e.size()) +
                            "-byte file");
}

TEST(NvCubin, MalformedInfoRecordsAreRefusedByName) {
  REQUIRE_PTXAS();
  const NvKernel& k = compiled(90);
  const std::string &name = k.spec.name, info = ".nv.info." + name;
  std::vector<uint8_t> good = bytes_of(k.cubin);
  auto all = sections(good);
  const Section& sec = section(all, info);
  // Records of the section, by the format in cubin.h: {offset, format, attribute}.
  std::vector<std::tuple<size_t, uint8_t, uint8_t>> recs;
  for (size_t p = 0; p + 4 <= sec.size;) {
    uint8_t fmt = good[sec.offset + p], attr = good[sec.offset + p + 1];
    recs.push_back({p, fmt, attr});
    p += 4 + (fmt == EIFMT_SVAL ? get<uint16_t>(good, sec.offset + p + 2) : 0);
  }
  auto first_sval =
      std::find_if(recs.begin(), recs.end(), [](auto& r) { return std::get<1>(r) == EIFMT_SVAL; });
  ASSERT_NE(first_sval, recs.end());
  auto [at, fmt, attr] = *first_sval;
  uint16_t payload = get<uint16_t>(good, sec.offset + at + 2);
  std::vector<uint8_t> e = good;
  put<uint64_t>(e, sec.header + 0x20, at + 6);  // cut inside its payload
  char a[8], o[24];
  std::snprintf(a, sizeof(a), "0x%x", attr);
  std::snprintf(o, sizeof(o), "0x%zx", at);
  Result<CubinImage> r = load(e, name);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "cubin: " + info + " record " + a + " at +" + o + " has a " +
                                      std::to_string(payload) +
                                      "-byte payload past the end of the section");
  e = good;
  e[sec.offset + std::get<0>(recs[0])] = 0x07;
  std::snprintf(o, sizeof(o), "0x%zx", std::get<0>(recs[0]));
  r = load(e, name);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "cubin: " + info + " has an unknown record format 0x7 at +" + o);
  e = good;  // the parameter bank attribute renamed to EIATTR_PAD (0x01)
  for (auto& [p, f, at2] : recs)
    if (at2 == EIATTR_PARAM_CBANK) e[sec.offset + p + 1] = 0x01;
  r = load(e, name);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "cubin: no EIATTR_PARAM_CBANK in " + info);
  e = good;  // a parameter moved past the 48-byte area
  for (auto& [p, f, at2] : recs)
    if (at2 == EIATTR_KPARAM_INFO && get<uint16_t>(good, sec.offset + p + 8) == 4)
      put<uint16_t>(e, sec.offset + p + 10, 0x100);
  r = load(e, name);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(),
            "cubin: EIATTR_KPARAM_INFO parameter 4 at 0x100 (8 bytes) lies outside the 48-byte "
            "parameter area");
}

TEST(NvCubin, RelocationsAreAppliedForTheUploadAddress) {
  REQUIRE_PTXAS();
  const NvKernel& k = compiled(90);
  const std::string& name = k.spec.name;
  std::vector<uint8_t> good = bytes_of(k.cubin);
  auto all = sections(good);
  int text = section_index(all, ".text." + name), symtab = -1;
  for (size_t i = 0; i < all.size(); i++)
    if (all[i].type == 2) symtab = static_cast<int>(i);
  uint32_t sym = kernel_symbol(good, name);
  std::vector<uint8_t> e = add_section(good, ".rela.test", 4, symtab, text, 24,
                                       rela_bytes({{0x10, sym, R_CUDA_64, 0x20},
                                                   {0x20, sym, R_CUDA_ABS32_LO_32, 0x1000},
                                                   {0x30, sym, R_CUDA_ABS32_HI_32, 0x1000}}));
  Result<CubinImage> img = load(e, name);
  ASSERT_TRUE(img.ok()) << img.status().to_string();
  ASSERT_EQ(img->relocs.size(), 3u);
  uint64_t code = img->code_offset;
  EXPECT_EQ(img->relocs[0].offset, code + 0x10);
  EXPECT_EQ(img->relocs[0].target, code + 0x20);
  EXPECT_EQ(img->relocs[1].type, R_CUDA_ABS32_LO_32);
  std::vector<uint8_t> before = img->image;
  const uint64_t base = 0x7ffe12345000;
  ASSERT_TRUE(relocate(*img, base).ok());
  EXPECT_EQ(get<uint64_t>(img->image, code + 0x10), base + code + 0x20);
  EXPECT_EQ(get<uint32_t>(img->image, code + 0x24), static_cast<uint32_t>(base + code + 0x1000));
  EXPECT_EQ(get<uint32_t>(img->image, code + 0x34), static_cast<uint32_t>((base + code) >> 32));
  // Only the relocated bytes change.
  for (size_t i = 0; i < before.size(); i++) {
    bool patched = (i >= code + 0x10 && i < code + 0x18) || (i >= code + 0x24 && i < code + 0x28) ||
                   (i >= code + 0x34 && i < code + 0x38);
    if (!patched) {
      ASSERT_EQ(img->image[i], before[i]) << "byte " << i;
    }
  }
  // Relocations of sections that are not loaded (debug info, here .symtab) are ignored.
  e = add_section(good, ".rela.test", 4, symtab, symtab, 24, rela_bytes({{0, sym, 0x3, 0}}));
  img = load(e, name);
  ASSERT_TRUE(img.ok()) << img.status().to_string();
  EXPECT_TRUE(img->relocs.empty());
}

TEST(NvCubin, BadRelocationsAreRefusedByName) {
  REQUIRE_PTXAS();
  const NvKernel& k = compiled(90);
  const std::string& name = k.spec.name;
  std::vector<uint8_t> good = bytes_of(k.cubin);
  auto all = sections(good);
  int text = section_index(all, ".text." + name), symtab = -1;
  for (size_t i = 0; i < all.size(); i++)
    if (all[i].type == 2) symtab = static_cast<int>(i);
  uint32_t sym = kernel_symbol(good, name);
  auto message = [&](const Rela& r) {
    Result<CubinImage> img =
        load(add_section(good, ".rela.test", 4, symtab, text, 24, rela_bytes({r})), name);
    EXPECT_FALSE(img.ok());
    return img.ok() ? std::string("(loaded)") : img.status().message();
  };
  EXPECT_EQ(message({0x10, sym, 0x3, 0}),
            "cubin: .rela.test entry 0: unknown relocation type 0x3 at .text." + name +
                "+0x10 (known: R_CUDA_64, R_CUDA_ABS32_LO_32, R_CUDA_ABS32_HI_32)");
  EXPECT_EQ(message({0x10, 0, R_CUDA_64, 0}),
            "cubin: .rela.test entry 0: R_CUDA_64 against undefined symbol ''");
  char off[32], size[32];
  std::snprintf(off, sizeof(off), "0x%llx", static_cast<unsigned long long>(all[text].size - 4));
  std::snprintf(size, sizeof(size), "0x%llx", static_cast<unsigned long long>(all[text].size));
  EXPECT_EQ(message({all[text].size - 4, sym, R_CUDA_ABS32_HI_32, 0}),
            std::string("cubin: .rela.test entry 0: R_CUDA_ABS32_HI_32 at ") + off +
                " lies outside .text." + name + " (" + size + " bytes)");
  EXPECT_EQ(message({0x10, 100000, R_CUDA_64, 0}),
            "cubin: .rela.test entry 0: symbol index 100000 is outside .symtab");
}

// Every prefix of a cubin, and cubins with bytes of the header, section table and attribute
// sections overwritten at random, load or are refused: never a crash or an out-of-bounds read.
TEST(NvCubin, TruncatedAndCorruptedCubinsNeverCrash) {
  REQUIRE_PTXAS();
  const NvKernel& k = compiled(90);
  std::vector<uint8_t> good = bytes_of(k.cubin);
  uint64_t table_end = get<uint64_t>(good, 0x28) + get<uint16_t>(good, 0x3c) * uint64_t{64};
  for (size_t n = 0; n < good.size(); n++) {
    std::vector<uint8_t> cut(good.begin(), good.begin() + static_cast<ptrdiff_t>(n));
    Result<CubinImage> r = load(cut, k.spec.name);
    if (n < table_end) {
      ASSERT_FALSE(r.ok()) << "prefix of " << n << " bytes loaded";
    }
  }
  std::vector<size_t> targets;
  for (size_t i = 0; i < 64; i++) targets.push_back(i);
  for (size_t i = get<uint64_t>(good, 0x28); i < table_end; i++) targets.push_back(i);
  for (const Section& s : sections(good))
    if (s.name.starts_with(".nv.info") || s.name == ".symtab")
      for (size_t i = s.offset; i < s.offset + s.size; i++) targets.push_back(i);
  std::mt19937_64 rng(42);
  int refused = 0;
  for (int iter = 0; iter < 3000; iter++) {
    std::vector<uint8_t> e = good;
    for (int j = 0; j < 1 + iter % 4; j++)
      e[targets[rng() % targets.size()]] = static_cast<uint8_t>(rng());
    refused += !load(e, k.spec.name).ok();
  }
  EXPECT_GT(refused, 0);
}

}  // namespace
}  // namespace baregrad::nv
