// HCQ benchmarks on the CPU HCQ device: submit latency of a tiny launch, host copy bandwidth.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "bench/bench.h"
#include "drivers/cpu/device.h"
#include "drivers/cpu/program.h"
#include "hcq/graph.h"

namespace baregrad::bench {
namespace {

// out[i] = a[i] + b[i] over 16 floats: the smallest useful kernel.
void add16(void* const* bufs, const int64_t*, int64_t lo, int64_t hi) {
  auto* out = static_cast<float*>(bufs[0]);
  const auto* a = static_cast<const float*>(bufs[1]);
  const auto* b = static_cast<const float*>(bufs[2]);
  for (int64_t i = lo * 16; i < hi * 16; i++) out[i] = a[i] + b[i];
}

void check(const Status& s) { s.throw_if_error("bench hcq"); }
template <class T>
T check(Result<T> r) {
  if (!r.ok()) r.status().throw_if_error("bench hcq");
  return std::move(*r);
}

std::vector<Row> hcq_rows(const Context& ctx) {
  auto dev = check(cpu::Device::create(ctx.threads));
  auto& alloc = dev->allocator();
  std::vector<hcq::Buffer> bufs;
  for (int i = 0; i < 3; i++) bufs.push_back(check(alloc.alloc(64)));
  std::memset(bufs[1].cpu, 0, 64);
  std::memset(bufs[2].cpu, 0, 64);
  cpu::Program prg("add16", add16, {64, 64, 64}, 0);
  hcq::Buffer mem = check(alloc.alloc(24, {.host = true, .cpu_access = true}));
  hcq::ArgsState args(mem, 0, 3, 0);
  for (int i = 0; i < 3; i++) args.set_buf(i, static_cast<int64_t>(bufs[i].va));
  auto q = dev->compute_queue();
  // Each sample: record, submit, execute on the engine thread, signal, CPU sees the signal.
  int n = ctx.quick ? 1000 : 10000;
  std::vector<double> us;
  for (int i = 0; i < n + 200; i++) {
    auto t0 = std::chrono::steady_clock::now();
    uint64_t v = check(dev->submit_on_timeline(
        *q, [&](hcq::HwQueue& hq) { hq.exec(prg, args, hcq::Dim3{1, 1, 1}, hcq::Dim3{}); }));
    check(dev->timeline().wait(v));
    auto t1 = std::chrono::steady_clock::now();
    if (i >= 200) us.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
  }
  std::nth_element(us.begin(), us.begin() + n / 2, us.end());
  Row lat;
  lat.name = "hcq tiny exec + signal, submit to CPU seeing it";
  lat.device = "CPU";
  lat.metric = "time";
  lat.unit = "us";
  lat.value = us[n / 2];
  if (auto ref = python_reference(BARE_SOURCE_DIR "/bench/ref/torch_add.py")) {
    lat.ref = "PyTorch add of 16 floats";
    lat.ref_value = *ref;
  }
  lat.note = "median of " + std::to_string(n) + "; target < 2 us";

  // A graph of 1,000 tiny launches, replayed as one submission.
  std::vector<hcq::GraphItem> items(1000);
  for (auto& it : items) {
    it.prg = &prg;
    for (int i = 0; i < 3; i++) it.bufs.push_back(static_cast<int64_t>(bufs[i].va));
    it.writes = {{it.bufs[0], 64}};
    it.reads = {{it.bufs[1], 64}, {it.bufs[2], 64}};
  }
  auto graph = check(hcq::Graph::create(*dev, std::move(items), 0));
  double replay_ms = time_median_ms(
      [&] {
        check(graph->replay({}));
        check(dev->synchronize());
      },
      ctx.quick ? 20 : 100, ctx.quick ? 100 : 500);
  Row gr;
  gr.name = "hcq graph replay of 1,000 tiny kernels";
  gr.device = "CPU";
  gr.metric = "time";
  gr.unit = "us/kernel";
  gr.value = replay_ms * 1000 / 1000;
  gr.note = "median replay (one submission, bound queue) / 1000; target < 0.5 us";

  // Host copies through the staging buffers and the copy engine.
  size_t bytes = ctx.quick ? (64 << 20) : (256 << 20);
  hcq::Buffer big = check(alloc.alloc(bytes));
  std::vector<uint8_t> host(bytes, 1);
  double in_ms = time_median_ms(
      [&] {
        check(alloc.copy_in(big, host.data(), bytes));
        check(dev->synchronize());
      },
      3, 300);
  double out_ms = time_median_ms([&] { check(alloc.copy_out(host.data(), big, bytes)); }, 3, 300);
  auto bw = [&](const std::string& name, double ms) {
    Row r;
    r.name = name;
    r.device = "CPU";
    r.metric = "bandwidth";
    r.unit = "GB/s";
    r.value = static_cast<double>(bytes) / (ms * 1e6);
    r.peak_pct = 100 * r.value / ctx.mem_gbs;
    r.note = std::to_string(bytes >> 20) + " MiB in 2 MiB staging chunks; median";
    return r;
  };
  std::vector<Row> rows{lat, gr, bw("hcq copy-in (host -> device)", in_ms),
                        bw("hcq copy-out (device -> host)", out_ms)};
  alloc.free(big);
  alloc.free(mem);
  for (auto& b : bufs) alloc.free(b);
  return rows;
}
}  // namespace

void register_hcq_benches() {
  register_bench(
      "hcq", hcq_rows,
      "CPU HCQ device: tiny-launch submit latency (vs PyTorch eager add), copy bandwidth");
}

}  // namespace baregrad::bench
