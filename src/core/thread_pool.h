// A fixed pool of worker threads for the CPU backend's data-parallel loops.
//
// parallel_for splits [0, n) into contiguous chunks, runs them on the workers and the calling
// thread, and returns when all are done. One pool per process is enough: the CPU ops are called one
// at a time by the executor, so nested parallelism never happens (a nested call runs inline).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace roofline {

class ThreadPool {
 public:
  // num_threads <= 0: one per hardware thread.
  explicit ThreadPool(int num_threads = 0);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int num_threads() const { return static_cast<int>(workers_.size()) + 1; }

  // Calls fn(begin, end) over chunks of [0, n); chunks hold at least min_chunk items.
  void parallel_for(int64_t n, int64_t min_chunk, const std::function<void(int64_t, int64_t)>& fn);

  // The process-wide pool (sized once by set_default_num_threads or the hardware).
  static ThreadPool& global();
  static void set_default_num_threads(int n);

 private:
  void worker_loop(int index);

  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::condition_variable work_cv_;
  std::condition_variable done_cv_;
  const std::function<void(int64_t, int64_t)>* fn_ = nullptr;
  int64_t n_ = 0;
  int64_t chunk_ = 0;
  int64_t next_ = 0;
  int pending_ = 0;
  uint64_t generation_ = 0;
  bool stop_ = false;
  bool busy_ = false;
};

}  // namespace roofline
