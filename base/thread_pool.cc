#include "base/thread_pool.h"

#include <pthread.h>

#include <algorithm>

namespace baregrad {

ThreadPool::ThreadPool(int threads) {
  for (int i = 1; i < std::max(threads, 1); i++) workers_.emplace_back([this, i] { worker(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  start_cv_.notify_all();
  for (auto& t : workers_) t.join();
}

namespace {
std::pair<int64_t, int64_t> chunk(int64_t n, int chunks, int i) {
  return {n * i / chunks, n * (i + 1) / chunks};
}
}  // namespace

void ThreadPool::worker(int index) {
  pthread_setname_np(pthread_self(),
                     ("bg-pool-" + std::to_string(index)).c_str());  // for top, perf, gdb
  uint64_t seen = 0;
  for (;;) {
    const std::function<void(int64_t, int64_t)>* fn;
    int64_t n;
    int chunks;
    {
      std::unique_lock lock(mu_);
      start_cv_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
      fn = fn_;
      n = n_;
      chunks = chunks_;
    }
    if (index < chunks) {
      auto [lo, hi] = chunk(n, chunks, index);
      (*fn)(lo, hi);
    }
    std::lock_guard lock(mu_);
    if (--pending_ == 0) done_cv_.notify_one();
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
    pending_ = static_cast<int>(workers_.size());
    generation_++;
  }
  start_cv_.notify_all();
  auto [lo, hi] = chunk(n, chunks, 0);
  fn(lo, hi);
  std::unique_lock lock(mu_);
  done_cv_.wait(lock, [&] { return pending_ == 0; });
}

}  // namespace baregrad
