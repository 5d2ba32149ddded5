#pragma once

// The fake GPUs' power, clocks and energy (docs/specsim.md "Power, clocks and energy").
//
// The model: what one GPU draws during a forward pass over n tokens, and how a power
// limit below that lowers the clocks and stretches the pass. The files: each server
// publishes what its GPUs draw above the idle floor in DIR/power/PID; the fake
// nvidia-smi adds the floor and every live server's share, and keeps each GPU's energy
// counter monotonic: a server that is gone (even by kill -9) leaves its energy in
// DIR/power/base, and DIR/power/counters holds the highest value each GPU reported.

#include <specctl/sim/gpu_state.hpp>

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <vector>

namespace specctl::sim {

// NVML's clock-event reason bits (nvmlClocksEventReason*, formerly
// nvmlClocksThrottleReason*, in nvml.h).
inline constexpr std::uint64_t k_reason_gpu_idle = 0x1;
inline constexpr std::uint64_t k_reason_applications_clocks = 0x2;
inline constexpr std::uint64_t k_reason_sw_power_cap = 0x4;
inline constexpr std::uint64_t k_reason_hw_slowdown = 0x8;
inline constexpr std::uint64_t k_reason_sync_boost = 0x10;
inline constexpr std::uint64_t k_reason_sw_thermal = 0x20;
inline constexpr std::uint64_t k_reason_hw_thermal = 0x40;
inline constexpr std::uint64_t k_reason_hw_power_brake = 0x80;
inline constexpr std::uint64_t k_reason_display_clocks = 0x100;
// clocks_event_reasons.supported: every reason above.
inline constexpr std::uint64_t k_reasons_supported = 0x1ff;

// One GPU's power figures: an H200 SXM's (700 W TDP, 1980 MHz maximum SM clock;
// the idle floor and idle clock are assumptions, see docs/specsim.md).
struct PowerSpec {
  double idle_w = 75.0;
  // What the busiest pass approaches, uncapped.
  double tdp_w = 700.0;
  // The enforced limit (the GPU folder's power_limit_w).
  double limit_w = 700.0;
  double max_sm_mhz = 1980.0;
  double idle_sm_mhz = 345.0;
};

PowerSpec power_spec(const GpuConfig& config);

// What one GPU draws, uncapped, during a forward pass over `tokens` tokens (a decode
// step: the batch times the tokens each request verifies; a prefill: its computed
// prompt tokens): from a third of the way above idle for one token (the weights
// streamed from memory) towards 95% of the TDP for large passes (compute bound).
double pass_power_w(long tokens, const PowerSpec& spec);

// A pass under a power limit.
struct PassPower {
  double power_w = 0.0;
  double sm_mhz = 0.0;
  // The pass's duration factor: maximum clock / clock.
  double slowdown = 1.0;
  bool capped = false;
};

// A pass that would draw `demand_w` under `limit_w`: when it does not fit, the clock
// drops until the draw above idle fits (the draw above idle taken as proportional to
// the clock), and the pass takes max clock / clock times as long.
PassPower limit_pass(double demand_w, double limit_w, const PowerSpec& spec);

// temperature.gpu at a mean draw: warming mildly with power, never throttling.
double gpu_temperature_c(double power_w, const PowerSpec& spec);

// One GPU as nvidia-smi reports it at an instant.
struct GpuReading {
  // power.draw (and power.draw.average): the mean over the last second, as Ampere
  // and later report it; power.draw.instant: now.
  double power_w = 0.0;
  double instant_w = 0.0;
  // power.limit and enforced.power.limit.
  double limit_w = 0.0;
  // total_energy_consumption: mJ since the GPU folder's epoch (the "driver load").
  double energy_mj = 0.0;
  double util_pct = 0.0;
  double memory_util_pct = 0.0;
  double sm_mhz = 0.0;
  std::uint64_t reasons = k_reason_gpu_idle;
  double temperature_c = 0.0;
};

// A GPU nothing runs on.
GpuReading idle_reading(const PowerSpec& spec);

// What one server publishes in DIR/power/PID: the same figures for each of its GPUs
// (tensor-parallel ranks step in lockstep), above the idle floor.
struct PowerRecord {
  pid_t pid = 0;
  // Field 22 of /proc/PID/stat: a recycled pid is not mistaken for the server.
  unsigned long long start_time = 0;
  std::int64_t stamp_unix_ms = 0;
  std::vector<int> gpus{};
  // Energy above idle since the server started, and the draw above idle now and as a
  // mean over the last second.
  double extra_energy_mj = 0.0;
  double extra_power_w = 0.0;
  double extra_power_avg_w = 0.0;
  // Share of the last second spent stepping.
  double util_pct = 0.0;
  double sm_mhz = 0.0;
  std::uint64_t reasons = k_reason_gpu_idle;
  double limit_w = 0.0;
};

std::int64_t unix_ms(std::chrono::system_clock::time_point when);

// Replaces DIR/power/PID atomically (a reader sees the old record or the new one).
void write_power_record(const std::filesystem::path& gpu_dir, const PowerRecord& record);
std::optional<PowerRecord> read_power_record(const std::filesystem::path& file);
// A server that ends: its energy goes into DIR/power/base and its file away, under the lock.
void retire_power_record(const std::filesystem::path& gpu_dir, const PowerRecord& record);

// Every GPU of the folder at `now`: the idle floor since the epoch, the energy of
// servers gone, each live server's share (its last record, its draw extrapolated to
// `now` for at most a second), never less than the counter reported before. Records
// of servers gone are folded into the base first. `own`: the calling server's exact
// figures, used instead of its file.
std::vector<GpuReading> read_gpu_power(const std::filesystem::path& gpu_dir, int gpu_count, const PowerSpec& spec,
                                       std::chrono::system_clock::time_point now, const PowerRecord* own = nullptr);

} // namespace specctl::sim
