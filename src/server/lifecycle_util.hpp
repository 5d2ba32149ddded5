#pragma once

// Private to src/server: pieces the cleanup, launch and teardown share.

#include <specctl/remote/host_ops.hpp>
#include <specctl/server/gpus.hpp>
#include <specctl/server/lifecycle.hpp>
#include <specctl/util/reporter.hpp>

#include <chrono>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace specctl::server::detail {

// How often waits re-check a host: fast enough to notice in a second, slow enough for SSH round trips.
constexpr util::Duration k_process_poll = std::chrono::milliseconds{250};
constexpr util::Duration k_gpu_poll = std::chrono::seconds{1};
// After KILL, how long a process may take to disappear before we call it stuck.
constexpr util::Duration k_after_kill = std::chrono::seconds{10};

// "$HOME/x" -> "/root/x" as the host sees it.
std::expected<std::string, Error> resolve_state_dir(remote::Host& host, const std::string& dir);

// TERM the group and the tagged processes, wait `grace`, KILL what is left,
// wait for it to go. Returns the processes that were still there to be killed.
std::expected<std::vector<remote::ProcessInfo>, Error> stop_server(remote::Host& host, int pgid, const std::string& tag,
                                                                   util::Duration grace);

// Processes among `pids` still alive (zombies are dead).
std::expected<std::vector<remote::ProcessInfo>, Error> living(remote::Host& host, const std::vector<int>& pids);

std::string describe_process(const remote::ProcessInfo& info);
std::string describe_app(const ComputeApp& app);

// What a server's run directory records beside it (server.meta, one line of JSON).
struct ServerMeta {
  int port = 0;
  // nullopt: all GPUs.
  std::optional<std::vector<int>> gpus;
  // nullopt: written by a specctl without owners, whose run cannot be asked.
  std::optional<RunOwner> owner;
};
nlohmann::json meta_to_json(const ServerMeta& meta);
// Also reads the older "port=N gpus=..." line.
ServerMeta parse_meta(const std::string& text);

// /proc/PID/stat's start time on this machine; empty if there is no such process.
std::string start_ticks_of(int pid);
// Whether the owner's process lives, when it ran on this machine; nullopt when it
// ran elsewhere (its heartbeat on the host says then).
std::optional<bool> alive_here(const RunOwner& owner);

// Claims the port and the GPUs of `config` for the run asking (claim.cpp): another
// live run's claim makes the host busy (cleanup.busy: fail, or wait for it).
std::expected<void, Error> claim_host(remote::Host& host, const ServerConfig& config, const std::string& state_dir,
                                      const CleanupOptions& options, CleanupReport& report);
// Keeps this run's claims fresh through a long wait (a run on another machine is
// judged by their age).
void touch_claims(remote::Host& host, const std::string& state_dir, const RunOwner& owner);

// Sleeps in small steps; true when `cancel` was set meanwhile.
bool sleep_for(util::Duration duration, const std::atomic<bool>* cancel = nullptr);

} // namespace specctl::server::detail
