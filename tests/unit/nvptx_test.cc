// The NVIDIA compile path (GPU lowering -> LLVM NVPTX -> PTX -> ptxas -> cubin) and the host
// twin, for sm_80, sm_90 and sm_120: ptxas accepts every kernel, the PTX states its target and
// entry, the cubin agrees with ptxas' own report and with the parameter layout, and the twin run
// on host memory with a hand-built parameter area matches the float64 reference.
// Skipped (saying why) when there is no ptxas; /usr/local/cuda/bin/ptxas is where CI has it.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <random>

#include "base/options.h"
#include "compiler/ast.h"
#include "compiler/codegen/pipeline.h"
#include "compiler/opt/kernel.h"
#include "compiler/render/llvm_ir.h"
#include "drivers/cpu/iface_host.h"
#include "drivers/mock/twin/twin_runner.h"
#include "drivers/nv/cubin.h"
#include "runtime/device.h"
#include "tests/kernels/reference.h"
#include "tests/unit/gpu_cases.h"
#include "tests/unit/nv_target_rig.h"

namespace baregrad::compiler {
namespace {

using namespace gpu_cases;  // NOLINT: the shared case list and its helpers

constexpr int kArchs[] = {80, 90, 120};

#define REQUIRE_PTXAS()                                                                   \
  do {                                                                                    \
    Result<Ptxas> p = Ptxas::find();                                                      \
    if (!p.ok()) GTEST_SKIP() << "NV compile tests need ptxas: " << p.status().message(); \
  } while (0)

// Runs `k`'s twin on host copies of `data` with `vars`; returns every buffer afterwards.
std::vector<std::vector<double>> run_twin(const NvKernel& k,
                                          const Case& c,
                                          std::array<uint32_t, 3> grid,
                                          size_t pad_elements = 0) {
  static cpu::ObjectLoader* loader = new cpu::ObjectLoader();
  Result<cpu::LoadedKernel> loaded = loader->load(k.twin_object, k.twin_symbol);
  EXPECT_TRUE(loaded.ok()) << loaded.status().to_string();
  if (!loaded.ok()) return {};
  cpu::KernelFn fn = loaded->fn;
  std::vector<std::vector<uint8_t>> mem;
  for (size_t s = 0; s < c.types.size(); s++) {
    mem.push_back(encode(c.types[s], c.data[s]));
    mem.back().resize(mem.back().size() + pad_elements * c.types[s].itemsize(), 0xab);
  }
  std::vector<uint8_t> params(k.params.size + 3, 0);  // + 3: the twin reads any alignment
  uint8_t* p = params.data() + 3;
  for (size_t s = 0; s < mem.size(); s++) {
    uint64_t addr = reinterpret_cast<uint64_t>(mem[s].data());
    std::memcpy(p + k.params.buffer_offsets[s], &addr, 8);
  }
  for (size_t i = 0; i < k.spec.vars.size(); i++) {
    int64_t v = 0;
    for (auto& [node, value] : c.vars)
      if (node->arg_as<VarArg>().name == k.spec.vars[i].name) v = value;
    std::memcpy(p + k.params.var_offsets[i], &v, 8);
  }
  mock::run_twin(reinterpret_cast<void (*)()>(fn), twin_is_per_thread(k.spec),
                 twin_shared_bytes(k.spec), p, grid.data(), k.block.data());
  std::vector<std::vector<double>> out;
  for (size_t s = 0; s < mem.size(); s++) out.push_back(decode(c.types[s], mem[s]));
  return out;
}

// The float64 reference with every var replaced by its value.
std::vector<std::vector<double>> reference(const Case& c) {
  std::vector<std::pair<UOpPtr, UOpPtr>> repl;
  for (auto& [node, value] : c.vars) repl.push_back({node, UOp::index_const(value)});
  std::vector<std::vector<double>> want = c.data;
  testing::reference_run(repl.empty() ? c.ast : c.ast->substitute(repl), want);
  return want;
}

// SPEC=1 (the IR verifier between passes) for the scope.
struct ScopedSpec {
  std::string saved = option_value("SPEC");
  ScopedSpec() { set_option_for_test("SPEC", "1"); }
  ~ScopedSpec() { set_option_for_test("SPEC", saved); }
};

void expect_close(const std::vector<std::vector<double>>& got,
                  const std::vector<std::vector<double>>& want,
                  double rtol,
                  const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t b = 0; b < want.size(); b++)
    for (size_t i = 0; i < want[b].size(); i++)
      ASSERT_NEAR(got[b][i], want[b][i], rtol * std::max(1.0, std::fabs(want[b][i])))
          << what << ": buffer " << b << " element " << i;
}

TEST(Nvptx, EveryKernelAssemblesForEveryArchAndItsCubinAgreesWithPtxas) {
  REQUIRE_PTXAS();
  ScopedSpec spec;
  for (const Case& c : cases()) {
    for (int sm : kArchs) {
      SCOPED_TRACE(c.what + " sm_" + std::to_string(sm));
      Result<NvKernel> k = compile_nv(nv(sm), c.ast);
      ASSERT_TRUE(k.ok()) << k.status().to_string();
      const std::string& name = k->spec.name;
      EXPECT_NE(k->ptx.find("\n.target sm_" + std::to_string(sm) + "\n"), std::string::npos)
          << k->ptx;
      EXPECT_NE(k->ptx.find(".visible .entry " + name + "("), std::string::npos) << k->ptx;
      ASSERT_GT(k->ptxas.registers, 0) << k->ptxas_log;
      EXPECT_EQ(k->ptxas.spill_store_bytes, 0) << k->ptxas_log;
      auto img = nv::load_cubin(
          std::span(reinterpret_cast<const uint8_t*>(k->cubin.data()), k->cubin.size()), name);
      ASSERT_TRUE(img.ok()) << img.status().to_string();
      EXPECT_EQ(img->sm, sm);
      EXPECT_EQ(img->registers, k->ptxas.registers) << k->ptxas_log;
      EXPECT_EQ(img->local_bytes, k->ptxas.stack_bytes) << k->ptxas_log;
      // The cubin's shared section is what a block needs; with shared memory in use, sm_90 and
      // sm_120 cubins hold 1 KiB more than ptxas reports (seen: 1536 bytes for ptxas' 512 of a
      // GROUP kernel; sm_80: 512), the block's reserved shared memory.
      if (k->ptxas.shared_bytes == 0)
        EXPECT_EQ(img->shared_bytes, 0);
      else
        EXPECT_GE(img->shared_bytes, k->ptxas.shared_bytes);
      EXPECT_EQ(img->param_size, k->params.size);
      EXPECT_EQ(img->cbank0_size, img->param_offset + img->param_size);
      // Every kernel parameter lies where the layout (and so the twin) expects it.
      std::vector<uint32_t> want = k->params.buffer_offsets;
      want.insert(want.end(), k->params.var_offsets.begin(), k->params.var_offsets.end());
      ASSERT_EQ(img->params.size(), want.size());
      for (size_t i = 0; i < want.size(); i++) {
        EXPECT_EQ(img->params[i].ordinal, i);
        EXPECT_EQ(img->params[i].offset, want[i]);
        EXPECT_EQ(img->params[i].size, 8u);
      }
    }
  }
}

TEST(Nvptx, TwinMatchesTheFloat64Reference) {
  REQUIRE_PTXAS();
  for (const Case& c : cases()) {
    std::vector<std::vector<double>> want = reference(c);
    for (int sm : kArchs) {
      Result<NvKernel> k = compile_nv(nv(sm), c.ast);
      ASSERT_TRUE(k.ok()) << k.status().to_string();
      expect_close(run_twin(*k, c, k->grid), want, c.rtol, c.what + " sm_" + std::to_string(sm));
    }
  }
}

// Explicit opts still lower to one thread per (remaining) output element: vector lanes, unrolled
// reductions, LOCAL axes (flattened with the GLOBAL ones) and K-blocking loops inside a thread.
// The IR verifier runs between passes.
TEST(Nvptx, ExplicitOptsMatchTheReference) {
  REQUIRE_PTXAS();
  ScopedSpec spec;
  Case c = cases()[5];
  ASSERT_EQ(c.what, "matmul");
  auto a = global(0, kF32), b = global(1, kF32), o = global(2, kF32);
  auto la = load(a, strided({16, 32, 64}, {64, 0, 1})),
       lb = load(b, strided({16, 32, 64}, {0, 1, 32}));
  c.ast = sink({store(o, strided({16, 32, 1}, {32, 1, 0}), reduce_axis(Op::ADD, {2}, la * lb))});
  c.data = {random(16 * 64, kF32, 20), random(64 * 32, kF32, 21), std::vector<double>(16 * 32, 5)};
  std::vector<std::vector<double>> want = reference(c);
  for (const auto& opts : std::vector<std::vector<Opt>>{
           {{OptOp::kUpcast, 1, 4}},
           {{OptOp::kUnroll, 2, 4}, {OptOp::kLocal, 1, 8}},
           {{OptOp::kSplitReduce, 2, 4}},
       }) {
    Result<NvKernel> k = compile_nv(nv(90), c.ast, opts);
    ASSERT_TRUE(k.ok()) << k.status().to_string();
    expect_close(run_twin(*k, c, k->grid), want, 1e-5, k->spec.name);
  }
}

TEST(Nvptx, LaunchDimsAreOneThreadPerOutputElementInBlocksOfUpTo128) {
  REQUIRE_PTXAS();
  std::map<std::string, std::pair<uint32_t, uint32_t>> want = {
      {"add_broadcast", {16, 128}},                          // 1961 elements
      {"scale_4096", {32, 128}},    {"sum_axis0", {1, 32}},  // 17 outputs
      {"sum_axis1", {1, 64}},                                // 33 outputs
      {"max_all", {1, 128}},  // one output of 3072: a work-group of 128 (GROUP)
      {"matmul", {1, 128}},   // 91 outputs
  };
  for (const Case& c : cases()) {
    if (!want.count(c.what)) continue;
    Result<NvKernel> k = compile_nv(nv(90), c.ast);
    ASSERT_TRUE(k.ok()) << k.status().to_string();
    EXPECT_EQ(k->grid, (std::array<uint32_t, 3>{want[c.what].first, 1, 1})) << c.what;
    EXPECT_EQ(k->block, (std::array<uint32_t, 3>{want[c.what].second, 1, 1})) << c.what;
    EXPECT_EQ(k->spec.global_size[0], want[c.what].first);
    EXPECT_EQ(k->spec.local_size[0], want[c.what].second);
  }
}

// GROUP in PTX: each warp first combines its 32 partials by butterfly exchanges (shfl.sync.bfly
// with lane masks 16, 8, 4, 2, 1), then the warps' totals go through a .shared array (one entry
// per warp) and bar.sync; ptxas reports that shared memory and the barrier. A GROUP of 32 is
// one warp: exchanges only, one shared entry; a GROUP of 8 names its 8 lanes (mask 255) in the
// exchanges. fp16 partials (not 32 bits) skip the exchanges.
// (The kernel suite runs the same programs' host twins on MOCK+NV, with work-group semantics
// and the exchanges emulated, against the float64 reference.)
TEST(Nvptx, GroupReductionsUseWarpExchangesSharedMemoryAndABarrier) {
  REQUIRE_PTXAS();
  ScopedSpec spec;
  auto row_sum = [](DType t) {
    auto red = reduce_axis(Op::ADD, {1}, load(global(1, t), ShapeTracker::contiguous({64, 4096})));
    return sink({store(global(0, t), strided({64, 1}, {1, 0}), red)});
  };
  struct Want {
    DType t;
    int group, exchanges, shared_bytes;
    std::string members;  // the lanes named: the whole warp, or a block smaller than one
  };
  for (Want w : {Want{kF32, 128, 5, 4 * 4, ", -1;"}, Want{kI32, 32, 5, 4, ", -1;"},
                 Want{kF32, 8, 3, 4, ", 255;"}, Want{dtypes::kFloat16, 64, 0, 64 * 2, ""}})
    for (int sm : kArchs) {
      SCOPED_TRACE("sm_" + std::to_string(sm) + " " + w.t.name() + " GROUP " +
                   std::to_string(w.group));
      NvTarget& t = nv(sm);
      TargetInfo info = t.info();
      EXPECT_TRUE(info.has_local);
      EXPECT_EQ(info.warp_size, 32);
      ProgramSpec p =
          lower_kernel(row_sum(w.t), info, std::vector<Opt>{{OptOp::kGroup, 1, w.group}});
      Result<CompiledKernel> k = t.compile(p);
      ASSERT_TRUE(k.ok()) << k.status().to_string();
      EXPECT_EQ(k->binary.grid, (std::array<uint32_t, 3>{64, 1, 1}));
      EXPECT_EQ(k->binary.block, (std::array<uint32_t, 3>{static_cast<uint32_t>(w.group), 1, 1}));
      Result<std::string> ptx = t.listing(*k);
      ASSERT_TRUE(ptx.ok()) << ptx.status().to_string();
      EXPECT_EQ(count(*ptx, "shfl.sync.bfly.b32"), w.exchanges) << *ptx;
      if (w.exchanges) {
        size_t at = ptx->find("shfl.sync.bfly.b32");
        EXPECT_EQ(ptx->substr(ptx->find('\n', at) - w.members.size(), w.members.size()), w.members)
            << *ptx;
      }
      EXPECT_NE(ptx->find(".shared .align 16 ."), std::string::npos) << *ptx;
      EXPECT_NE(ptx->find("bar.sync \t0;"), std::string::npos) << *ptx;
      Result<PtxasResult> r = t.ptxas().assemble(*ptx, sm, p.name);
      ASSERT_TRUE(r.ok()) << r.status().to_string();
      EXPECT_EQ(r->report.shared_bytes, w.shared_bytes) << r->log;
      EXPECT_EQ(r->report.barriers, 1) << r->log;
    }
}

// A matmul large enough to keep 32768 threads busy gets a 4 x 4 register tile per thread (the
// column tile as vector lanes, the row tile as copies) and shared-memory operand tiles: work-
// groups of 16 x 8 threads (a 64 x 32 block of outputs) that copy 8 reduction steps of both
// operands into shared memory per iteration, behind barriers; fp32 and bf16 alike. A small
// one stays at one thread per output. In the PTX: .shared arrays of both tiles, bar.sync, the
// copies as 16-byte loads and stores, the column tile read from shared memory as 16-byte
// vectors. The cubins match float64.
TEST(Nvptx, LargeMatmulsGetRegisterTilesAndSharedMemoryOperandTiles) {
  REQUIRE_PTXAS();
  ScopedSpec spec;
  auto matmul = [](DType in, int64_t m, int64_t n, int64_t k) {
    auto la = cast(load(global(0, in), strided({m, n, k}, {k, 0, 1})), kF32),
         lb = cast(load(global(1, in), strided({m, n, k}, {0, 1, n})), kF32);
    return sink({store(global(2, kF32), strided({m, n, 1}, {n, 1, 0}),
                       reduce_axis(Op::ADD, {2}, la * lb))});
  };
  EXPECT_TRUE(
      hand_coded_optimizations(Kernel(matmul(kF32, 64, 64, 48)), nv_target_info(90)).empty());
  for (DType in : {kF32, kBF16}) {
    SCOPED_TRACE(in.name());
    Case c = make(
        "tiled", matmul(in, 1024, 512, 24), {in, in, kF32},
        {decode(in, encode(in, random(1024 * 24, kF32, 30))),
         decode(in, encode(in, random(24 * 512, kF32, 31))), std::vector<double>(1024 * 512, 3)},
        1e-5);
    std::vector<Opt> want_opts{{OptOp::kUpcast, 1, 4},
                               {OptOp::kUpcast, 0, 4},
                               {OptOp::kLocal, 0, 8},
                               {OptOp::kLocal, 1, 16},
                               {OptOp::kStage, 4, 8}};
    EXPECT_EQ(hand_coded_optimizations(Kernel(c.ast), nv_target_info(90)), want_opts);
    Result<NvKernel> k = compile_nv(nv(90), c.ast);
    ASSERT_TRUE(k.ok()) << k.status().to_string();
    EXPECT_EQ(k->grid, (std::array<uint32_t, 3>{8, 32, 1}));  // 512 / 64, 1024 / 32
    EXPECT_EQ(k->block, (std::array<uint32_t, 3>{16, 8, 1}));
    EXPECT_EQ(k->ptxas.spill_store_bytes, 0) << k->ptxas_log;
    // A: 32 rows x 8 steps; B: 8 steps x 64 columns.
    EXPECT_EQ(k->ptxas.shared_bytes, (32 * 8 + 8 * 64) * in.itemsize()) << k->ptxas_log;
    EXPECT_EQ(k->ptxas.barriers, 1) << k->ptxas_log;  // barrier 0, used twice
    EXPECT_EQ(count(k->ptx, "bar.sync"), 2) << k->ptx;
    if (in == kF32) {  // the copies move 16 bytes per access, the B tile is read as vectors
      EXPECT_GE(count(k->ptx, "ld.global.nc.v4.f32"), 1) << k->ptx;
      EXPECT_GE(count(k->ptx, "st.shared.v4.f32"), 1) << k->ptx;
      EXPECT_GE(count(k->ptx, "ld.shared.v4.f32"), 1) << k->ptx;
    }
    expect_close(run_twin(*k, c, k->grid), reference(c), c.rtol, k->spec.name);
  }
}

// An elementwise kernel with enough elements gets 4 fp32 lanes per thread, and where the index
// is a proven multiple of 4 elements (buffers are 16-byte aligned: TargetInfo::buffer_align)
// the lanes move as one 16-byte access: ld.global(.nc).v4 / st.global.v4 on every arch. An operand
// read from one element further on has no such proof and is read lane by lane. Both cubins'
// twins match the float64 reference.
TEST(Nvptx, ElementwiseKernelsUseSixteenByteAccessesWhereAlignmentIsProven) {
  REQUIRE_PTXAS();
  ScopedSpec spec;
  constexpr int64_t n = int64_t{1} << 18;  // 65536 threads of 4 lanes
  auto add = [&](int64_t a_offset) {
    auto la = load(global(0, kF32), strided({n}, {1}, a_offset)),
         lb = load(global(1, kF32), ShapeTracker::contiguous({n}));
    return sink({store(global(2, kF32), ShapeTracker::contiguous({n}), la * lb + la)});
  };
  EXPECT_EQ(nv_target_info(90).buffer_align, 16);
  for (int64_t offset : {0, 1}) {
    SCOPED_TRACE("operand 0 at element offset " + std::to_string(offset));
    Case c = make("vector_add", add(offset), {kF32, kF32, kF32},
                  {random(n + 1, kF32, 40), random(n, kF32, 41), std::vector<double>(n)}, 1e-6);
    std::vector<Opt> want_opts{{OptOp::kUpcast, 0, 4}};
    EXPECT_EQ(hand_coded_optimizations(Kernel(c.ast), nv_target_info(90)), want_opts);
    for (int sm : kArchs) {
      SCOPED_TRACE("sm_" + std::to_string(sm));
      Result<NvKernel> k = compile_nv(nv(sm), c.ast);
      ASSERT_TRUE(k.ok()) << k.status().to_string();
      EXPECT_EQ(k->spec.buffer_align, 16);
      EXPECT_EQ(k->grid, (std::array<uint32_t, 3>{512, 1, 1}));  // n / 4 / 128
      const std::string& ptx = k->ptx;
      // Inputs the kernel only reads take the read-only path (ld.global.nc).
      auto loads = [&](const std::string& type) {
        return count(ptx, "ld.global." + type) + count(ptx, "ld.global.nc." + type);
      };
      EXPECT_EQ(loads("v4.f32"), offset == 0 ? 2 : 1) << ptx;
      EXPECT_EQ(count(ptx, "st.global.v4.f32"), 1) << ptx;
      if (offset == 1) {
        EXPECT_EQ(loads("f32"), 4) << ptx;
      }
      if (sm == 90) expect_close(run_twin(*k, c, k->grid), reference(c), c.rtol, k->spec.name);
    }
  }
}

// Threads past the last element do nothing: a grid one block too large leaves memory past the
// output untouched and the output right.
TEST(Nvptx, ThreadsPastTheEndAreMaskedOff) {
  REQUIRE_PTXAS();
  Case c = cases()[0];
  ASSERT_EQ(c.what, "add_broadcast");
  Result<NvKernel> k = compile_nv(nv(90), c.ast);
  ASSERT_TRUE(k.ok()) << k.status().to_string();
  std::vector<std::vector<double>> got = run_twin(*k, c, {k->grid[0] + 1, 1, 1}, 256);
  std::vector<std::vector<double>> want = reference(c);
  for (size_t b = 0; b < want.size(); b++) {
    double pad = decode(c.types[b], std::vector<uint8_t>(c.types[b].itemsize(), 0xab))[0];
    for (size_t i = want[b].size(); i < got[b].size(); i++)
      ASSERT_EQ(got[b][i], pad) << "buffer " << b << " was written past its end at " << i;
    got[b].resize(want[b].size());
  }
  expect_close(got, want, c.rtol, c.what);
}

TEST(Nvptx, VarsFollowTheBuffersInTheParameterArea) {
  REQUIRE_PTXAS();
  for (const Case& c : cases()) {
    if (c.what != "vars") continue;
    Result<NvKernel> k = compile_nv(nv(90), c.ast);
    ASSERT_TRUE(k.ok()) << k.status().to_string();
    EXPECT_EQ(k->params.buffer_offsets, (std::vector<uint32_t>{0, 8}));
    EXPECT_EQ(k->params.var_offsets, (std::vector<uint32_t>{16, 24}));
    EXPECT_EQ(k->params.size, 32u);
    ASSERT_EQ(k->spec.vars.size(), 2u);
    EXPECT_NE(k->ptx.find(".param .u64 " + k->spec.name + "_param_3"), std::string::npos) << k->ptx;
  }
}

// The same AST with the same vars on the CPU device gives the twin's bytes.
TEST(Nvptx, VarKernelTwinAgreesWithTheCpuDevice) {
  REQUIRE_PTXAS();
  Case c = cases()[7];
  ASSERT_EQ(c.what, "vars");
  Result<NvKernel> k = compile_nv(nv(90), c.ast);
  ASSERT_TRUE(k.ok()) << k.status().to_string();
  std::vector<std::vector<double>> twin = run_twin(*k, c, k->grid);
  auto dev = runtime::open_device("CPU");
  ASSERT_TRUE(dev.ok()) << dev.status().to_string();
  auto prg = (*dev)->compile(c.ast);
  ASSERT_TRUE(prg.ok()) << prg.status().to_string();
  std::vector<runtime::Buffer> bufs;
  for (size_t s = 0; s < c.data.size(); s++) {
    std::vector<uint8_t> bytes = encode(c.types[s], c.data[s]);
    bufs.push_back(*(*dev)->alloc(bytes.size()));
    ASSERT_TRUE((*dev)->copy_in(bufs.back(), bytes.data(), bytes.size()).ok());
  }
  std::vector<int64_t> vars;
  for (const VarArg& v : (*prg)->spec.vars)
    for (auto& [node, value] : c.vars)
      if (node->arg_as<VarArg>().name == v.name) vars.push_back(value);
  ASSERT_TRUE((*dev)->launch(**prg, bufs, vars).ok());
  std::vector<uint8_t> out(c.data[1].size() * 4);
  ASSERT_TRUE((*dev)->copy_out(out.data(), bufs[1], out.size()).ok());
  EXPECT_EQ(decode(kF32, out), twin[1]);
  for (auto& b : bufs) (*dev)->free(b);
}

TEST(Nvptx, KernelIrIsAPtxKernelOverGlobalPointersReadingSpecialRegisters) {
  ProgramSpec spec = lower_kernel(cases()[0].ast, nv_target_info(90));
  std::string ir = LlvmIrRenderer(LlvmAbi::kNvptx).render(spec);
  EXPECT_NE(ir.find("define ptx_kernel void @" + spec.name +
                    "(ptr addrspace(1) noalias %p0, ptr addrspace(1) noalias %p1, "
                    "ptr addrspace(1) noalias %p2)"),
            std::string::npos)
      << ir;
  EXPECT_NE(ir.find("call i32 @llvm.nvvm.read.ptx.sreg.ctaid.x()"), std::string::npos);
  EXPECT_NE(ir.find("call i32 @llvm.nvvm.read.ptx.sreg.tid.x()"), std::string::npos);
  std::string twin = LlvmIrRenderer(LlvmAbi::kHostTwin).render(spec);
  EXPECT_NE(twin.find("define void @" + spec.name + "_twin(ptr noalias nocapture readonly %params"),
            std::string::npos)
      << twin;
  // No transcendental intrinsics reach the GPU module: they are expanded in software.
  std::string ir2 =
      LlvmIrRenderer(LlvmAbi::kNvptx).render(lower_kernel(cases().back().ast, nv_target_info(90)));
  EXPECT_EQ(ir2.find("llvm.exp2"), std::string::npos);
  EXPECT_EQ(ir2.find("llvm.sin"), std::string::npos);
}

TEST(Nvptx, PtxasRejectionIsInternalWithItsOutputAndTheNumberedPtx) {
  REQUIRE_PTXAS();
  std::string ptx = ".version 7.8\n.target sm_90\n.address_size 64\nthis is not ptx;\n";
  Result<PtxasResult> r = nv(90).ptxas().assemble(ptx, 90, "broken");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInternal);
  const std::string& m = r.status().message();
  EXPECT_NE(m.find("-arch=sm_90 rejected the PTX of broken"), std::string::npos) << m;
  EXPECT_NE(m.find("ptxas"), std::string::npos) << m;
  EXPECT_NE(m.find("    4 | this is not ptx;"), std::string::npos) << m;
}

TEST(Nvptx, MissingPtxasNamesThePathsTried) {
  std::string saved = option_value("PTXAS");
  set_option_for_test("PTXAS", "/nonexistent/bin/ptxas");
  Result<Ptxas> p = Ptxas::find();
  set_option_for_test("PTXAS", saved);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(p.status().message(),
            "ptxas not found (tried /nonexistent/bin/ptxas (PTXAS)); install the CUDA toolkit or "
            "set PTXAS or CUDA_PATH");
}

TEST(Nvptx, UnsupportedArchIsRefused) {
  Result<std::unique_ptr<NvTarget>> c = NvTarget::create(52);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(c.status().message().find("sm_52 is not supported"), std::string::npos);
}

TEST(Nvptx, CubinsComeFromTheCacheTheSecondTimeAndTheCompileIsLoggedAtDebug1) {
  REQUIRE_PTXAS();
  const Case c = cases()[1];
  Result<CompiledKernel> first = nv(80).compile(c.ast);
  ASSERT_TRUE(first.ok()) << first.status().to_string();
  std::string saved = option_value("DEBUG");
  set_option_for_test("DEBUG", "1");
  ::testing::internal::CaptureStderr();
  Result<CompiledKernel> second = nv(80).compile(c.ast);
  std::string log = ::testing::internal::GetCapturedStderr();
  set_option_for_test("DEBUG", saved);
  ASSERT_TRUE(second.ok()) << second.status().to_string();
  EXPECT_TRUE(second->cache_hit);
  EXPECT_EQ(second->binary.code, first->binary.code);
  EXPECT_EQ(second->binary.id, first->binary.id);
  EXPECT_NE(log.find("compiled " + second->spec.name + " for nv-sm_80 in "), std::string::npos)
      << log;
  EXPECT_NE(log.find("(cached binary)"), std::string::npos) << log;
  EXPECT_NE(nv(80).ptxas().cache_key(80), nv(90).ptxas().cache_key(90));
  EXPECT_NE(nv(80).cache_key(), nv(90).cache_key());
}

TEST(Nvptx, PtxasReportIsLoggedAtDebug2WhenItRuns) {
  REQUIRE_PTXAS();
  const Case c = cases()[1];
  Result<NvKernel> k = compile_nv(nv(80), c.ast);
  ASSERT_TRUE(k.ok()) << k.status().to_string();
  std::string saved = option_value("DEBUG");
  set_option_for_test("DEBUG", "2");
  ::testing::internal::CaptureStderr();
  Result<PtxasResult> r = nv(80).ptxas().run(k->ptx, 80, k->spec.name);
  std::string log = ::testing::internal::GetCapturedStderr();
  set_option_for_test("DEBUG", saved);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->cubin, k->cubin) << "the target's cubin is ptxas' for its listing";
  EXPECT_NE(log.find("ptxas sm_80 " + k->spec.name + ": " + std::to_string(k->ptxas.registers) +
                     " registers"),
            std::string::npos)
      << log;
}

TEST(Nvptx, ReportIsReadForTheEntryNotItsSubroutines) {
  std::string log =
      "ptxas info    : 0 bytes gmem\n"
      "ptxas info    : Function properties for $__internal_0_$__cuda_sm3x_div_rn_noftz_f32\n"
      "    24 bytes stack frame, 8 bytes spill stores, 8 bytes spill loads\n"
      "ptxas info    : Compiling entry function 'k' for 'sm_90'\n"
      "ptxas info    : Function properties for k\n"
      "    16 bytes stack frame, 4 bytes spill stores, 12 bytes spill loads\n"
      "ptxas info    : Used 40 registers, used 1 barriers, 4096 bytes smem\n"
      "ptxas info    : Compile time = 1.0 ms\n"
      "ptxas info    : Compiling entry function 'other' for 'sm_90'\n"
      "ptxas info    : Used 8 registers, used 0 barriers\n";
  PtxasReport r = parse_ptxas_report(log, "k");
  EXPECT_EQ(r.registers, 40);
  EXPECT_EQ(r.barriers, 1);
  EXPECT_EQ(r.stack_bytes, 16);
  EXPECT_EQ(r.spill_store_bytes, 4);
  EXPECT_EQ(r.spill_load_bytes, 12);
  EXPECT_EQ(r.shared_bytes, 4096);
  EXPECT_EQ(parse_ptxas_report(log, "other").registers, 8);
  EXPECT_EQ(parse_ptxas_report(log, "missing").registers, -1);
}

}  // namespace
}  // namespace baregrad::compiler
