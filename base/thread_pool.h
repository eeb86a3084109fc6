// A fixed set of worker threads running one parallel-for at a time.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace baregrad {

// One iteration of a spin-wait loop: the PAUSE hint where the CPU has one.
inline void cpu_relax() {
#if defined(__x86_64__)
  __builtin_ia32_pause();
#endif
}

// Spins, then yields, for up to 2 ms while `busy()`; false when it still is (then block). Work
// usually follows work within microseconds (one kernel after the other), and waking a sleeping
// vCPU through a futex costs ~50-100 us in a VM: more than a small kernel.
template <class F>
bool spin_while(F busy) {
  auto start = std::chrono::steady_clock::now();
  for (uint32_t i = 0; busy(); i++) {
    if (i < 512) {
      cpu_relax();
    } else if ((i & 15) != 0 ||
               std::chrono::steady_clock::now() - start < std::chrono::milliseconds(2)) {
      std::this_thread::yield();
    } else {
      return false;
    }
  }
  return true;
}

class ThreadPool {
 public:
  // `threads` workers including the caller (so threads - 1 are spawned).
  explicit ThreadPool(int threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int threads() const { return static_cast<int>(workers_.size()) + 1; }
  // Splits [0, n) into at most threads() contiguous chunks, runs fn(lo, hi) on each (the
  // caller takes the first) and returns when all are done. One call at a time per pool.
  void parallel_for(int64_t n, const std::function<void(int64_t, int64_t)>& fn);

 private:
  void worker(int index);

  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::condition_variable start_cv_, done_cv_;
  // Written under mu_ before generation_ is bumped (release); read after it is seen (acquire).
  const std::function<void(int64_t, int64_t)>* fn_ = nullptr;
  int64_t n_ = 0;
  int chunks_ = 0;
  std::atomic<uint64_t> generation_ = 0;
  std::atomic<int> pending_ = 0;
  std::atomic<bool> stop_ = false;
  std::mutex call_mu_;
};

}  // namespace baregrad
