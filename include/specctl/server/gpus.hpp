#pragma once

#include <specctl/remote/host.hpp>

#include <cstdint>
#include <expected>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace specctl::server {

// One line of `nvidia-smi --query-gpu=index,uuid,memory.used,memory.total --format=csv,noheader,nounits`.
struct GpuInfo {
  int index = 0;
  std::string uuid;
  // nvidia-smi prints [N/A] when it cannot tell.
  std::optional<std::uint64_t> used_mib;
  std::optional<std::uint64_t> total_mib;
};

// One line of `nvidia-smi --query-compute-apps=pid,process_name,used_memory,gpu_uuid ...`, joined to its GPU.
struct ComputeApp {
  int pid = 0;
  std::string name;
  std::optional<std::uint64_t> used_mib;
  std::string gpu_uuid;
  std::optional<int> gpu_index;
};

struct GpuSnapshot {
  std::vector<GpuInfo> gpus;
  std::vector<ComputeApp> apps;
};

// Parsers of nvidia-smi's CSV (no header, no units). The error names the line that did not parse.
std::expected<std::vector<GpuInfo>, std::string> parse_gpu_query(std::string_view csv);
std::expected<std::vector<ComputeApp>, std::string> parse_compute_apps(std::string_view csv);

// Whether the host has nvidia-smi on PATH (a machine without GPUs, or a container
// without the driver's tools, has not: GPUs are then neither checked nor waited for).
std::expected<bool, Error> has_nvidia_smi(remote::Host& host);

// Asks nvidia-smi on the host, limited to `indices` when given (`-i 0,1`), and joins
// processes to GPUs by uuid (the compute-apps query has no index).
std::expected<GpuSnapshot, Error> query_gpus(remote::Host& host, const std::optional<std::vector<int>>& indices);

} // namespace specctl::server
