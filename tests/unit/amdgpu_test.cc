// The AMD compile path (GPU lowering -> LLVM AMDGPU -> relocatable object -> ld.lld -> HSA code
// object) for gfx90a, gfx942, gfx1100 and gfx1201, and the code-object loader: every kernel of
// the GPU case list links, and the kernel descriptor the loader reads agrees with the metadata
// LLVM writes into the code object's note (read back by llvm-readelf, an independent decoder);
// the loader refuses malformed code objects by name and never reads out of bounds.
// Skipped (saying why) when there is no ld.lld or llvm-readelf (Debian's lld-19 and llvm-19).
#include <gtest/gtest.h>
#include <unistd.h>

#include <map>
#include <memory>
#include <random>
#include <sstream>

#include "base/options.h"
#include "compiler/codegen/pipeline.h"
#include "compiler/render/llvm_ir.h"
#include "compiler/target/amd_target.h"
#include "compiler/target/subprocess.h"
#include "drivers/amd/code_object.h"
#include "tests/unit/gpu_cases.h"

namespace baregrad::compiler {
namespace {

using namespace gpu_cases;  // NOLINT: the shared case list and its helpers

constexpr const char* kReadelf = "/usr/lib/llvm-19/bin/llvm-readelf";

#define REQUIRE_AMD_TOOLS()                                                                   \
  do {                                                                                        \
    Result<LdLld> l = LdLld::find();                                                          \
    if (!l.ok()) GTEST_SKIP() << "AMD compile tests need ld.lld: " << l.status().message();   \
    if (::access(kReadelf, X_OK) != 0) GTEST_SKIP() << "AMD compile tests need " << kReadelf; \
  } while (0)

AmdTarget& amd(const std::string& gfx) {
  static auto* targets = new std::map<std::string, std::unique_ptr<AmdTarget>>();
  auto it = targets->find(gfx);
  if (it == targets->end()) {
    Result<std::unique_ptr<AmdTarget>> t = AmdTarget::create(gfx);
    CHECK(t.ok()) << t.status().to_string();
    it = targets->emplace(gfx, std::move(*t)).first;
  }
  return *it->second;
}

std::span<const uint8_t> bytes(const std::string& s) {
  return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
}

// The kernel's entry in the code object's NT_AMDGPU_METADATA note, as llvm-readelf prints it
// (YAML): every `.key: value` of the kernel map, and the arguments' offsets in order.
struct Metadata {
  std::map<std::string, std::string> fields;
  std::vector<int64_t> arg_offsets;
  int64_t num(const std::string& key) const {
    auto it = fields.find(key);
    return it == fields.end() ? -1 : std::stoll(it->second);
  }
};

Metadata readelf_notes(const std::string& code) {
  Metadata m;
  Result<TempDir> dir = TempDir::create("baregrad-amd-test");
  CHECK(dir.ok());
  std::string path = dir->file("k.hsaco");
  CHECK(write_file(path, code).ok());
  std::string out;
  Result<int> rc = run_subprocess({kReadelf, "--notes", path}, &out, 60000);
  CHECK(rc.ok() && *rc == 0) << out;
  std::istringstream lines(out);
  std::string line;
  bool in_args = false;
  while (std::getline(lines, line)) {
    size_t key = line.find_first_not_of(" -");
    if (key == std::string::npos || line[key] != '.') continue;
    size_t colon = line.find(':', key);
    std::string k = line.substr(key, colon - key), v;
    if (colon != std::string::npos && colon + 1 < line.size())
      v = line.substr(line.find_first_not_of(' ', colon + 1));
    if (k == ".args")
      in_args = true;
    else if (in_args && k == ".offset")
      m.arg_offsets.push_back(std::stoll(v));
    else if (line[0] == ' ' && line.find("  - ") != 0 && line.find("    .") == 0 &&
             k != ".offset" && k != ".size" && k != ".name" && k != ".address_space" &&
             k != ".value_kind")
      in_args = false;
    if (!in_args || k == ".args") m.fields.emplace(k, v);
  }
  return m;
}

TEST(Amdgpu, EveryKernelLinksForEveryTargetAndItsDescriptorAgreesWithLlvmMetadata) {
  REQUIRE_AMD_TOOLS();
  for (const Case& c : cases()) {
    for (const std::string& gfx : amd_gfx_targets()) {
      SCOPED_TRACE(c.what + " " + gfx);
      Result<CompiledKernel> k = amd(gfx).compile(c.ast);
      ASSERT_TRUE(k.ok()) << k.status().to_string();
      const std::string& name = k->spec.name;
      EXPECT_EQ(k->binary.format, BinaryFormat::kAmdHsa);
      EXPECT_EQ(k->binary.arch, gfx);
      Result<amd::CodeObject> co = amd::load_code_object(bytes(k->binary.code), name);
      ASSERT_TRUE(co.ok()) << co.status().to_string();
      EXPECT_EQ(co->gfx, gfx);
      Metadata md = readelf_notes(k->binary.code);
      EXPECT_EQ(md.fields[".name"], name);
      EXPECT_EQ(md.fields[".symbol"], name + ".kd");
      const amd::KernelDescriptor& d = co->descriptor;
      EXPECT_EQ(d.group_segment_fixed_size, md.num(".group_segment_fixed_size"));
      EXPECT_EQ(d.private_segment_fixed_size, md.num(".private_segment_fixed_size"));
      EXPECT_EQ(d.kernarg_size, md.num(".kernarg_segment_size"));
      EXPECT_EQ(co->wave32 ? 32 : 64, md.num(".wavefront_size"));
      EXPECT_EQ(co->wave32 ? 32 : 64, amd_wave_size(gfx));
      // The allocated VGPRs cover what LLVM counts (AGPRs included), by less than a granule.
      int64_t used = md.num(".vgpr_count") + std::max<int64_t>(0, md.num(".agpr_count"));
      int granule = gfx.starts_with("gfx9") || co->wave32 ? 8 : 4;
      EXPECT_GE(co->vgprs, used);
      EXPECT_LT(co->vgprs - granule, std::max<int64_t>(used, 1));
      // The kernarg segment is the parameter area of the NVIDIA kernels: 8 bytes per buffer
      // slot, then per var, and nothing hidden.
      int64_t params = 8 * (k->binary.num_bufs + static_cast<int64_t>(k->spec.vars.size()));
      EXPECT_EQ(d.kernarg_size, params);
      ASSERT_EQ(md.arg_offsets.size(), static_cast<size_t>(params / 8));
      for (size_t i = 0; i < md.arg_offsets.size(); i++)
        EXPECT_EQ(md.arg_offsets[i], 8 * int64_t(i));
      EXPECT_EQ(md.num(".max_flat_workgroup_size"),
                int64_t{k->binary.block[0]} * k->binary.block[1] * k->binary.block[2]);
      EXPECT_TRUE(d.kernel_code_properties &
                  amd::KERNEL_CODE_PROPERTY_ENABLE_SGPR_KERNARG_SEGMENT_PTR);
      EXPECT_FALSE(d.kernel_code_properties & amd::KERNEL_CODE_PROPERTY_ENABLE_SGPR_DISPATCH_PTR);
      EXPECT_EQ(co->code_offset % 256, 0u);
      EXPECT_EQ(co->descriptor_offset % 64, 0u);
      EXPECT_TRUE(co->relocs.empty());
    }
  }
}

TEST(Amdgpu, GroupReductionsUseWaveExchangesLdsAndABarrier) {
  REQUIRE_AMD_TOOLS();
  // A sum over 4096 elements into one: GROUP and the wave butterfly (TargetInfo::warp_size).
  auto a = global(0, kF32), o = global(1, kF32);
  UOpPtr ast = sink({store(o, strided({1}, {0}),
                           reduce_axis(Op::ADD, {0}, load(a, ShapeTracker::contiguous({4096}))))});
  for (const std::string& gfx : amd_gfx_targets()) {
    SCOPED_TRACE(gfx);
    Result<CompiledKernel> k = amd(gfx).compile(ast);
    ASSERT_TRUE(k.ok()) << k.status().to_string();
    Result<std::string> s = amd(gfx).listing(*k);
    ASSERT_TRUE(s.ok()) << s.status().to_string();
    EXPECT_GT(count(*s, "ds_bpermute_b32"), 0) << *s;
    EXPECT_GT(count(*s, "s_barrier"), 0) << *s;
    Result<amd::CodeObject> co = amd::load_code_object(bytes(k->binary.code), k->spec.name);
    ASSERT_TRUE(co.ok()) << co.status().to_string();
    EXPECT_GT(co->descriptor.group_segment_fixed_size, 0u);
  }
}

// The register-tiled matmul with shared operand tiles (LOCAL 8 x 16, STAGE): its tiles in LDS,
// barriers, 16-byte global loads, and no scratch (nothing spilled).
TEST(Amdgpu, LargeMatmulsGetLdsOperandTilesWithoutScratch) {
  REQUIRE_AMD_TOOLS();
  auto la = load(global(0, kF32), strided({1024, 512, 24}, {24, 0, 1})),
       lb = load(global(1, kF32), strided({1024, 512, 24}, {0, 1, 512}));
  UOpPtr ast = sink({store(global(2, kF32), strided({1024, 512, 1}, {512, 1, 0}),
                           reduce_axis(Op::ADD, {2}, la * lb))});
  for (const std::string& gfx : amd_gfx_targets()) {
    SCOPED_TRACE(gfx);
    Result<CompiledKernel> k = amd(gfx).compile(ast);
    ASSERT_TRUE(k.ok()) << k.status().to_string();
    EXPECT_EQ(k->binary.grid, (std::array<uint32_t, 3>{8, 32, 1}));
    EXPECT_EQ(k->binary.block, (std::array<uint32_t, 3>{16, 8, 1}));
    Result<amd::CodeObject> co = amd::load_code_object(bytes(k->binary.code), k->spec.name);
    ASSERT_TRUE(co.ok()) << co.status().to_string();
    EXPECT_EQ(co->descriptor.group_segment_fixed_size, (32 * 8 + 8 * 64) * 4u);
    EXPECT_EQ(co->descriptor.private_segment_fixed_size, 0u);
    Result<std::string> s = amd(gfx).listing(*k);
    ASSERT_TRUE(s.ok()) << s.status().to_string();
    EXPECT_GE(count(*s, "s_barrier"), 2) << *s;  // LLVM unrolls the 3 steps: 2 each
    EXPECT_GE(count(*s, "global_load_dwordx4") + count(*s, "global_load_b128"), 1) << *s;
  }
}

TEST(Amdgpu, KernelIrIsAnAmdgpuKernelOverGlobalPointersReadingWorkItemIds) {
  Case c = cases()[0];
  ProgramSpec spec = lower_kernel(c.ast, amd_target_info("gfx1100"));
  std::string ir = LlvmIrRenderer(LlvmAbi::kAmdgpu).render(spec);
  EXPECT_NE(ir.find("define amdgpu_kernel void @" + spec.name + "(ptr addrspace(1) noalias %p0"),
            std::string::npos)
      << ir;
  EXPECT_NE(ir.find("@llvm.amdgcn.workgroup.id.x()"), std::string::npos) << ir;
  EXPECT_NE(ir.find("@llvm.amdgcn.workitem.id.x()"), std::string::npos) << ir;
  EXPECT_NE(ir.find("\"amdgpu-no-implicitarg-ptr\""), std::string::npos) << ir;
  EXPECT_NE(ir.find("\"amdgpu-flat-work-group-size\"=\"1,"), std::string::npos) << ir;
}

// A module with a pointer to a global in a global: for a hidden global, ld.lld -shared writes
// an R_AMDGPU_RELATIVE64, which relocate() resolves against the image's base; for a preemptible
// one an R_AMDGPU_ABS64 against the symbol, which the loader refuses by name.
Result<std::string> link_table_module(const std::string& linkage) {
  const std::string ir = "@table = " + linkage +
                         " addrspace(1) global [4 x i32] [i32 1, i32 2, i32 3, i32 4], align 16\n"
                         "@ptr = " +
                         linkage +
                         " addrspace(1) global ptr addrspace(1) @table, align 8\n"
                         "define amdgpu_kernel void @k(ptr addrspace(1) %out) {\n"
                         "  %p = load ptr addrspace(1), ptr addrspace(1) @ptr, align 8\n"
                         "  %v = load i32, ptr addrspace(1) %p, align 4\n"
                         "  store i32 %v, ptr addrspace(1) %out, align 4\n"
                         "  ret void\n}\n";
  LlvmCompiler llvm("amdgcn-amd-amdhsa", "gfx1100", "+wavefrontsize32");
  ASSIGN_OR_RETURN(std::string obj, llvm.compile(ir, "k"));
  ASSIGN_OR_RETURN(LdLld lld, LdLld::find());
  return lld.link(obj, "k");
}

TEST(AmdCodeObject, RelativeRelocationsAreAppliedAtTheImageBase) {
  REQUIRE_AMD_TOOLS();
  Result<std::string> code = link_table_module("hidden");
  ASSERT_TRUE(code.ok()) << code.status().to_string();
  Result<amd::CodeObject> co = amd::load_code_object(bytes(*code), "k");
  ASSERT_TRUE(co.ok()) << co.status().to_string();
  ASSERT_EQ(co->relocs.size(), 1u);
  const amd::CodeObjectReloc r = co->relocs[0];
  uint32_t first;
  std::memcpy(&first, co->image.data() + r.addend, 4);
  EXPECT_EQ(first, 1u);  // the addend is @table's address in the image
  ASSERT_TRUE(amd::relocate(*co, 0x7f0000000000).ok());
  uint64_t patched;
  std::memcpy(&patched, co->image.data() + r.offset, 8);
  EXPECT_EQ(patched, 0x7f0000000000u + static_cast<uint64_t>(r.addend));

  code = link_table_module("");
  ASSERT_TRUE(code.ok()) << code.status().to_string();
  co = amd::load_code_object(bytes(*code), "k");
  ASSERT_FALSE(co.ok());
  EXPECT_EQ(co.status().message(),
            "amdhsa: .rela.dyn entry 0: relocation type 3 is not applied (known: "
            "R_AMDGPU_RELATIVE64)");
}

// The loader's refusals, each naming what is wrong.
TEST(AmdCodeObject, MalformedCodeObjectsAreRefusedByName) {
  REQUIRE_AMD_TOOLS();
  Result<CompiledKernel> k = amd("gfx1100").compile(cases()[0].ast);
  ASSERT_TRUE(k.ok()) << k.status().to_string();
  const std::string& name = k->spec.name;
  std::vector<uint8_t> good(k->binary.code.begin(), k->binary.code.end());
  auto message = [&](const std::vector<uint8_t>& elf, const std::string& kernel) {
    Result<amd::CodeObject> r = amd::load_code_object(elf, kernel);
    EXPECT_FALSE(r.ok());
    if (!r.ok()) {
      EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    }
    return r.ok() ? std::string("(loaded)") : r.status().message();
  };
  EXPECT_EQ(message(good, "nope"), "amdhsa: no kernel 'nope' (nope.kd missing); kernels: " + name);
  EXPECT_EQ(message({good.begin(), good.begin() + 10}, name),
            "amdhsa: truncated: 10 bytes, an ELF64 header needs 64");
  std::vector<uint8_t> e = good;
  e[0x12] = 190;  // e_machine: EM_CUDA
  EXPECT_EQ(message(e, name), "amdhsa: e_machine 190 is not EM_AMDGPU (224)");
  e = good;
  e[7] = 0;  // EI_OSABI: System V
  EXPECT_EQ(message(e, name),
            "amdhsa: OS ABI 0 is not ELFOSABI_AMDGPU_HSA (64): not an HSA code object");
  e = good;
  e[0x10] = 1;  // e_type: ET_REL
  EXPECT_EQ(message(e, name),
            "amdhsa: e_type 1 is not ET_DYN (3): a relocatable object must be "
            "linked (ld.lld -shared) first");
  // A corrupt descriptor: a reserved byte, then an entry outside the code.
  Result<amd::CodeObject> co = amd::load_code_object(good, name);
  ASSERT_TRUE(co.ok());
  // The descriptor's file offset: .rodata's address equals its offset in ld.lld's layout here.
  size_t kd = co->descriptor_offset;
  ASSERT_EQ(std::memcmp(good.data() + kd, &co->descriptor, 64), 0);
  e = good;
  e[kd + 12] = 1;  // reserved0
  EXPECT_EQ(message(e, name), "amdhsa: " + name +
                                  ".kd has non-zero reserved bytes (a corrupt "
                                  "descriptor)");
  e = good;
  int64_t off = 8;
  std::memcpy(e.data() + kd + 16, &off, 8);
  EXPECT_EQ(message(e, name), "amdhsa: " + name +
                                  ".kd's kernel_code_entry_byte_offset 8 puts the "
                                  "entry at " +
                                  std::to_string(kd + 8) +
                                  ", not a 256-byte aligned address in executable code");
}

// Every prefix of a code object, and code objects with bytes overwritten at random, load or
// are refused: never a crash or an out-of-bounds read (ASan checks the loader in CI).
TEST(AmdCodeObject, TruncatedAndCorruptedCodeObjectsNeverCrash) {
  REQUIRE_AMD_TOOLS();
  Result<CompiledKernel> k = amd("gfx942").compile(cases()[3].ast);
  ASSERT_TRUE(k.ok()) << k.status().to_string();
  const std::string& name = k->spec.name;
  std::vector<uint8_t> good(k->binary.code.begin(), k->binary.code.end());
  for (size_t n = 0; n < good.size(); n += 7) {
    Result<amd::CodeObject> r = amd::load_code_object({good.data(), n}, name);
    EXPECT_FALSE(r.ok() && n < 64) << n;
  }
  std::mt19937 rng(42);
  int loaded = 0;
  for (int trial = 0; trial < 3000; trial++) {
    std::vector<uint8_t> e = good;
    for (int i = 0; i < 4; i++) e[rng() % e.size()] = static_cast<uint8_t>(rng());
    Result<amd::CodeObject> r = amd::load_code_object(e, name);
    if (r.ok()) {
      loaded++;
      EXPECT_LE(r->code_offset + 4, r->image.size());
      EXPECT_TRUE(amd::relocate(*r, 0x1000).ok());
    }
  }
  EXPECT_GT(loaded, 0);  // most single-byte corruptions hit bytes the loader does not read
}

TEST(Amdgpu, UnsupportedTargetsAndAMissingLinkerAreRefusedByName) {
  Result<std::unique_ptr<AmdTarget>> t = AmdTarget::create("gfx1030");
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().message(),
            "amd: gfx1030 is not a supported target (gfx90a, gfx942, gfx1100, gfx1201 are)");
  std::string saved = option_value("LD_LLD");
  set_option_for_test("LD_LLD", "/nonexistent/ld.lld");
  Result<LdLld> l = LdLld::find();
  set_option_for_test("LD_LLD", saved);
  ASSERT_FALSE(l.ok());
  EXPECT_EQ(l.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(l.status().message(),
            "ld.lld not found (tried /nonexistent/ld.lld (LD_LLD)); AMD code objects need it: "
            "install Debian's lld-19 or set LD_LLD");
}

}  // namespace
}  // namespace baregrad::compiler
