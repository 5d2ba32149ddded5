#pragma once

#include <specctl/server/server_template.hpp>
#include <specctl/util/diagnostics.hpp>
#include <specctl/util/duration.hpp>
#include <specctl/util/json_box.hpp>

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace specctl::server {

enum class CleanupPolicy { kill, wait, fail };
// What a launch does when a live specctl run's server holds its port or GPUs.
enum class BusyPolicy { fail, wait };

struct CleanupSpec {
  CleanupPolicy policy = CleanupPolicy::kill;
  // Process names (globs) that may be killed; empty means the template's process_names.
  std::vector<std::string> allow;
  std::uint64_t gpu_free_below_mib = 1024;
  util::Duration grace = std::chrono::seconds{15};
  util::Duration timeout = std::chrono::minutes{5};
  // A live run's server is never touched: fail at once, or wait up to `timeout` for it to go.
  BusyPolicy busy = BusyPolicy::fail;
};

struct HealthSpec {
  util::Duration timeout = std::chrono::minutes{30};
  util::Duration interval = std::chrono::seconds{5};
  // No load progress (log growth, progress bar) for this long is a stall.
  util::Duration stall = std::chrono::minutes{10};
  std::optional<std::string> path;
};

// A knob value as written, typed and checked against the variant's template.
struct KnobSetting {
  util::JsonBox value;
  util::Location where;
  // Set by the template's derive rule rather than by the user.
  bool derived = false;
};

// One fully resolved server configuration: defaults merged with a variant and its matrix point.
struct ServerConfig {
  std::shared_ptr<const server::ServerTemplate> tmpl;
  std::string host;
  std::string model;
  int port = 0;
  std::string listen = "127.0.0.1";
  std::map<std::string, KnobSetting> knobs;
  std::vector<std::string> extra_args;
  std::vector<std::pair<std::string, std::string>> env;
  std::optional<std::vector<int>> gpus;
  HealthSpec health;
  CleanupSpec cleanup;
  util::Duration warmup_timeout = std::chrono::minutes{10};
  // The most of the server log copied into the result folder: past it, its first MiB
  // and its last (log_keep - 1 MiB), with a line saying what was cut (remote::copy_back).
  std::uint64_t log_keep_mib = 64;
};

} // namespace specctl::server
