#include "compiler/render/llvm_ir.h"

#include <algorithm>

#include "base/check.h"
#include "compiler/render/llvm_emit.h"
#include "compiler/render/llvm_types.h"

namespace baregrad::compiler {
namespace {

// NOTE: AMD Zen4 defaults to 256-bit vectors; kernels ask for full zmm width.
constexpr const char* kVectorAttrs =
    "\"prefer-vector-width\"=\"512\" \"min-legal-vector-width\"=\"512\"";

// The in-memory element type: bool is stored as one byte.
DType mem_dtype(DType t) { return t.scalar == Scalar::kBool ? dtypes::kUint8.vec(t.count) : t; }

std::string mem_align(DType t) { return std::to_string(std::max(1, t.scalar_size())); }

}  // namespace

std::string LlvmIrRenderer::render(const ProgramSpec& spec) const {
  return LlvmEmitter(spec).module();
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
      CHECK(n == "core_lo" || n == "core_hi") << "llvm: unknown SPECIAL " << n;
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
  std::string pre = cur_block_;
  line("br label %" + l.header);
  label(l.header);
  line(l.counter + " = phi " + t + " [ " + val(u->src(0)) + ", %" + pre + " ], [ " + l.counter +
       ".next, %" + l.latch + " ]");
  std::string cmp = dtypes::is_unsigned(u->dtype()) ? "ult" : "slt";
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
  std::string mt = llvm_type(md, true), align = mem_align(d);
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
  std::string mt = llvm_type(md, true), align = mem_align(d);
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
         "i64 %core_lo, i64 %core_hi) #1 {\nentry:\n" + allocas_ + body_ + "  ret void\n}\n";
}

std::string LlvmEmitter::wrapper_function() const {
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

std::string LlvmEmitter::module() {
  std::string body = body_function();
  std::string out = "; baregrad kernel " + spec_.name + "\n\n";
  for (const std::string& d : declares_) out += d + "\n";
  if (!declares_.empty()) out += "\n";
  out += body + "\n" + wrapper_function() + "\n";
  out += std::string("attributes #0 = { nounwind ") + kVectorAttrs + " }\n";
  out += std::string("attributes #1 = { alwaysinline nounwind ") + kVectorAttrs + " }\n";
  return out;
}

}  // namespace baregrad::compiler
