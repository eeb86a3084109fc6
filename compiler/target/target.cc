#include "compiler/target/target.h"

#include "base/error.h"
#include "base/log.h"
#include "base/timer.h"
#include "compiler/cache.h"
#include "compiler/codegen/pipeline.h"

namespace baregrad::compiler {

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
