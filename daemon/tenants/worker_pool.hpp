// A fixed number of threads, each running one job at a time: the connection budget made threads.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace outboxd::daemon::tenants {

// Each job holds at most one database connection while it runs, so the
// number of workers bounds the daemon's connections (with the listeners).
// A job that blocks (a database that does not answer, a connect that waits
// for its timeout) holds only its own worker.
class WorkerPool {
 public:
  explicit WorkerPool(std::size_t workers);
  ~WorkerPool();  // join(): the jobs submitted so far run to their end
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  // Runs on the next free worker. The caller counts its jobs (a job's
  // report may reach it before its worker is free again; the job waits that long).
  void submit(std::function<void()> job);
  std::size_t size() const { return threads_.size(); }
  void join();

 private:
  void work();

  mutable std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<std::function<void()>> jobs_;  // guarded by mutex_
  bool closing_ = false;                    // guarded by mutex_
  std::vector<std::thread> threads_;
};

}  // namespace outboxd::daemon::tenants
