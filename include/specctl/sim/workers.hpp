#pragma once

#include <specctl/util/unique_fd.hpp>

#include <sys/types.h>

#include <expected>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace specctl::sim {

// Whether TP workers stay tied to the server or detach into their own session.
enum class Detach { no, yes };

// The TP worker processes of one server, each a re-executed specsim named
// like the engine's (SGLang's `sglang::scheduler_TP0`, vLLM's `VLLM::Worker_TP0`), registered in the GPU
// state directory with the "memory" it holds while it lives. The server
// writes the entries itself, so nvidia-smi agrees with the log the moment a
// line is printed; nvidia-smi counts an entry only while its process lives.
// A worker watches a pipe from the server: at end-of-file (the server died) a
// tied worker removes its entry and exits (PR_SET_PDEATHSIG backs this up),
// while a detached one (the orphan fault) lives on, as real SGLang schedulers
// re-parented to init do.
class WorkerPool {
public:
  WorkerPool() = default;
  WorkerPool(WorkerPool&&) = default;
  WorkerPool& operator=(WorkerPool&&) = default;
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;
  // Closes the pipes; waits (bounded) for tied workers to exit.
  ~WorkerPool();

  // One worker per name (rank i is names[i]; the name is its whole argv, as
  // the engine's setproctitle leaves it). GPUs follow CUDA_VISIBLE_DEVICES
  // when set, else rank i uses GPU i.
  static std::expected<WorkerPool, std::string> spawn(const std::vector<std::string>& names, int gpu_count,
                                                      const std::filesystem::path& state_dir, Detach detach);

  // The GPU of each worker, by rank.
  std::vector<int> gpus() const;
  // Sets the memory every live worker holds, in MiB.
  void set_used_mib(long mib);
  // Reaps exited workers and returns the rank of one that died, if any.
  std::optional<int> reap_dead();

private:
  struct Worker {
    pid_t pid = 0;
    int rank = 0;
    int gpu = 0;
    unsigned long long start_time = 0;
    std::string name{};
    util::UniqueFd pipe{};
    bool reaped = false;
  };

  std::vector<Worker> m_workers;
  std::filesystem::path m_state_dir;
  Detach m_detach = Detach::no;
};

// True in a process started by WorkerPool::spawn.
bool is_worker_process();
// The worker's whole life; returns its exit code.
int run_worker();

} // namespace specctl::sim
