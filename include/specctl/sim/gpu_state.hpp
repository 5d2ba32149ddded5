#pragma once

#include <sys/types.h>

#include <cstdint>
#include <expected>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace specctl::sim {

// The fake GPUs of one machine, read from DIR/config ("key=value" lines;
// every key optional): count, memory_total_mib, name, driver_version,
// cuda_version, uuid_seed, power_limit_w, energy_counter. Defaults: eight H200s.
struct GpuConfig {
  int count = 8;
  long memory_total_mib = 143771;
  std::string name = "NVIDIA H200";
  std::string driver_version = "570.124.06";
  std::string cuda_version = "12.8";
  std::uint64_t uuid_seed = 0;
  // The enforced power limit in W (the H200 SXM's 700 W TDP; 200 to 2000 accepted),
  // and whether total_energy_consumption has a value
  // (Volta and later; without, it prints [Not Supported] as an older GPU's does).
  long power_limit_w = 700;
  bool energy_counter = true;
};

std::expected<GpuConfig, std::string> load_gpu_config(const std::filesystem::path& dir);

// Stable per index (and uuid_seed): "GPU-1a2b3c4d-....".
std::string gpu_uuid(const GpuConfig& config, int index);
// "00000000:18:00.0", as on an 8-GPU HGX board.
std::string gpu_bus_id(int index);

// One process holding GPU memory, as a worker registers it in DIR/apps/PID.
struct AppEntry {
  pid_t pid = 0;
  std::string name{};
  int gpu = 0;
  long used_mib = 0;
  // Field 22 of /proc/PID/stat, so a recycled pid is not mistaken for the worker.
  unsigned long long start_time = 0;
};

// The state directory: the --sim-gpu-dir value, else $SPECSIM_GPU_DIR, else
// $TMPDIR/specsim-gpus-UID (so a server and a bare `nvidia-smi` agree).
std::filesystem::path resolve_gpu_dir(std::string_view flag_value);

std::expected<void, std::string> write_app_entry(const std::filesystem::path& dir, const AppEntry& entry);
void remove_app_entry(const std::filesystem::path& dir, pid_t pid);
// Every registered entry whose process still lives (not gone, not a zombie,
// same start time), sorted by GPU then pid.
std::vector<AppEntry> live_app_entries(const std::filesystem::path& dir);

// The start time of a live, non-zombie process; nullopt otherwise.
std::optional<unsigned long long> process_start_time(pid_t pid);

} // namespace specctl::sim
