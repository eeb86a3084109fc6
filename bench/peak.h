#pragma once

// Machine peaks: the FP32 FMA throughput and the memory bandwidth that every other row is
// compared against. How each is measured is documented in bench/README.md.

#include "bench/bench.h"

namespace baregrad::bench {

// CPUs this process may run on (its affinity mask); at least 1.
int available_cpus();

// Measures the FP32 FMA peak on 1 and ctx.threads threads and the memory bandwidths on
// ctx.threads threads (512 MiB arrays, or 256 MiB with ctx.quick); fills ctx.fma_gflops,
// ctx.mem_gbs and ctx.peaks. Writes one progress line per measurement to stderr.
void measure_peaks(Context& ctx);

}  // namespace baregrad::bench
