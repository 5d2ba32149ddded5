#pragma once

#include <specctl/sim/gpu_state.hpp>

#include <chrono>
#include <span>
#include <string>
#include <vector>

namespace specctl::sim {

// What the fake nvidia-smi sees: the GPUs and the live processes on them.
struct SmiSnapshot {
  GpuConfig config;
  std::vector<AppEntry> apps;
  std::chrono::system_clock::time_point now = std::chrono::system_clock::now();
};

struct SmiOutput {
  int exit_code = 0;
  std::string out;
  std::string err;
};

// nvidia-smi's answer to `args` (without the program name), in the real
// tool's formats and exit codes: --query-compute-apps=..., --query-gpu=...,
// --format=csv[,noheader][,nounits], -i/--id, -L, and the default table.
SmiOutput render_nvidia_smi(std::span<const std::string> args, const SmiSnapshot& snapshot);

// Reads the state directory ($SPECSIM_GPU_DIR or the default), prints, and
// returns the exit code.
int run_nvidia_smi(std::span<const std::string> args);

} // namespace specctl::sim
