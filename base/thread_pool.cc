#include "base/thread_pool.h"

#include <pthread.h>

#include <algorithm>
#include <chrono>

namespace baregrad {

namespace {

std::pair<int64_t, int64_t> chunk(int64_t n, int chunks, int i) {
  return {n * i / chunks, n * (i + 1) / chunks};
}

}  // namespace

ThreadPool::ThreadPool(int threads) {
  for (int i = 1; i < std::max(threads, 1); i++) workers_.emplace_back([this, i] { worker(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard lock(mu_);
    stop_.store(true, std::memory_order_release);
  }
  start_cv_.notify_all();
  for (auto& t : workers_) t.join();
}

void ThreadPool::worker(int index) {
  pthread_setname_np(pthread_self(),
                     ("bg-pool-" + std::to_string(index)).c_str());  // for top, perf, gdb
  uint64_t seen = 0;
  auto idle = [&] {
    return !stop_.load(std::memory_order_acquire) &&
           generation_.load(std::memory_order_acquire) == seen;
  };
  for (;;) {
    if (!spin_while(idle)) {
      std::unique_lock lock(mu_);
      start_cv_.wait(lock, [&] { return !idle(); });
    }
    if (stop_.load(std::memory_order_acquire)) return;
    seen = generation_.load(std::memory_order_acquire);
    const std::function<void(int64_t, int64_t)>* fn;
    int64_t n;
    int chunks;
    {
      std::lock_guard lock(mu_);
      fn = fn_;
      n = n_;
      chunks = chunks_;
    }
    if (index < chunks) {
      auto [lo, hi] = chunk(n, chunks, index);
      (*fn)(lo, hi);
    }
    if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      std::lock_guard lock(mu_);  // the caller checks pending_ under mu_ before it sleeps
      done_cv_.notify_one();
    }
  }
}

void ThreadPool::parallel_for(int64_t n, const std::function<void(int64_t, int64_t)>& fn) {
  int chunks = static_cast<int>(std::min<int64_t>(threads(), std::max<int64_t>(n, 1)));
  if (chunks == 1 || workers_.empty()) {
    fn(0, n);
    return;
  }
  std::lock_guard call(call_mu_);
  {
    std::lock_guard lock(mu_);
    fn_ = &fn;
    n_ = n;
    chunks_ = chunks;
    pending_.store(static_cast<int>(workers_.size()), std::memory_order_relaxed);
    generation_.fetch_add(1, std::memory_order_acq_rel);
  }
  start_cv_.notify_all();
  auto [lo, hi] = chunk(n, chunks, 0);
  fn(lo, hi);
  auto busy = [&] { return pending_.load(std::memory_order_acquire) != 0; };
  if (spin_while(busy)) return;
  std::unique_lock lock(mu_);
  done_cv_.wait(lock, [&] { return !busy(); });
}

}  // namespace baregrad
