// The scheduler: a lazy graph -> an ordered list of kernels. Elementwise work fuses into its
// consumers and into reductions; a reduction fuses into the elementwise work that reads it
// unchanged (same shape, no movement). Everything else becomes a kernel output.
#pragma once

#include <memory>
#include <vector>

#include "compiler/uop.h"
#include "tensor/lazy.h"

namespace baregrad::tensor {

struct ScheduleItem {
  compiler::UOpPtr ast;  // a kernel AST (compiler/ast.h form); null: a copy of bufs[1] to bufs[0]
  std::vector<std::shared_ptr<LazyBase>> bufs;  // bufs[slot]; slot 0 is the output
  // A kernel over symbolic shapes: the values of its Variables (launch scalars by name).
  compiler::Bindings vars;
  // Built for the current values of Variables that it could not take at launch.
  bool specialized = false;
};

// Elements the output of a kernel needs: its size, or the largest any value of its Variables
// gives (a symbolic base's buffer serves every value).
int64_t output_elements(const LazyBase& b);

// Kernels that compute every base `targets` depend on and that is not realized yet, in an
// order where each kernel runs after the kernels producing its inputs. A target that is a
// broadcast of a constant is skipped: it has nothing to compute.
std::vector<ScheduleItem> create_schedule(const std::vector<Lazy>& targets);

// Runs `schedule` on each output's device; afterwards every output base is realized and
// forgets its sources. Each item's references are dropped once it ran, so an intermediate
// buffer is freed right after its last reader (memory planning of eager execution). An output
// with `write_into` is computed into that buffer. While a TinyJit captures, every launch is
// recorded. Throws baregrad::Error("realize") when a device call fails.
void run_schedule(std::vector<ScheduleItem> schedule);

// Compiles every kernel of `schedule` (the device's program cache keeps them), launching none:
// run_schedule then finds them compiled. Without BEAM's search, whose opts need the buffers.
void compile_schedule(const std::vector<ScheduleItem>& schedule);

// The compiled program's estimates for one item: {flops, bytes moved} (what GlobalCounters adds
// when it runs).
std::pair<double, double> estimate_item(const ScheduleItem& item);

}  // namespace baregrad::tensor
