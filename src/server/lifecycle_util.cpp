#include "lifecycle_util.hpp"

#include <specctl/util/text.hpp>

#include <csignal>
#include <fmt/format.h>
#include <thread>

namespace specctl::server::detail {

std::expected<std::string, Error> resolve_state_dir(remote::Host& host, const std::string& dir) {
  if (!dir.starts_with("$HOME")) {
    return dir;
  }
  auto result = host.exec("printf '%s' \"$HOME\"");
  if (!result) {
    return std::unexpected(result.error());
  }
  if (result->out.empty() || result->out.front() != '/') {
    return std::unexpected(Error(fmt::format("{}: $HOME is not set", host.describe())));
  }
  return result->out + dir.substr(5);
}

std::expected<std::vector<remote::ProcessInfo>, Error> living(remote::Host& host, const std::vector<int>& pids) {
  auto infos = remote::process_info(host, pids);
  if (!infos) {
    return std::unexpected(infos.error());
  }
  std::erase_if(*infos, [](const remote::ProcessInfo& info) { return !info.alive(); });
  return infos;
}

bool sleep_for(util::Duration duration, const std::atomic<bool>* cancel) {
  auto end = std::chrono::steady_clock::now() + duration;
  while (std::chrono::steady_clock::now() < end) {
    if (cancel != nullptr && cancel->load()) {
      return true;
    }
    auto left = std::chrono::duration_cast<util::Duration>(end - std::chrono::steady_clock::now());
    std::this_thread::sleep_for(std::min(left, util::Duration{50}));
  }
  return cancel != nullptr && cancel->load();
}

std::expected<std::vector<remote::ProcessInfo>, Error> stop_server(remote::Host& host, int pgid, const std::string& tag,
                                                                   util::Duration grace) {
  // A recorded pid may since have been reused by someone else's process (the server
  // died long ago, a resumed run cleans up): signal the group only while its leader
  // still carries our tag. Members are found by tag either way.
  if (pgid > 1) {
    auto owner = remote::tag_of(host, pgid);
    if (!owner) {
      return std::unexpected(owner.error());
    }
    if (*owner != tag) {
      pgid = 0;
    }
  }
  auto members = [&]() -> std::expected<std::vector<int>, Error> {
    auto tagged = remote::find_tagged(host, tag);
    if (!tagged) {
      return std::unexpected(tagged.error());
    }
    if (pgid > 1) {
      tagged->push_back(pgid);
    }
    return tagged;
  };
  auto before = members();
  if (!before) {
    return std::unexpected(before.error());
  }
  // One TERM per process: the group's members get theirs from the group signal,
  // so only tagged processes that left the group are signalled by pid. A second
  // TERM is not a repeat of the first: llama.cpp and vLLM take it as "terminate
  // now" and skip their own shutdown (llama-server exit(1)s from its handler).
  auto infos = living(host, *before);
  if (!infos) {
    return std::unexpected(infos.error());
  }
  std::vector<int> outside;
  for (const auto& info : *infos) {
    if (pgid <= 1 || info.pgid != pgid) {
      outside.push_back(info.pid);
    }
  }
  if (pgid > 1) {
    if (auto sent = remote::signal_group(host, pgid, SIGTERM); !sent) {
      return std::unexpected(sent.error());
    }
  }
  if (auto sent = remote::signal_pids(host, outside, SIGTERM); !sent) {
    return std::unexpected(sent.error());
  }
  auto deadline = std::chrono::steady_clock::now() + grace;
  std::vector<remote::ProcessInfo> left;
  while (true) {
    auto now = members();
    if (!now) {
      return std::unexpected(now.error());
    }
    auto alive = living(host, *now);
    if (!alive) {
      return std::unexpected(alive.error());
    }
    left = *alive;
    if (left.empty() || std::chrono::steady_clock::now() >= deadline) {
      break;
    }
    sleep_for(k_process_poll);
  }
  if (left.empty()) {
    return left;
  }
  std::vector<int> pids;
  for (const auto& info : left) {
    pids.push_back(info.pid);
  }
  if (pgid > 1) {
    if (auto sent = remote::signal_group(host, pgid, SIGKILL); !sent) {
      return std::unexpected(sent.error());
    }
  }
  if (auto sent = remote::signal_pids(host, pids, SIGKILL); !sent) {
    return std::unexpected(sent.error());
  }
  auto kill_deadline = std::chrono::steady_clock::now() + k_after_kill;
  while (std::chrono::steady_clock::now() < kill_deadline) {
    auto alive = living(host, pids);
    if (!alive) {
      return std::unexpected(alive.error());
    }
    if (alive->empty()) {
      return left;
    }
    sleep_for(k_process_poll);
  }
  return std::unexpected(
      Error(fmt::format("{}: processes survived KILL: {}", host.describe(), describe_process(left.front()))));
}

std::string describe_process(const remote::ProcessInfo& info) {
  std::string args = info.args.size() > 80 ? info.args.substr(0, 77) + "..." : info.args;
  return fmt::format("pid {} ({})", info.pid, args.empty() ? info.name : args);
}

std::string describe_app(const ComputeApp& app) {
  return fmt::format("pid {} ({}, {} MiB on GPU {})", app.pid, app.name,
                     app.used_mib ? std::to_string(*app.used_mib) : "?",
                     app.gpu_index ? std::to_string(*app.gpu_index) : app.gpu_uuid);
}

} // namespace specctl::server::detail
