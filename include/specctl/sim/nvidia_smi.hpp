#pragma once

#include <specctl/sim/gpu_power.hpp>
#include <specctl/sim/gpu_state.hpp>

#include <chrono>
#include <expected>
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace specctl::sim {

// What the fake nvidia-smi sees at one instant: the GPUs, the live processes on
// them, and each GPU's power, clocks and energy.
struct SmiSnapshot {
  GpuConfig config;
  std::vector<AppEntry> apps;
  // By GPU index (read_gpu_power); a GPU beyond it reads as idle with a zero counter.
  std::vector<GpuReading> gpus{};
  std::chrono::system_clock::time_point now = std::chrono::system_clock::now();
};

// Samples the GPU state directory ($SPECSIM_GPU_DIR or the default) at the
// instant of each call: nvidia-smi's and dcgmi's one source.
class GpuSampler {
public:
  // The directory's GPU configuration, or why it cannot be read.
  static std::expected<GpuSampler, std::string> open();
  SmiSnapshot sample() const;

private:
  GpuSampler(std::filesystem::path dir, GpuConfig config)
      : m_dir(std::move(dir)), m_config(std::move(config)), m_spec(power_spec(m_config)) {}
  std::filesystem::path m_dir;
  GpuConfig m_config;
  PowerSpec m_spec;
};

struct SmiOutput {
  int exit_code = 0;
  std::string out;
  std::string err;
};

// nvidia-smi's answer to `args` (without the program name), in the real
// tool's formats and exit codes: --query-compute-apps=..., --query-gpu=...,
// --format=csv[,noheader][,nounits], -i/--id, -L, and the default table. One
// block: the loop flags are accepted here and looped by run_nvidia_smi.
SmiOutput render_nvidia_smi(std::span<const std::string> args, const SmiSnapshot& snapshot);

// The interval of -lms N / --loop-ms=N (milliseconds) or -l [N] / --loop=N (seconds,
// 5 without a number); nullopt when the arguments ask for one answer (or are invalid:
// render_nvidia_smi says why).
std::optional<std::chrono::milliseconds> smi_loop_interval(std::span<const std::string> args);

// Reads the state directory ($SPECSIM_GPU_DIR or the default), prints, and
// returns the exit code. With a loop flag: a block every interval, each sampled
// at its own instant and written whole (the CSV header once, first), until SIGINT
// or SIGTERM; then exit 0.
int run_nvidia_smi(std::span<const std::string> args);

} // namespace specctl::sim
