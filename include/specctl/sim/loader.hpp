#pragma once

#include <specctl/sim/gpu_state.hpp>
#include <specctl/sim/log.hpp>
#include <specctl/sim/options.hpp>
#include <specctl/sim/perf_model.hpp>
#include <specctl/sim/workers.hpp>

#include <optional>

namespace specctl::sim {

// Per-GPU memory of one server, in GiB, derived from the profile, the tp size,
// --mem-fraction-static and the GPU size, as SGLang's memory pool sizes it.
struct MemoryPlan {
  double total_gib = 0.0;
  double context_gib = 0.0;
  double weights_gib = 0.0;
  double draft_gib = 0.0;
  double kv_gib = 0.0;
  double graph_gib = 0.0;
  long kv_tokens = 0;

  double used_gib() const { return context_gib + weights_gib + draft_gib + kv_gib + graph_gib; }
};

MemoryPlan plan_memory(const PerfModel& model, const GpuConfig& gpus);

// Plays the model load across --sim-load-time (divided by --sim-speed): the
// log lines and tqdm bars SGLang prints, and the workers' memory growing.
// Returns nullopt when loaded, or the exit code of a staged load fault
// (crash-load, oom); the hang fault never returns.
std::optional<int> run_load(const Options& options, const PerfModel& model, const MemoryPlan& memory, const Log& log,
                            WorkerPool& workers);

enum class CrashSite { loading, serving };

// The lines of a scheduler crash (traceback, then the main process noticing),
// printed by the crash-load and die-after faults.
void log_scheduler_crash(const Log& log, CrashSite site, std::string_view exception_line);

} // namespace specctl::sim
