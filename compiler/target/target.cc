#include "compiler/target/target.h"

#include <cmath>
#include <cstdio>
#include <set>

#include "base/error.h"
#include "base/log.h"
#include "base/timer.h"
#include "compiler/cache.h"
#include "compiler/codegen/pipeline.h"

namespace baregrad::compiler {
namespace {

// KERNEL_LOG: appends "<target> <kernel> <op>.<dtype>..." for a kernel lowered for `target`:
// each op and dtype pair of its uops once, a cast with its source dtype, a NaN or infinite float
// constant with its value (literals the renderers special-case). tools/op_slice.py covers these
// with a slice of the op suites.
void log_kernel(const std::string& path, const std::string& target, const ProgramSpec& spec) {
  std::set<std::string> tokens;
  for (const UOpPtr& u : spec.uops) {
    std::string t = std::string(op_name(u->op())) + "." + u->dtype().name();
    if ((u->op() == Op::CAST || u->op() == Op::BITCAST) && !u->src().empty())
      t += "<" + u->src(0)->dtype().name();
    if (u->op() == Op::CONST && dtypes::is_float(u->dtype())) {
      double v = u->const_value();
      if (std::isnan(v)) t += "=nan";
      if (std::isinf(v)) t += v > 0 ? "=inf" : "=-inf";
    }
    tokens.insert(std::move(t));
  }
  std::string line = target + " " + spec.name;
  for (const std::string& t : tokens) line += " " + t;
  line += "\n";
  FILE* f = std::fopen(path.c_str(), "a");
  if (!f) {
    BG_LOG(0) << "KERNEL_LOG=" << path << ": cannot append to it";
    return;
  }
  std::fputs(line.c_str(), f);
  std::fclose(f);
}

}  // namespace

Result<CompiledKernel> Target::compile(const UOpPtr& ast,
                                       const std::optional<std::vector<Opt>>& opts) const {
  double t0 = now_ms();
  ProgramSpec spec;
  try {
    spec = lower_kernel(ast, info_, opts);
  } catch (const Error& e) {
    return invalid_argument(e.what());
  }
  ASSIGN_OR_RETURN(CompiledKernel k, compile(spec));
  k.compile_ms = now_ms() - t0;
  return k;
}

Result<CompiledKernel> Target::compile(const ProgramSpec& spec) const {
  double t0 = now_ms();
  CompiledKernel k;
  k.spec = spec;
  Binary& b = k.binary;
  b.entry = spec.name;
  b.num_bufs = static_cast<int>(spec.bufs.size());
  b.num_vars = static_cast<int>(spec.vars.size());
  RETURN_IF_ERROR(layout(spec, &b));
  b.flops = spec.flops;
  b.bytes = spec.bytes;
  b.buf_bytes.assign(static_cast<size_t>(b.num_bufs), 0);
  for (const BufferArg& a : spec.bufs)
    if (a.slot >= 0 && a.slot < b.num_bufs)
      b.buf_bytes[static_cast<size_t>(a.slot)] = static_cast<size_t>(a.size) * a.dtype.itemsize();

  k.source = render(spec);
  if (const std::string& log = options().kernel_log; !log.empty())
    log_kernel(log, info_.name, spec);
  // The disk key is the rendered source: any change in lowering or rendering invalidates it.
  auto& cache = KernelCache::global();
  std::string key = cache_key() + "\n" + k.source;
  if (std::optional<std::string> hit = cache.get(key)) {
    b.code = std::move(*hit);
    k.cache_hit = true;
  } else {
    ScopedTimer timer("compile " + spec.name + " for " + info_.name);
    ASSIGN_OR_RETURN(b.code, assemble(k.source, spec));
    cache.put(key, b.code);
  }
  b.id = hash_hex(std::string(binary_format_name(b.format)) + "\n" + b.arch + "\n" + b.entry +
                  "\n" + b.code);
  k.compile_ms = now_ms() - t0;

  if (options().debug >= 4) {
    Result<std::string> text = listing(k);
    BG_LOG(4) << (text.ok() ? *text : text.status().to_string());
    if (text.ok() && *text != k.source) BG_LOG(5) << k.source;
  }
  BG_LOG(1) << "compiled " << spec.name << " for " << info_.name << " in " << k.compile_ms << " ms"
            << (k.cache_hit ? " (cached binary)" : "");
  return k;
}

}  // namespace baregrad::compiler
