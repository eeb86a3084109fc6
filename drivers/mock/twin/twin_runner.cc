#include "drivers/mock/twin/twin_runner.h"

#include <ucontext.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <vector>

#include "base/check.h"

#if defined(__SANITIZE_ADDRESS__)
#define BG_FIBER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define BG_FIBER_ASAN 1
#endif
#endif
#if defined(__SANITIZE_THREAD__)
#define BG_FIBER_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define BG_FIBER_TSAN 1
#endif
#endif
#ifdef BG_FIBER_ASAN
#include <sanitizer/common_interface_defs.h>
#endif
#ifdef BG_FIBER_TSAN
#include <sanitizer/tsan_interface.h>
#endif

namespace baregrad::mock {
namespace {

using GridTwin = void (*)(const uint8_t* params, const uint32_t grid[3], const uint32_t block[3]);
using ThreadTwin = void (*)(
    const uint8_t* params, const uint32_t ids[6], uint8_t* smem, void (*barrier)(void*), void* ctx);

// A twin's stack frames are small (accumulators and spills); 64 KiB leaves room for the
// barrier callback and a sanitizer's runtime.
constexpr size_t kStackBytes = 64 << 10;

// The threads of one block as fibers. The switches tell the sanitizers about the stacks
// (ASan's fiber API, TSan's fibers), which would otherwise take a switch for a stack overflow
// or a race.
class Block {
 public:
  Block(ThreadTwin fn, const uint8_t* params, const uint32_t block[3], uint8_t* smem)
      : fn_(fn), params_(params), smem_(smem), dims_{block[0], block[1], block[2]} {
    int n = static_cast<int>(block[0] * block[1] * block[2]);
    threads_.resize(static_cast<size_t>(n));
    for (auto& t : threads_) t.stack.reset(new char[kStackBytes]);
#ifdef BG_FIBER_TSAN
    main_tsan_ = __tsan_get_current_fiber();
    for (auto& t : threads_) t.tsan = __tsan_create_fiber(0);
#endif
  }
  ~Block() {
#ifdef BG_FIBER_TSAN
    for (auto& t : threads_) __tsan_destroy_fiber(t.tsan);
#endif
  }

  // Runs block `gidx` to its end.
  void run(const uint32_t gidx[3]) {
    for (size_t t = 0; t < threads_.size(); t++) prepare(t, gidx);
    for (;;) {
      bool waiting = false;
      for (size_t t = 0; t < threads_.size(); t++) {
        if (threads_[t].state != kRunnable) continue;
        current_ = t;
        switch_to(t);
        waiting |= threads_[t].state == kAtBarrier;
      }
      if (!waiting) break;  // every thread ended
      for (auto& th : threads_)
        if (th.state == kAtBarrier) th.state = kRunnable;
    }
  }

 private:
  enum State { kRunnable, kAtBarrier, kDone };
  struct Thread {
    ucontext_t ctx;
    std::unique_ptr<char[]> stack;
    uint32_t ids[6];
    State state = kRunnable;
    void* tsan = nullptr;
    void* asan_fake = nullptr;  // ASan's fake stack of the fiber while it is switched out
  };

  // Thread t's fiber, about to start block `gidx`. Apart from run(): getcontext returns twice
  // as far as the compiler knows, which must not clobber run()'s locals.
  __attribute__((noinline)) void prepare(size_t t, const uint32_t gidx[3]) {
    Thread& th = threads_[t];
    uint32_t i = static_cast<uint32_t>(t);
    th.ids[0] = gidx[0], th.ids[1] = gidx[1], th.ids[2] = gidx[2];
    th.ids[3] = i % dims_[0], th.ids[4] = i / dims_[0] % dims_[1],
    th.ids[5] = i / (dims_[0] * dims_[1]);
    th.state = kRunnable;
    CHECK(getcontext(&th.ctx) == 0) << "twin runner: getcontext failed";
    th.ctx.uc_stack.ss_sp = th.stack.get();
    th.ctx.uc_stack.ss_size = kStackBytes;
    th.ctx.uc_link = &main_;
    auto self = reinterpret_cast<uintptr_t>(this);
    makecontext(&th.ctx, reinterpret_cast<void (*)()>(&Block::entry), 3,
                static_cast<unsigned>(self >> 32), static_cast<unsigned>(self & 0xffffffffu),
                static_cast<unsigned>(t));
  }

  static void entry(unsigned hi, unsigned lo, unsigned t) {
    auto* b = reinterpret_cast<Block*>((uintptr_t{hi} << 32) | lo);
    b->arrived(nullptr);
    Thread& th = b->threads_[t];
    b->fn_(b->params_, th.ids, b->smem_, &Block::barrier, b);
    th.state = kDone;
    b->leaving(nullptr);  // returns to main_ through uc_link
  }
  static void barrier(void* ctx) {
    auto* b = static_cast<Block*>(ctx);
    Thread& th = b->threads_[b->current_];
    th.state = kAtBarrier;
    b->leaving(&th.asan_fake);
    CHECK(swapcontext(&th.ctx, &b->main_) == 0) << "twin runner: swapcontext failed";
    b->arrived(th.asan_fake);
  }

  // The main context hands over to thread t and takes back over when it yields or ends.
  void switch_to(size_t t) {
    Thread& th = threads_[t];
#ifdef BG_FIBER_ASAN
    __sanitizer_start_switch_fiber(&main_fake_, th.stack.get(), kStackBytes);
#endif
#ifdef BG_FIBER_TSAN
    __tsan_switch_to_fiber(th.tsan, 0);
#endif
    CHECK(swapcontext(&main_, &th.ctx) == 0) << "twin runner: swapcontext failed";
#ifdef BG_FIBER_ASAN
    __sanitizer_finish_switch_fiber(main_fake_, nullptr, nullptr);
#endif
  }
  // A fiber about to give the host thread back to the main context (`fake` null: for good).
  void leaving(void** fake) {
#ifdef BG_FIBER_ASAN
    __sanitizer_start_switch_fiber(fake, main_bottom_, main_size_);
#else
    (void)fake;
#endif
#ifdef BG_FIBER_TSAN
    __tsan_switch_to_fiber(main_tsan_, 0);
#endif
  }
  // A fiber that has just been switched to.
  void arrived(void* fake) {
#ifdef BG_FIBER_ASAN
    __sanitizer_finish_switch_fiber(fake, &main_bottom_, &main_size_);
#else
    (void)fake;
#endif
  }

  ThreadTwin fn_;
  const uint8_t* params_;
  uint8_t* smem_;
  uint32_t dims_[3];
  std::vector<Thread> threads_;
  size_t current_ = 0;
  ucontext_t main_;
  void* main_fake_ = nullptr;
  const void* main_bottom_ = nullptr;
  size_t main_size_ = 0;
  void* main_tsan_ = nullptr;
};

}  // namespace

void run_twin(void (*twin)(),
              bool per_thread,
              int64_t smem_bytes,
              const uint8_t* params,
              const uint32_t grid[3],
              const uint32_t block[3]) {
  if (!per_thread) {
    reinterpret_cast<GridTwin>(twin)(params, grid, block);
    return;
  }
  std::vector<uint8_t> smem(static_cast<size_t>(std::max<int64_t>(smem_bytes, 16)));
  Block b(reinterpret_cast<ThreadTwin>(twin), params, block, smem.data());
  uint32_t gidx[3];
  for (gidx[2] = 0; gidx[2] < grid[2]; gidx[2]++)
    for (gidx[1] = 0; gidx[1] < grid[1]; gidx[1]++)
      for (gidx[0] = 0; gidx[0] < grid[0]; gidx[0]++) {
        std::fill(smem.begin(), smem.end(), uint8_t{0xff});
        b.run(gidx);
      }
}

}  // namespace baregrad::mock
