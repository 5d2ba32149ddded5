#pragma once

// specsim's stand-in for DCGM's `dcgmi dmon`, reading the same fake GPUs as its
// nvidia-smi (the same instant's power, energy, clocks and memory).

#include <specctl/sim/nvidia_smi.hpp>

#include <chrono>
#include <expected>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace specctl::sim {

// `dmon -e IDS [-d MS] [-c N] [-i GPUS]` (and the long forms --field-id, --delay,
// --count, --entity-id).
struct DmonRequest {
  std::vector<int> fields;
  std::chrono::milliseconds delay{1000};
  // 0: until SIGINT.
  int count = 0;
  std::optional<std::string> entities;
};
std::expected<DmonRequest, std::string> parse_dmon(std::span<const std::string> args);

// dmon's two header lines: "#Entity" and the fields' short names, "ID" and their units,
// padded as DCGM's DeviceMonitor::SetHeaderForOutput pads them.
std::string dmon_header(const DmonRequest& request);

// One block: a row per GPU selected, "GPU <i>" and each field's value as dmon prints
// it (doubles with three decimals, integers, N/A for a blank).
SmiOutput dmon_block(const DmonRequest& request, const SmiSnapshot& snapshot);

// `specsim dcgmi ARGS` (or specsim through a link named dcgmi): the loop, its header
// again every 14 blocks; SIGINT ends it after its line "dmon was stopped ...", exit 0;
// SIGTERM kills it, as it does the real one.
int run_dcgmi(std::span<const std::string> args);

} // namespace specctl::sim
