#pragma once

// Private to src/server: pieces the cleanup, launch and teardown share.

#include <specctl/remote/host_ops.hpp>
#include <specctl/server/gpus.hpp>
#include <specctl/util/reporter.hpp>

#include <chrono>
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

// Sleeps in small steps; true when `cancel` was set meanwhile.
bool sleep_for(util::Duration duration, const std::atomic<bool>* cancel = nullptr);

} // namespace specctl::server::detail
