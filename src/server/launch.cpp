#include <specctl/server/lifecycle.hpp>

#include "health_poll.hpp"
#include "lifecycle_util.hpp"
#include "liveness.hpp"
#include "load_log.hpp"

#include <specctl/util/shell.hpp>
#include <specctl/util/text.hpp>

#include <fmt/format.h>
#include <set>

namespace specctl::server {

namespace {

using Clock = std::chrono::steady_clock;

// Log bytes read per poll: a chatty load must not stall the loop, the rest comes next time.
constexpr std::size_t k_log_chunk = 1024 * 1024;
// Polls in a row that may fail (a dropped connection) before the wait gives up on the host.
constexpr int k_max_failed_polls = 5;

std::string excerpt(const std::vector<std::string>& tail) {
  if (tail.empty()) {
    return "(the log is empty)";
  }
  std::string out = "last log lines:";
  for (const auto& line : tail) {
    out += "\n  | " + line;
  }
  return out;
}

util::Duration since(Clock::time_point start) {
  return std::chrono::duration_cast<util::Duration>(Clock::now() - start);
}

} // namespace

std::string RunningServer::base_url() const {
  return fmt::format("http://127.0.0.1:{}", local_port);
}

std::expected<RunningServer, Error> launch(remote::Host& host, const ServerConfig& config, const LaunchCommand& command,
                                           const std::string& tag, const std::string& state_dir,
                                           const RunOwner& owner) {
  auto dir = detail::resolve_state_dir(host, state_dir);
  if (!dir) {
    return std::unexpected(dir.error());
  }
  RunningServer server;
  server.tag = tag;
  server.files = remote::RunFiles{*dir + "/" + tag};
  // Recorded so a later cleanup knows which servers collide with a new one, and whose they are.
  std::string meta = detail::meta_to_json({config.port, config.gpus, owner})
                         .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  auto written = host.exec(fmt::format("mkdir -p {0} && printf '%s\\n' {1} > {0}/server.meta && touch {2}",
                                       util::shell_quote(server.files.dir), util::shell_quote(meta),
                                       util::shell_quote(server.files.heartbeat())));
  if (!written || written->exit_code != 0) {
    return std::unexpected(
        written ? Error(fmt::format("{}: cannot create {}: {}", host.describe(), server.files.dir, written->err))
                : written.error());
  }
  auto pid = remote::start_detached(host, {command.argv, command.env, server.files.dir, tag});
  if (!pid) {
    // A start cut short (a signal to the shell running it: scancel, Ctrl-C) may have
    // started the server all the same: nothing carrying its tag outlives the error.
    (void)detail::stop_server(host, 0, tag, config.cleanup.grace);
    return std::unexpected(pid.error());
  }
  server.pid = *pid;
  std::string target = config.listen == "0.0.0.0" || config.listen == "::" ? "127.0.0.1" : config.listen;
  auto port = host.open_tunnel(target, config.port);
  if (!port) {
    (void)detail::stop_server(host, server.pid, tag, config.cleanup.grace);
    return std::unexpected(port.error());
  }
  server.local_port = *port;
  return server;
}

std::expected<LoadReport, Error> wait_ready(remote::Host& host, const RunningServer& server, const ServerConfig& config,
                                            util::Reporter& reporter, const std::atomic<bool>* cancel) {
  const auto& tmpl = *config.tmpl;
  auto start = Clock::now();
  detail::LoadLog log(tmpl.log, fmt::format("{}: loading {}", host.describe(), server.tag), start, reporter);
  detail::HealthPoll health(server.base_url() + config.health.path.value_or(tmpl.health_path), config.health.interval);
  auto last_progress = start;
  int failed_polls = 0;
  auto fail = [&](std::string why, ErrorKind kind) {
    return std::unexpected(Error(fmt::format("{}: {}\n{}", host.describe(), why, excerpt(log.tail())), kind));
  };

  while (true) {
    if (cancel != nullptr && cancel->load()) {
      return fail("interrupted while the server was loading", ErrorKind::interrupted);
    }
    auto poll = remote::poll_server(host, server.files, server.pid, log.offset(), k_log_chunk);
    if (!poll) {
      // Watching is read-only, so a poll lost with a dropped connection is simply asked again
      // (the SSH host reconnects underneath); only a host that stays unreachable ends the wait.
      if (poll.error().kind() == ErrorKind::interrupted || ++failed_polls > k_max_failed_polls) {
        return std::unexpected(poll.error());
      }
      reporter.warning(fmt::format("{} (retrying)", poll.error().what()));
      detail::sleep_for(detail::k_process_poll, cancel);
      continue;
    }
    failed_polls = 0;
    if (!poll->log_bytes.empty()) {
      last_progress = Clock::now();
    }
    log.feed(poll->log_bytes);
    if (detail::has_ended(*poll)) {
      // The process may have written its last lines just before it ended.
      if (auto rest = remote::read_file_from(host, server.files.log(), log.offset(), k_log_chunk); rest) {
        log.feed_last(*rest);
      }
      std::string how = detail::how_it_ended(host, server.files, *poll);
      if (auto fatal = log.fatal_line()) {
        return fail(fmt::format("the server failed while loading ({}): {}", how, *fatal), ErrorKind::failed);
      }
      return fail(fmt::format("the server {} while loading (after {})", how, util::format_duration(since(start))),
                  ErrorKind::failed);
    }
    if (auto fatal = log.fatal_line()) {
      if (log.fatal_settled()) {
        // Still running after its fatal line (a hung engine): fail now, teardown stops it.
        return fail(fmt::format("the server failed while loading (still running): {}", *fatal), ErrorKind::failed);
      }
      detail::sleep_for(detail::k_process_poll, cancel);
      continue;
    }
    if (health.answered_ok() && log.ready()) {
      LoadReport report;
      report.load_time = since(start);
      report.milestones = log.milestones();
      report.log_tail = log.tail();
      reporter.info(
          fmt::format("{}: {} ready after {}", host.describe(), server.tag, util::format_duration(report.load_time)));
      return report;
    }
    if (since(start) >= config.health.timeout) {
      return fail(fmt::format("the server was not ready after {} (health.timeout)",
                              util::format_duration(config.health.timeout)),
                  ErrorKind::timed_out);
    }
    if (Clock::now() - last_progress >= config.health.stall) {
      return fail(fmt::format("the load made no progress for {} (health.stall): no new log output",
                              util::format_duration(config.health.stall)),
                  ErrorKind::timed_out);
    }
    detail::sleep_for(std::min(detail::k_process_poll, config.health.interval), cancel);
  }
}

std::expected<TeardownReport, Error> teardown(remote::Host& host, const RunningServer& server,
                                              const ServerConfig& config, util::Reporter& reporter) {
  TeardownReport report;
  // Workers that left the process group are found by tag while the tree is intact, and named.
  auto tagged = remote::find_tagged(host, server.tag);
  if (!tagged) {
    return std::unexpected(tagged.error());
  }
  auto members = detail::living(host, *tagged);
  if (!members) {
    return std::unexpected(members.error());
  }
  // A GPU telemetry sampler runs in a group of its own under the server's tag and
  // files (DIR/telemetry/): one a killed run left is stopped here without a warning.
  const std::string sampler_files = server.files.dir + "/telemetry/";
  std::set<int> sampler_groups;
  for (const auto& info : *members) {
    if (info.pgid != server.pid && info.args.find(sampler_files) != std::string::npos) {
      sampler_groups.insert(info.pgid);
    }
  }
  int samplers = 0;
  for (const auto& info : *members) {
    if (sampler_groups.contains(info.pgid)) {
      ++samplers;
    } else if (info.pgid != server.pid) {
      report.escaped.push_back(detail::describe_process(info));
    }
  }
  if (samplers > 0) {
    reporter.info(fmt::format("{}: stopping the GPU telemetry sampler left beside {}", host.describe(), server.tag));
  }
  auto stopped = detail::stop_server(host, server.pid, server.tag, config.cleanup.grace);
  if (!stopped) {
    return std::unexpected(stopped.error());
  }
  for (const auto& name : report.escaped) {
    reporter.warning(
        fmt::format("{}: stopped a worker that had left the server's process group: {}", host.describe(), name));
  }
  for (const auto& info : *stopped) {
    report.killed.push_back(detail::describe_process(info));
  }
  if (!report.killed.empty()) {
    reporter.warning(fmt::format("{}: {} did not stop within {} of TERM; killed {}", host.describe(), server.tag,
                                 util::format_duration(config.cleanup.grace), util::join(report.killed, ", ")));
  }
  host.exec(fmt::format("rm -f {}", util::shell_quote(server.files.pid())));

  if (auto smi = has_nvidia_smi(host); !smi || !*smi) {
    return report;
  }
  auto deadline = Clock::now() + config.cleanup.timeout;
  while (true) {
    auto snapshot = query_gpus(host, config.gpus);
    if (!snapshot) {
      return std::unexpected(snapshot.error());
    }
    bool busy = false;
    for (const auto& gpu : snapshot->gpus) {
      busy = busy || (gpu.used_mib && *gpu.used_mib >= config.cleanup.gpu_free_below_mib);
    }
    if (!busy) {
      return report;
    }
    if (Clock::now() >= deadline) {
      report.gpus_released = false;
      reporter.warning(fmt::format("{}: GPUs still in use {} after stopping {}", host.describe(),
                                   util::format_duration(config.cleanup.timeout), server.tag));
      return report;
    }
    detail::sleep_for(detail::k_gpu_poll);
  }
}

} // namespace specctl::server
