// ThreadPool implementation: one generation counter wakes the workers for each parallel_for;
// work is handed out in chunks from a shared cursor so uneven chunks balance themselves.
#include "core/thread_pool.h"

#include <algorithm>
#include <atomic>

namespace roofline {

namespace {
std::atomic<int> g_default_threads{0};
}

ThreadPool::ThreadPool(int num_threads) {
  if (num_threads <= 0)
    num_threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  for (int i = 0; i + 1 < num_threads; ++i) workers_.emplace_back([this, i] { worker_loop(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  work_cv_.notify_all();
  for (auto& t : workers_) t.join();
}

void ThreadPool::worker_loop(int /*index*/) {
  uint64_t seen = 0;
  for (;;) {
    std::unique_lock<std::mutex> lock(mu_);
    work_cv_.wait(lock, [&] { return stop_ || generation_ != seen; });
    if (stop_) return;
    seen = generation_;
    for (;;) {
      if (next_ >= n_) break;
      int64_t begin = next_;
      int64_t end = std::min(n_, begin + chunk_);
      next_ = end;
      lock.unlock();
      (*fn_)(begin, end);
      lock.lock();
    }
    if (--pending_ == 0) done_cv_.notify_all();
  }
}

void ThreadPool::parallel_for(int64_t n, int64_t min_chunk,
                              const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  min_chunk = std::max<int64_t>(1, min_chunk);
  std::unique_lock<std::mutex> lock(mu_);
  if (workers_.empty() || n <= min_chunk || busy_) {  // serial, or nested: run inline
    lock.unlock();
    fn(0, n);
    return;
  }
  busy_ = true;
  int64_t parts = static_cast<int64_t>(workers_.size() + 1) * 4;
  chunk_ = std::max(min_chunk, (n + parts - 1) / parts);
  n_ = n;
  next_ = 0;
  fn_ = &fn;
  pending_ = static_cast<int>(workers_.size()) + 1;
  ++generation_;
  work_cv_.notify_all();
  for (;;) {
    if (next_ >= n_) break;
    int64_t begin = next_;
    int64_t end = std::min(n_, begin + chunk_);
    next_ = end;
    lock.unlock();
    fn(begin, end);
    lock.lock();
  }
  --pending_;
  done_cv_.wait(lock, [&] { return pending_ == 0; });
  fn_ = nullptr;
  busy_ = false;
}

ThreadPool& ThreadPool::global() {
  static ThreadPool pool(g_default_threads.load());
  return pool;
}

void ThreadPool::set_default_num_threads(int n) { g_default_threads.store(n); }

}  // namespace roofline
