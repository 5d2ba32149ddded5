#pragma once

#include <specctl/remote/host.hpp>
#include <specctl/remote/host_ops.hpp>
#include <specctl/server/render.hpp>
#include <specctl/server/server_config.hpp>
#include <specctl/util/reporter.hpp>

#include <atomic>
#include <string>
#include <vector>

namespace specctl::server {

// Where specctl keeps its servers' run directories on a host (pid, log, exit code, meta).
// A shell word: "$HOME" is expanded on the host.
inline constexpr const char* k_default_state_dir = "$HOME/.specctl/servers";

// The specctl run a server belongs to, recorded beside the server (server.meta) so
// that another run's cleanup tells a live run's server, which it never touches, from
// one a dead run left behind.
struct RunOwner {
  // The machine the run's specctl process runs on: its hostname and boot id.
  std::string coordinator;
  std::string boot_id;
  int pid = 0;
  // The process's start time (/proc/PID/stat, clock ticks after boot): a pid reused
  // by another process does not pass for the run.
  std::string start_ticks;
  // UTC, when the run started.
  std::string since;
  std::string experiment;
  // The run's result folder, absolute.
  std::string results;

  // This process, running `experiment` into `results` (both may be empty).
  static RunOwner this_process(std::string experiment = "", std::string results = "");
  // True when `other` names the same process.
  bool same_process(const RunOwner& other) const;
  // "specctl run quickstart (pid 1234 on laptop, since 2026-12-02 04:40 UTC, results/...)".
  std::string describe() const;
};

// A run touches its server's heartbeat (remote::RunFiles::heartbeat) at every poll; a
// run on another machine is alive while the heartbeat is fresher than this.
inline constexpr util::Duration k_owner_heartbeat_stale = std::chrono::minutes{2};

// What the cleanup before a launch did and saw.
struct CleanupReport {
  // "stopped ...", "killed ...": every process touched, by pid and name.
  std::vector<std::string> actions;
  // Processes on our GPUs that the policy did not allow to touch.
  std::vector<std::string> left_alone;
  bool gpus_checked = false;
};

struct CleanupOptions {
  std::string state_dir = k_default_state_dir;
  // Only describe what would be done (specctl plan --probe).
  bool dry_run = false;
  // The run asking: its own earlier servers are not another run's.
  RunOwner owner = RunOwner::this_process();
  // Set from elsewhere, stops a wait for a busy host.
  const std::atomic<bool>* cancel = nullptr;
  // The tag the server will have: another machine's run tells a live claim by its heartbeat.
  std::string tag = {};
};

// Gets a host ready for a server: claims its port and GPUs for this run (atomically:
// runs started at the same instant cannot both hold them; release_claims gives them
// back), stops the servers dead specctl runs left that would
// collide (same port or GPUs), applies the cleanup policy to GPU processes, waits
// for GPU memory to drop below the threshold, and makes sure the port is free.
// Never touches a process the policy does not name, nor any process of a live run's
// server: a live run holding the port (or, where both name their GPUs, a GPU) makes
// the host busy (cleanup.busy: fail, or wait for it). Without GPU lists only ports collide.
std::expected<CleanupReport, Error> cleanup_before_launch(remote::Host& host, const ServerConfig& config,
                                                          const CleanupOptions& options, util::Reporter& reporter);

struct RunningServer {
  std::string tag;
  remote::RunFiles files;
  int pid = 0;
  // Port on this machine that reaches the server (through the tunnel for SSH hosts).
  int local_port = 0;
  std::string base_url() const;
};

// Starts the server detached, tagged, logging to its run directory, and opens the tunnel.
// The run directory records the port, the GPUs and `owner`.
std::expected<RunningServer, Error> launch(remote::Host& host, const ServerConfig& config, const LaunchCommand& command,
                                           const std::string& tag, const std::string& state_dir = k_default_state_dir,
                                           const RunOwner& owner = RunOwner::this_process());

// Gives back the claims this run holds on the port and GPUs of `config` (after its teardown).
std::expected<void, Error> release_claims(remote::Host& host, const ServerConfig& config, const std::string& state_dir,
                                          const RunOwner& owner);

// Whether every socket listening on `port` is the server's own (SO_REUSEPORT lets
// other servers bind it too): an error naming the others when a request could reach
// another server; a warning (non-empty) when the holder cannot be told, as behind a
// container's proxy; empty when verified.
std::expected<std::string, Error> check_port_is_ours(remote::Host& host, const RunningServer& server, int port);

struct LoadReport {
  util::Duration load_time{0};
  // Milestones of the load (template log patterns) and when they appeared, from launch.
  std::vector<std::pair<std::string, util::Duration>> milestones;
  std::vector<std::string> log_tail;
};

// Waits until the server is ready: health answers 200 (and the template's ready line
// appeared, if it has one). Fails within a poll when the process exits or a fatal line
// appears; times out after health.timeout or health.stall without progress. Errors
// quote the fatal line and the last log lines. `cancel` set from elsewhere stops it.
std::expected<LoadReport, Error> wait_ready(remote::Host& host, const RunningServer& server, const ServerConfig& config,
                                            util::Reporter& reporter, const std::atomic<bool>* cancel = nullptr);

struct TeardownReport {
  // Workers that had left the process group and were killed by tag, by pid and name.
  std::vector<std::string> escaped;
  // Processes still there when the grace after TERM ran out, killed with KILL.
  std::vector<std::string> killed;
  bool gpus_released = true;
};

// One TERM to the process group (and to tagged workers that escaped it), grace,
// then KILL, naming what needed it; then check that the GPUs are released.
std::expected<TeardownReport, Error> teardown(remote::Host& host, const RunningServer& server,
                                              const ServerConfig& config, util::Reporter& reporter);

} // namespace specctl::server
