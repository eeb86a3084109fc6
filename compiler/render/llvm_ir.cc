#include "compiler/render/llvm_ir.h"

#include <algorithm>

#include "base/check.h"
#include "compiler/render/llvm_emit.h"
#include "compiler/render/llvm_types.h"
#include "compiler/symbolic.h"

namespace baregrad::compiler {
namespace {

// NOTE: AMD Zen4 defaults to 256-bit vectors; kernels ask for full zmm width.
constexpr const char* kVectorAttrs =
    "\"prefer-vector-width\"=\"512\" \"min-legal-vector-width\"=\"512\"";

// The in-memory element type: bool is stored as one byte.
DType mem_dtype(DType t) { return t.scalar == Scalar::kBool ? dtypes::kUint8.vec(t.count) : t; }

// The alignment in bytes of an access of type `t` at `index` (an INDEX): the element's own,
// or more where the buffer's base is aligned (ProgramSpec::buffer_align; 16 for shared memory)
// and the index a known multiple of elements, so that NVPTX emits ld.global.v4 / st.v4.
std::string access_align(const ProgramSpec& spec, const UOp* index, DType t) {
  int64_t elem = std::max(1, t.scalar_size());
  const UOp* buf = index->src(0).get();
  int64_t base = buf->op() == Op::DEFINE_LOCAL ? 16 : spec.buffer_align;
  if (t.count == 1 || base <= elem || index->src(1)->dtype().count != 1)
    return std::to_string(elem);
  int64_t proven = std::min(base, known_divisor(index->src(1).get()) * elem);
  return std::to_string(std::max(elem, proven));
}

// Bytes rounded up to 16: where each DEFINE_LOCAL lies in the twin's shared memory.
int64_t round16(int64_t n) { return (n + 15) / 16 * 16; }

// The SPECIALs of GPU programs, in the order the body takes them.
constexpr const char* kGpuSpecials[] = {"gidx0", "gidx1", "gidx2", "lidx0", "lidx1", "lidx2"};
// The intrinsics behind them: PTX special registers, AMDGPU work-group and work-item ids.
constexpr const char* kNvptxSregs[] = {"nvvm.read.ptx.sreg.ctaid.x", "nvvm.read.ptx.sreg.ctaid.y",
                                       "nvvm.read.ptx.sreg.ctaid.z", "nvvm.read.ptx.sreg.tid.x",
                                       "nvvm.read.ptx.sreg.tid.y",   "nvvm.read.ptx.sreg.tid.z"};
constexpr const char* kAmdgpuIds[] = {"amdgcn.workgroup.id.x", "amdgcn.workgroup.id.y",
                                      "amdgcn.workgroup.id.z", "amdgcn.workitem.id.x",
                                      "amdgcn.workitem.id.y",  "amdgcn.workitem.id.z"};
// What an AMDGPU kernel does not use, so that the code object asks for no implicit kernargs or
// SGPRs beyond the kernarg pointer and the work-group ids (LLVM AMDGPUUsage, "Function
// attributes"; AMDGPUAttributes.def).
constexpr const char* kAmdgpuNoImplicit =
    "\"amdgpu-no-implicitarg-ptr\" \"amdgpu-no-dispatch-ptr\" \"amdgpu-no-queue-ptr\" "
    "\"amdgpu-no-dispatch-id\" \"amdgpu-no-hostcall-ptr\" \"amdgpu-no-heap-ptr\" "
    "\"amdgpu-no-multigrid-sync-arg\" \"amdgpu-no-lds-kernel-id\" \"amdgpu-no-default-queue\" "
    "\"amdgpu-no-completion-action\" \"uniform-work-group-size\"=\"true\"";

}  // namespace

bool twin_is_per_thread(const ProgramSpec& spec) {
  return std::any_of(spec.uops.begin(), spec.uops.end(), [](const UOpPtr& u) {
    return u->op() == Op::BARRIER || u->op() == Op::DEFINE_LOCAL || u->op() == Op::SHFL_XOR;
  });
}

namespace {

// The twin's shared memory for the DEFINE_LOCALs, in program order.
int64_t twin_local_bytes(const ProgramSpec& spec) {
  int64_t bytes = 0;
  for (const UOpPtr& u : spec.uops)
    if (u->op() == Op::DEFINE_LOCAL)
      bytes += round16(u->arg_as<int64_t>() * std::max(1, mem_dtype(u->dtype().base()).itemsize()));
  return bytes;
}

}  // namespace

int64_t twin_shared_bytes(const ProgramSpec& spec) {
  int64_t bytes = twin_local_bytes(spec);
  // SHFL_XOR: a 4-byte exchange slot per thread of the block after them.
  if (std::any_of(spec.uops.begin(), spec.uops.end(),
                  [](const UOpPtr& u) { return u->op() == Op::SHFL_XOR; }))
    bytes += round16(4 * spec.local_size[0] * spec.local_size[1] * spec.local_size[2]);
  return bytes;
}

int gpu_buffer_slots(const ProgramSpec& spec) {
  int n = static_cast<int>(spec.bufs.size());
  for (const UOpPtr& u : spec.uops)
    if (u->op() == Op::DEFINE_GLOBAL) n = std::max(n, static_cast<int>(u->arg_as<int64_t>()) + 1);
  return n;
}

std::string LlvmIrRenderer::name() const {
  switch (abi_) {
    case LlvmAbi::kCpu:
      return "llvm";
    case LlvmAbi::kNvptx:
      return "llvm-nvptx";
    case LlvmAbi::kAmdgpu:
      return "llvm-amdgpu";
    case LlvmAbi::kHostTwin:
      return "llvm-twin";
  }
  return "llvm-?";
}

std::string LlvmIrRenderer::render(const ProgramSpec& spec) const {
  return LlvmEmitter(spec, abi_).module();
}

std::string LlvmEmitter::val(const UOpPtr& u) const {
  auto it = vals_.find(u.get());
  if (it == vals_.end() && u->is_const()) return llvm_const(*u);
  CHECK(it != vals_.end()) << "llvm: " << op_name(u->op()) << " used before its definition";
  return it->second;
}

std::string LlvmEmitter::assign(const std::string& text) {
  std::string name = fresh();
  line(name + " = " + text);
  return name;
}

void LlvmEmitter::label(const std::string& name) {
  body_ += name + ":\n";
  cur_block_ = name;
}

std::string LlvmEmitter::call_intrinsic(const std::string& ret,
                                        const std::string& base,
                                        const std::string& suffixes,
                                        const std::vector<std::string>& args) {
  std::string fn = "@llvm." + base + (suffixes.empty() ? "" : "." + suffixes);
  std::string types, call_args;
  for (size_t i = 0; i < args.size(); i++) {
    const std::string& a = args[i];
    // Every argument is "type value"; a vector type contains spaces up to its closing '>'.
    size_t split = a[0] == '<' ? a.find('>') + 1 : a.find(' ');
    types += (i ? ", " : "") + a.substr(0, split);
    call_args += (i ? ", " : "") + a;
  }
  declares_.insert("declare " + ret + " " + fn + "(" + types + ")");
  std::string call = "call " + ret + " " + fn + "(" + call_args + ")";
  if (ret == "void") {
    line(call);
    return "";
  }
  return assign(call);
}

std::string LlvmEmitter::broadcast(const std::string& v, DType scalar, int n) {
  DType vt = scalar.vec(n);
  std::string one = assign("insertelement " + llvm_type(vt) + " poison, " + llvm_type(scalar) +
                           " " + v + ", i32 0");
  return assign("shufflevector " + llvm_type(vt) + " " + one + ", " + llvm_type(vt) + " poison, <" +
                std::to_string(n) + " x i32> zeroinitializer");
}

void LlvmEmitter::emit(const UOp* u) {
  switch (u->op()) {
    case Op::DEFINE_GLOBAL:
      def(u, "%b" + std::to_string(u->arg_as<int64_t>()));
      return;
    case Op::DEFINE_LOCAL: {
      CHECK(abi_ != LlvmAbi::kCpu) << "llvm: shared memory (DEFINE_LOCAL) on the CPU";
      int64_t elems = u->arg_as<int64_t>();
      DType md = mem_dtype(u->dtype().base());
      if (abi_ == LlvmAbi::kHostTwin) {  // the block's memory the caller passes at %smem
        def(u, assign("getelementptr inbounds i8, ptr %smem, i64 " + std::to_string(smem_used_)));
        smem_used_ += round16(elems * std::max(1, md.itemsize()));
        return;
      }
      std::string name = llvm_global(spec_.name + "_temp" + std::to_string(next_++));
      std::string arr = "[" + std::to_string(elems) + " x " + llvm_type(md, true) + "]";
      globals_ += name + " = internal addrspace(3) global " + arr + " undef, align 16\n";
      def(u, assign("addrspacecast ptr addrspace(3) " + name + " to ptr"));
      return;
    }
    case Op::SHFL_XOR:
      return emit_shfl_xor(u);
    case Op::BARRIER:
      CHECK(abi_ != LlvmAbi::kCpu) << "llvm: a work-group BARRIER on the CPU";
      if (abi_ == LlvmAbi::kHostTwin) {
        line("call void %barrier(ptr %barrier_ctx)");
      } else if (abi_ == LlvmAbi::kAmdgpu) {
        // s_barrier orders execution only: the fences make LDS writes before it visible after.
        line("fence syncscope(\"workgroup\") release");
        call_intrinsic("void", "amdgcn.s.barrier", "", {});
        line("fence syncscope(\"workgroup\") acquire");
      } else {
        call_intrinsic("void", "nvvm.barrier0", "", {});
      }
      return;
    case Op::DEFINE_VAR: {
      const auto& vars = spec_.vars;
      auto it = std::find(vars.begin(), vars.end(), u->arg_as<VarArg>());
      if (it == vars.end()) {
        it = std::find_if(vars.begin(), vars.end(),
                          [&](const VarArg& v) { return v.name == u->arg_as<VarArg>().name; });
      }
      CHECK(it != vars.end()) << "llvm: DEFINE_VAR " << u->arg_as<VarArg>().name
                              << " is not in ProgramSpec::vars";
      def(u, "%var" + std::to_string(it - vars.begin()));
      return;
    }
    case Op::SPECIAL: {
      const std::string& n = u->arg_as<VarArg>().name;
      bool known = abi_ == LlvmAbi::kCpu
                       ? n == "core_lo" || n == "core_hi"
                       : std::find(std::begin(kGpuSpecials), std::end(kGpuSpecials), n) !=
                             std::end(kGpuSpecials);
      CHECK(known) << "llvm: unknown SPECIAL " << n << " for " << LlvmIrRenderer(abi_).name();
      def(u, "%" + n);
      return;
    }
    case Op::CONST:
      def(u, llvm_const(*u));
      return;
    case Op::RANGE:
      emit_range(u);
      return;
    case Op::ENDRANGE:
      emit_endrange(u);
      return;
    case Op::DEFINE_ACC: {
      std::string t =
          llvm_type(u->dtype().ptr ? u->dtype().base().vec(u->dtype().count) : u->dtype());
      std::string acc = fresh("acc");
      allocas_ += "  " + acc + " = alloca " + t + "\n";
      line("store " + t + " " + val(u->src(0)) + ", ptr " + acc);
      def(u, acc);
      return;
    }
    case Op::ACC_LOAD:
      def(u, assign("load " + llvm_type(u->dtype()) + ", ptr " + val(u->src(0))));
      return;
    case Op::ACC_STORE:
      line("store " + llvm_type(u->src(1)->dtype()) + " " + val(u->src(1)) + ", ptr " +
           val(u->src(0)));
      return;
    case Op::INDEX:
      emit_index(u);
      return;
    case Op::LOAD:
      emit_load(u);
      return;
    case Op::STORE:
      emit_store(u);
      return;
    case Op::VECTORIZE:
      emit_vectorize(u);
      return;
    case Op::GEP: {
      const UOpPtr& v = u->src(0);
      if (v->dtype().count == 1) {
        def(u, val(v));
        return;
      }
      def(u, assign("extractelement " + llvm_type(v->dtype()) + " " + val(v) + ", i32 " +
                    std::to_string(u->arg_as<int64_t>())));
      return;
    }
    default:
      break;
  }
  CHECK(is_alu(u->op())) << "llvm: cannot render " << op_name(u->op())
                         << " (kernel-AST ops must be lowered first)";
  emit_alu(u);
}

void LlvmEmitter::emit_range(const UOp* u) {
  int id = next_++;
  Loop l{"loop" + std::to_string(id), "body" + std::to_string(id), "latch" + std::to_string(id),
         "exit" + std::to_string(id), "%r" + std::to_string(id)};
  std::string t = llvm_type(u->dtype());
  std::string cmp = dtypes::is_unsigned(u->dtype()) ? "ult" : "slt";
  if (const int64_t* loop_id = std::get_if<int64_t>(&u->arg()); loop_id && *loop_id < 0) {
    l.once = true;
    std::string c = assign("icmp " + cmp + " " + t + " " + val(u->src(0)) + ", " + val(u->src(1)));
    line("br i1 " + c + ", label %" + l.body + ", label %" + l.exit);
    label(l.body);
    def(u, val(u->src(0)));
    loops_[u] = std::move(l);
    return;
  }
  std::string pre = cur_block_;
  line("br label %" + l.header);
  label(l.header);
  line(l.counter + " = phi " + t + " [ " + val(u->src(0)) + ", %" + pre + " ], [ " + l.counter +
       ".next, %" + l.latch + " ]");
  std::string c = assign("icmp " + cmp + " " + t + " " + l.counter + ", " + val(u->src(1)));
  line("br i1 " + c + ", label %" + l.body + ", label %" + l.exit);
  label(l.body);
  def(u, l.counter);
  loops_[u] = std::move(l);
}

void LlvmEmitter::emit_endrange(const UOp* u) {
  auto it = loops_.find(u->src(0).get());
  CHECK(it != loops_.end()) << "llvm: ENDRANGE without its RANGE";
  const Loop& l = it->second;
  if (l.once) {
    line("br label %" + l.exit);
    label(l.exit);
    return;
  }
  std::string t = llvm_type(u->src(0)->dtype());
  line("br label %" + l.latch);
  label(l.latch);
  line(l.counter + ".next = add nuw nsw " + t + " " + l.counter + ", 1");
  line("br label %" + l.header);
  label(l.exit);
}

void LlvmEmitter::emit_index(const UOp* u) {
  const UOpPtr& buf = u->src(0);
  DType idx_t = u->src(1)->dtype();
  DType i64 = dtypes::kInt64.vec(idx_t.count);
  std::string idx = convert(val(u->src(1)), idx_t, i64);
  bool guarded = u->src().size() > 2 && u->src(2)->dtype().count == 1 && idx_t.count == 1;
  if (guarded) idx = assign("select i1 " + val(u->src(2)) + ", i64 " + idx + ", i64 0");
  // A vector `valid` with a scalar index is a masked load: lane 0 may lie outside the buffer.
  bool inbounds = u->src().size() <= 2 || guarded;
  DType elem = mem_dtype(buf->dtype().base().vec(buf->dtype().count));
  def(u, assign(std::string("getelementptr ") + (inbounds ? "inbounds " : "") +
                llvm_type(elem, true) + ", ptr " + val(buf) + ", " + llvm_type(i64) + " " + idx));
}

void LlvmEmitter::emit_load(const UOp* u) {
  const UOp* idx = u->src(0).get();
  CHECK(idx->op() == Op::INDEX) << "llvm: LOAD from " << op_name(idx->op());
  DType d = u->dtype(), md = mem_dtype(d);
  std::string mt = llvm_type(md, true), align = access_align(spec_, idx, d);
  bool gather = idx->src(1)->dtype().count > 1;
  const UOp* valid = idx->src().size() > 2 ? idx->src(2).get() : nullptr;
  bool masked = gather || (valid && valid->dtype().count > 1);
  std::string v, mask;
  if (masked) {
    DType mask_t = dtypes::kBool.vec(d.count);
    mask = !valid                      ? llvm_splat(mask_t, 1)
           : valid->dtype().count == 1 ? broadcast(val(valid->self()), dtypes::kBool, d.count)
                                       : val(valid->self());
    std::string ptrs =
        (gather ? "<" + std::to_string(d.count) + " x ptr> " : "ptr ") + val(idx->self());
    v = call_intrinsic(
        mt, gather ? "masked.gather" : "masked.load",
        llvm_suffix(md) + (gather ? ".v" + std::to_string(d.count) + "p0" : ".p0"),
        {ptrs, "i32 " + align, llvm_type(mask_t) + " " + mask, mt + " zeroinitializer"});
  } else {
    v = assign("load " + mt + ", ptr " + val(idx->self()) + ", align " + align);
  }
  if (d.scalar == Scalar::kBool) v = assign("icmp ne " + mt + " " + v + ", zeroinitializer");
  bool has_alt = u->src().size() > 1;
  if (valid && (!masked || has_alt)) {
    std::string t = llvm_type(d);
    std::string alt = has_alt ? val(u->src(1)) : "zeroinitializer";
    std::string cond =
        masked ? llvm_type(dtypes::kBool.vec(d.count)) + " " + mask : "i1 " + val(valid->self());
    v = assign("select " + cond + ", " + t + " " + v + ", " + t + " " + alt);
  }
  def(u, v);
}

void LlvmEmitter::emit_store(const UOp* u) {
  const UOp* idx = u->src(0).get();
  CHECK(idx->op() == Op::INDEX) << "llvm: STORE to " << op_name(idx->op());
  DType d = u->src(1)->dtype(), md = mem_dtype(d);
  std::string mt = llvm_type(md, true), align = access_align(spec_, idx, d);
  std::string v = convert(val(u->src(1)), d, md);
  bool gather = idx->src(1)->dtype().count > 1;
  const UOp* valid = idx->src().size() > 2 ? idx->src(2).get() : nullptr;
  if (gather || (valid && valid->dtype().count > 1)) {
    DType mask_t = dtypes::kBool.vec(d.count);
    std::string mask = !valid ? llvm_splat(mask_t, 1)
                       : valid->dtype().count == 1
                           ? broadcast(val(valid->self()), dtypes::kBool, d.count)
                           : val(valid->self());
    std::string ptrs =
        (gather ? "<" + std::to_string(d.count) + " x ptr> " : "ptr ") + val(idx->self());
    call_intrinsic("void", gather ? "masked.scatter" : "masked.store",
                   llvm_suffix(md) + (gather ? ".v" + std::to_string(d.count) + "p0" : ".p0"),
                   {mt + " " + v, ptrs, "i32 " + align, llvm_type(mask_t) + " " + mask});
    return;
  }
  std::string store = "store " + mt + " " + v + ", ptr " + val(idx->self()) + ", align " + align;
  if (!valid) {
    line(store);
    return;
  }
  int id = next_++;
  std::string then = "store" + std::to_string(id), done = "stored" + std::to_string(id);
  line("br i1 " + val(valid->self()) + ", label %" + then + ", label %" + done);
  label(then);
  line(store);
  line("br label %" + done);
  label(done);
}

void LlvmEmitter::emit_vectorize(const UOp* u) {
  DType t = u->dtype();
  const auto& src = u->src();
  CHECK(static_cast<int>(src.size()) == t.count)
      << "llvm: VECTORIZE of " << src.size() << " sources into " << t.name();
  if (std::all_of(src.begin(), src.end(), [&](const UOpPtr& s) { return s == src[0]; })) {
    def(u, src[0]->is_const() ? llvm_splat_text(t, llvm_const(*src[0]))
                              : broadcast(val(src[0]), t.base(), t.count));
    return;
  }
  std::string v = "poison", vt = llvm_type(t), et = llvm_type(t.base());
  for (size_t i = 0; i < src.size(); i++) {
    v = assign("insertelement " + vt + " " + v + ", " + et + " " + val(src[i]) + ", i32 " +
               std::to_string(i));
  }
  def(u, v);
}

// NVPTX: shfl.sync.bfly over the warp's lanes. The host twin: every thread writes its value to its
// exchange slot (after the DEFINE_LOCALs in %smem), waits for the block, reads its partner's
// slot, and waits again before any slot is reused.
void LlvmEmitter::emit_shfl_xor(const UOp* u) {
  CHECK(abi_ != LlvmAbi::kCpu) << "llvm: a warp exchange (SHFL_XOR) on the CPU";
  DType t = u->dtype();
  std::string ty = llvm_type(t), v = val(u->src(0)), mask = std::to_string(u->arg_as<int64_t>());
  const auto& b = spec_.local_size;
  if (abi_ == LlvmAbi::kAmdgpu) {
    // ds_bpermute_b32 reads the lane at byte address / 4, modulo the wave size (AMD RDNA3 and
    // CDNA3 ISA, "DS_BPERMUTE_B32"): the partner's linear thread index * 4 is its address.
    std::string tid = assign("mul i64 %lidx2, " + std::to_string(b[0] * b[1]));
    tid = assign("add i64 " + tid + ", " + assign("mul i64 %lidx1, " + std::to_string(b[0])));
    tid = assign("add i64 " + tid + ", %lidx0");
    std::string addr = assign("trunc i64 " + assign("xor i64 " + tid + ", " + mask) + " to i32");
    addr = assign("shl i32 " + addr + ", 2");
    std::string bits = dtypes::is_float(t) ? assign("bitcast " + ty + " " + v + " to i32") : v;
    std::string got =
        call_intrinsic("i32", "amdgcn.ds.bpermute", "", {"i32 " + addr, "i32 " + bits});
    def(u, dtypes::is_float(t) ? assign("bitcast i32 " + got + " to " + ty) : got);
    return;
  }
  if (abi_ == LlvmAbi::kNvptx) {
    // The lanes that take part: all 32, or a block smaller than a warp (lanes 0..n-1).
    int64_t threads = b[0] * b[1] * b[2];
    std::string members =
        threads >= 32 ? "-1" : std::to_string(static_cast<int32_t>((int64_t{1} << threads) - 1));
    std::string suffix = dtypes::is_float(t) ? "f32" : "i32";
    def(u, call_intrinsic(ty, "nvvm.shfl.sync.bfly." + suffix, "",
                          {"i32 " + members, ty + " " + v, "i32 " + mask, "i32 31"}));
    return;
  }
  std::string tid = assign("mul i64 %lidx2, " + std::to_string(b[0] * b[1]));
  tid = assign("add i64 " + tid + ", " + assign("mul i64 %lidx1, " + std::to_string(b[0])));
  tid = assign("add i64 " + tid + ", %lidx0");
  std::string base = assign("getelementptr inbounds i8, ptr %smem, i64 " +
                            std::to_string(twin_local_bytes(spec_)));
  std::string mine = assign("getelementptr inbounds " + ty + ", ptr " + base + ", i64 " + tid);
  line("store " + ty + " " + v + ", ptr " + mine + ", align 4");
  line("call void %barrier(ptr %barrier_ctx)");
  std::string partner = assign("xor i64 " + tid + ", " + mask);
  std::string theirs =
      assign("getelementptr inbounds " + ty + ", ptr " + base + ", i64 " + partner);
  def(u, assign("load " + ty + ", ptr " + theirs + ", align 4"));
  line("call void %barrier(ptr %barrier_ctx)");
}

std::string LlvmEmitter::body_function() {
  for (const UOpPtr& u : spec_.uops) {
    if (u->op() == Op::DEFINE_GLOBAL) buf_slots_.push_back(static_cast<int>(u->arg_as<int64_t>()));
  }
  std::sort(buf_slots_.begin(), buf_slots_.end());
  buf_slots_.erase(std::unique(buf_slots_.begin(), buf_slots_.end()), buf_slots_.end());
  for (const UOpPtr& u : spec_.uops) emit(u.get());
  std::string params;
  for (int s : buf_slots_) params += "ptr noalias %b" + std::to_string(s) + ", ";
  for (size_t i = 0; i < spec_.vars.size(); i++) params += "i64 %var" + std::to_string(i) + ", ";
  return "define internal void " + llvm_global(spec_.name + "_body") + "(" + params +
         special_params() + ") #1 {\nentry:\n" + allocas_ + body_ + "  ret void\n}\n";
}

std::string LlvmEmitter::special_params() const {
  if (abi_ == LlvmAbi::kCpu) return "i64 %core_lo, i64 %core_hi";
  std::string out;
  for (const char* n : kGpuSpecials) out += std::string(out.empty() ? "" : ", ") + "i64 %" + n;
  if (abi_ == LlvmAbi::kHostTwin && twin_is_per_thread(spec_))
    out += ", ptr %smem, ptr %barrier, ptr %barrier_ctx";
  return out;
}

std::string LlvmEmitter::wrapper_function() const {
  if (abi_ == LlvmAbi::kHostTwin) return twin_function();
  std::string out = "define void " + llvm_global(spec_.name) +
                    "(ptr noalias nocapture readonly %bufs, ptr noalias nocapture readonly %vars, "
                    "i64 %core_lo, i64 %core_hi) #0 {\nentry:\n";
  std::string args;
  for (int s : buf_slots_) {
    std::string n = std::to_string(s);
    out += "  %bp" + n + " = getelementptr inbounds ptr, ptr %bufs, i64 " + n + "\n";
    out += "  %b" + n + " = load ptr, ptr %bp" + n + ", align 8\n";
    args += "ptr %b" + n + ", ";
  }
  for (size_t i = 0; i < spec_.vars.size(); i++) {
    std::string n = std::to_string(i);
    out += "  %vp" + n + " = getelementptr inbounds i64, ptr %vars, i64 " + n + "\n";
    out += "  %var" + n + " = load i64, ptr %vp" + n + ", align 8\n";
    args += "i64 %var" + n + ", ";
  }
  out += "  call void " + llvm_global(spec_.name + "_body") + "(" + args +
         "i64 %core_lo, i64 %core_hi)\n  ret void\n}\n";
  return out;
}

// The kNvptx / kAmdgpu entry point: every buffer slot and var as a parameter, the SPECIALs from
// the thread's ids, then the body.
std::string LlvmEmitter::gpu_kernel() {
  bool amd = abi_ == LlvmAbi::kAmdgpu;
  int nbufs = gpu_buffer_slots(spec_);
  std::string params, out, args;
  for (int s = 0; s < nbufs; s++)
    params += "ptr addrspace(1) noalias %p" + std::to_string(s) + ", ";
  for (size_t i = 0; i < spec_.vars.size(); i++) params += "i64 %var" + std::to_string(i) + ", ";
  if (!params.empty()) params.resize(params.size() - 2);
  for (int s : buf_slots_) {
    std::string n = std::to_string(s);
    out += "  %b" + n + " = addrspacecast ptr addrspace(1) %p" + n + " to ptr\n";
    args += "ptr %b" + n + ", ";
  }
  for (size_t i = 0; i < spec_.vars.size(); i++) args += "i64 %var" + std::to_string(i) + ", ";
  for (size_t i = 0; i < std::size(kGpuSpecials); i++) {
    std::string fn = std::string("@llvm.") + (amd ? kAmdgpuIds[i] : kNvptxSregs[i]);
    declares_.insert("declare i32 " + fn + "()");
    std::string n = kGpuSpecials[i];
    out += "  %" + n + ".32 = call i32 " + fn + "()\n";
    out += "  %" + n + " = zext i32 %" + n + ".32 to i64\n";
  }
  return "define " + std::string(amd ? "amdgpu_kernel" : "ptx_kernel") + " void " +
         llvm_global(spec_.name) + "(" + params + ") #0 {\nentry:\n" + out + "  call void " +
         llvm_global(spec_.name + "_body") + "(" + args + special_params() + ")\n  ret void\n}\n";
}

// The twin's loads of the buffers and vars from the kNvptx parameter area at %params, appended
// to `out`; `args` gets them as the body's first arguments.
void LlvmEmitter::twin_params(std::string* out, std::string* args) const {
  int nbufs = gpu_buffer_slots(spec_);
  auto param = [&](const std::string& name, const char* type, int64_t offset) {
    *out += "  %" + name + ".p = getelementptr inbounds i8, ptr %params, i64 " +
            std::to_string(offset) + "\n";
    *out += "  %" + name + " = load " + type + ", ptr %" + name + ".p, align 1\n";
    *args += std::string(type) + " %" + name + ", ";
  };
  for (int s : buf_slots_) param("b" + std::to_string(s), "ptr", 8 * int64_t{s});
  for (size_t i = 0; i < spec_.vars.size(); i++)
    param("var" + std::to_string(i), "i64", 8 * (nbufs + static_cast<int64_t>(i)));
}

// The one-thread twin of a kernel with shared memory or barriers: the parameters, the thread's
// ids, then the body with the block's shared memory and the barrier callback.
std::string LlvmEmitter::twin_thread_function() const {
  std::string out = "define void " + llvm_global(twin_symbol(spec_.name)) +
                    "(ptr noalias nocapture readonly %params, ptr nocapture readonly %ids, "
                    "ptr %smem, ptr %barrier, ptr %barrier_ctx) #0 {\nentry:\n";
  std::string args;
  twin_params(&out, &args);
  for (int d = 0; d < 6; d++) {  // ids[d] is kGpuSpecials[d]
    std::string v = std::string("%") + kGpuSpecials[d];
    out += "  " + v + ".p = getelementptr inbounds i32, ptr %ids, i64 " + std::to_string(d) + "\n";
    out += "  " + v + ".32 = load i32, ptr " + v + ".p, align 4\n";
    out += "  " + v + " = zext i32 " + v + ".32 to i64\n";
  }
  return out + "  call void " + llvm_global(spec_.name + "_body") + "(" + args + special_params() +
         ")\n  ret void\n}\n";
}

// Loads the buffers and vars from the parameter area, then loops over blocks (z, y, x) and
// threads in a block (z, y, x), calling the body once per thread.
std::string LlvmEmitter::twin_function() const {
  if (twin_is_per_thread(spec_)) return twin_thread_function();
  std::string out = "define void " + llvm_global(twin_symbol(spec_.name)) +
                    "(ptr noalias nocapture readonly %params, ptr nocapture readonly %grid, "
                    "ptr nocapture readonly %block) #0 {\nentry:\n";
  std::string args;
  twin_params(&out, &args);
  // Loop bounds: grid z, y, x then block z, y, x (outermost first).
  const int order[] = {2, 1, 0, 5, 4, 3};
  for (int d = 0; d < 6; d++) {
    std::string n = std::to_string(d);
    out += "  %n" + n + ".p = getelementptr inbounds i32, ptr " + (d < 3 ? "%grid" : "%block") +
           ", i64 " + std::to_string(d % 3) + "\n";
    out += "  %n" + n + ".32 = load i32, ptr %n" + n + ".p, align 4\n";
    out += "  %n" + n + " = zext i32 %n" + n + ".32 to i64\n";
  }
  std::string prev = "entry";
  for (int level = 0; level < 6; level++) {
    int d = order[level];
    std::string l = std::to_string(level), v = std::string("%") + kGpuSpecials[d];
    out += "  br label %h" + l + "\nh" + l + ":\n";
    out += "  " + v + " = phi i64 [ 0, %" + prev + " ], [ " + v + ".next, %latch" + l + " ]\n";
    out += "  %c" + l + " = icmp ult i64 " + v + ", %n" + std::to_string(d) + "\n";
    out += "  br i1 %c" + l + ", label %body" + l + ", label %exit" + l + "\nbody" + l + ":\n";
    prev = "body" + l;
  }
  out += "  call void " + llvm_global(spec_.name + "_body") + "(" + args + special_params() + ")\n";
  for (int level = 5; level >= 0; level--) {
    std::string l = std::to_string(level), v = std::string("%") + kGpuSpecials[order[level]];
    out += "  br label %latch" + l + "\nlatch" + l + ":\n";
    out += "  " + v + ".next = add nuw i64 " + v + ", 1\n";
    out += "  br label %h" + l + "\nexit" + l + ":\n";
  }
  return out + "  ret void\n}\n";
}

std::string LlvmEmitter::module() {
  std::string body = body_function();
  bool device = abi_ == LlvmAbi::kNvptx || abi_ == LlvmAbi::kAmdgpu;
  std::string entry = device ? gpu_kernel() : wrapper_function();
  std::string out = "; baregrad kernel " + spec_.name + "\n\n";
  for (const std::string& d : declares_) out += d + "\n";
  if (!declares_.empty()) out += "\n";
  if (!globals_.empty()) out += globals_ + "\n";
  out += body + "\n" + entry + "\n";
  // NOTE: vector widths are a host (AVX-512) preference; GPUs have no use for them.
  std::string attrs = device ? "" : std::string(" ") + kVectorAttrs;
  std::string kernel_attrs = attrs;
  if (abi_ == LlvmAbi::kAmdgpu) {
    const auto& b = spec_.local_size;
    kernel_attrs += " \"amdgpu-flat-work-group-size\"=\"1," +
                    std::to_string(std::max<int64_t>(1, b[0] * b[1] * b[2])) + "\" " +
                    kAmdgpuNoImplicit;
  }
  out += "attributes #0 = { nounwind" + kernel_attrs + " }\n";
  out += "attributes #1 = { alwaysinline nounwind" + attrs + " }\n";
  return out;
}

}  // namespace baregrad::compiler
