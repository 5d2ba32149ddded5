#pragma once

// The fake nvidia-smi's query fields: each one's header (with units, as
// `--format=csv` prints it) and how to render a value.

#include <specctl/sim/nvidia_smi.hpp>

#include <functional>
#include <optional>
#include <string>

namespace specctl::sim {

template <typename Row> struct Column {
  std::string header;
  std::function<std::string(const Row&, bool units)> value;
};

// One GPU of a --query-gpu answer.
struct GpuRow {
  int index = 0;
  long used_mib = 0;
  int processes = 0;
  GpuReading reading{};
};

// One process of a --query-compute-apps answer.
struct AppRow {
  const AppEntry* app = nullptr;
};

// The --query-gpu field `field`, or nullopt when this driver does not know it.
std::optional<Column<GpuRow>> gpu_column(const std::string& field, const SmiSnapshot& snapshot);
std::optional<Column<AppRow>> app_column(const std::string& field, const SmiSnapshot& snapshot);

// The driver's major version ("570.124.06" is 570; 0 when unreadable).
int driver_major(const GpuConfig& config);

} // namespace specctl::sim
