#include <specctl/server/lifecycle.hpp>

#include "lifecycle_util.hpp"

#include <specctl/util/shell.hpp>
#include <specctl/util/text.hpp>

#include <csignal>
#include <fmt/format.h>
#include <set>
#include <sstream>

namespace specctl::server {

namespace {

using detail::describe_app;
using detail::describe_process;

struct EarlierServer {
  std::string tag;
  int pid = 0;
  int port = 0;
  // Empty: all GPUs.
  std::vector<int> gpus;
};

std::string gpus_text(const std::optional<std::vector<int>>& gpus) {
  if (!gpus) {
    return "all";
  }
  std::vector<std::string> ids;
  for (int g : *gpus) {
    ids.push_back(std::to_string(g));
  }
  return util::join(ids, ",");
}

std::expected<std::vector<EarlierServer>, Error> earlier_servers(remote::Host& host, const std::string& state_dir) {
  std::string line = fmt::format(
      "for d in {}/*/; do [ -f \"$d/server.pid\" ] || continue; "
      "printf '%s %s %s\\n' \"$(basename \"$d\")\" \"$(cat \"$d/server.pid\")\" \"$(cat \"$d/server.meta\" 2>/dev/null)\"; "
      "done",
      util::shell_quote(state_dir));
  auto result = host.exec(line);
  if (!result) {
    return std::unexpected(result.error());
  }
  std::vector<EarlierServer> out;
  std::istringstream in(result->out);
  std::string row;
  while (std::getline(in, row)) {
    std::istringstream fields(row);
    EarlierServer s;
    std::string meta;
    if (!(fields >> s.tag >> s.pid)) {
      continue;
    }
    while (fields >> meta) {
      if (meta.starts_with("port=")) {
        s.port = std::atoi(meta.c_str() + 5);
      } else if (meta.starts_with("gpus=") && meta != "gpus=all") {
        std::istringstream ids(meta.substr(5));
        std::string id;
        while (std::getline(ids, id, ',')) {
          s.gpus.push_back(std::atoi(id.c_str()));
        }
      }
    }
    out.push_back(std::move(s));
  }
  return out;
}

bool collides(const EarlierServer& earlier, const ServerConfig& config) {
  if (earlier.port == config.port || earlier.gpus.empty() || !config.gpus) {
    return true;
  }
  for (int gpu : earlier.gpus) {
    if (std::find(config.gpus->begin(), config.gpus->end(), gpu) != config.gpus->end()) {
      return true;
    }
  }
  return false;
}

bool allowed(const std::vector<std::string>& allow, const ComputeApp& app, const remote::ProcessInfo* info) {
  std::vector<std::string> names = {app.name};
  if (info != nullptr) {
    names.push_back(info->name);
    std::string first = info->args.substr(0, info->args.find(' '));
    names.push_back(first);
    names.push_back(first.substr(first.rfind('/') + 1));
  }
  std::string base = app.name.substr(app.name.rfind('/') + 1);
  names.push_back(base.substr(0, base.find(' ')));
  for (const auto& pattern : allow) {
    for (const auto& name : names) {
      if (!name.empty() && util::glob_match(pattern, name)) {
        return true;
      }
    }
  }
  return false;
}

std::expected<void, Error> stop_earlier(remote::Host& host, const ServerConfig& config, const std::string& state_dir,
                                        const CleanupOptions& options, CleanupReport& report) {
  auto earlier = earlier_servers(host, state_dir);
  if (!earlier) {
    return std::unexpected(earlier.error());
  }
  for (const auto& s : *earlier) {
    if (!collides(s, config)) {
      continue;
    }
    auto tagged = remote::find_tagged(host, s.tag);
    auto leader_alive = remote::is_alive(host, s.pid);
    if (!tagged || !leader_alive) {
      return std::unexpected(!tagged ? tagged.error() : leader_alive.error());
    }
    std::string dir = state_dir + "/" + s.tag;
    if (tagged->empty() && !*leader_alive) {
      if (!options.dry_run) {
        host.exec(fmt::format("rm -f {}", util::shell_quote(dir + "/server.pid")));
      }
      continue;
    }
    std::string what = fmt::format("specctl's earlier server {} (pid {}, port {}, {} processes)", s.tag, s.pid, s.port,
                                   tagged->size());
    if (options.dry_run) {
      report.actions.push_back("would stop " + what);
      continue;
    }
    auto stopped = detail::stop_server(host, s.pid, s.tag, config.cleanup.grace);
    if (!stopped) {
      return std::unexpected(stopped.error());
    }
    report.actions.push_back("stopped " + what);
    host.exec(fmt::format("rm -f {}", util::shell_quote(dir + "/server.pid")));
  }
  return {};
}

std::expected<void, Error> apply_policy(remote::Host& host, const ServerConfig& config, const CleanupOptions& options,
                                        util::Reporter& reporter, CleanupReport& report) {
  const auto& cleanup = config.cleanup;
  auto probe = host.exec("command -v nvidia-smi >/dev/null 2>&1");
  if (!probe) {
    return std::unexpected(probe.error());
  }
  if (probe->exit_code != 0) {
    reporter.warning(fmt::format("{}: no nvidia-smi on PATH: GPU processes and memory are not checked", host.describe()));
    return {};
  }
  auto snapshot = query_gpus(host, config.gpus);
  if (!snapshot) {
    return std::unexpected(snapshot.error());
  }
  report.gpus_checked = true;
  const auto& apps = snapshot->apps;
  if (apps.empty()) {
    return {};
  }
  std::vector<int> pids;
  for (const auto& app : apps) {
    pids.push_back(app.pid);
  }
  auto infos = remote::process_info(host, pids);
  if (!infos) {
    return std::unexpected(infos.error());
  }
  auto info_of = [&](int pid) -> const remote::ProcessInfo* {
    for (const auto& info : *infos) {
      if (info.pid == pid) {
        return &info;
      }
    }
    return nullptr;
  };
  std::vector<std::string> described;
  for (const auto& app : apps) {
    described.push_back(describe_app(app));
  }
  if (cleanup.policy == CleanupPolicy::fail) {
    return std::unexpected(Error(fmt::format("{}: GPUs {} are in use (cleanup policy fail): {}", host.describe(),
                                             gpus_text(config.gpus), util::join(described, "; "))));
  }
  if (cleanup.policy == CleanupPolicy::wait) {
    if (options.dry_run) {
      report.actions.push_back("would wait for " + util::join(described, "; "));
      return {};
    }
    reporter.info(fmt::format("{}: waiting up to {} for {}", host.describe(), util::format_duration(cleanup.timeout),
                              util::join(described, "; ")));
    auto deadline = std::chrono::steady_clock::now() + cleanup.timeout;
    while (std::chrono::steady_clock::now() < deadline) {
      detail::sleep_for(detail::k_gpu_poll);
      auto again = query_gpus(host, config.gpus);
      if (!again) {
        return std::unexpected(again.error());
      }
      if (again->apps.empty()) {
        return {};
      }
    }
    return std::unexpected(Error(fmt::format("{}: GPU processes still running after {}: {}", host.describe(),
                                             util::format_duration(cleanup.timeout), util::join(described, "; ")),
                                 ErrorKind::timed_out));
  }

  // Kill what the policy names, leave everything else alone and say so.
  std::set<int> groups;
  std::vector<int> targets;
  for (const auto& app : apps) {
    const auto* info = info_of(app.pid);
    if (!allowed(cleanup.allow, app, info)) {
      std::string why = fmt::format("{}: not named by cleanup.allow ({})", describe_app(app),
                                    cleanup.allow.empty() ? "empty" : util::join(cleanup.allow, ", "));
      report.left_alone.push_back(why);
      reporter.warning(fmt::format("{}: left alone {}", host.describe(), why));
      continue;
    }
    targets.push_back(app.pid);
    // The whole group goes too (TP workers share it) when its leader is also one the policy names.
    if (info != nullptr && info->pgid > 1 && info->pgid != info->pid) {
      auto leader = remote::process_info(host, {info->pgid});
      if (leader && !leader->empty() && allowed(cleanup.allow, ComputeApp{info->pgid, leader->front().name, {}, {}, {}},
                                                &leader->front())) {
        groups.insert(info->pgid);
      }
    } else if (info != nullptr && info->pgid == info->pid) {
      groups.insert(info->pgid);
    }
    report.actions.push_back(fmt::format("{}kill {}", options.dry_run ? "would " : "", describe_app(app)));
  }
  if (options.dry_run || targets.empty()) {
    return {};
  }
  for (int group : groups) {
    remote::signal_group(host, group, SIGTERM);
  }
  remote::signal_pids(host, targets, SIGTERM);
  auto deadline = std::chrono::steady_clock::now() + cleanup.grace;
  while (std::chrono::steady_clock::now() < deadline) {
    auto alive = detail::living(host, targets);
    if (!alive) {
      return std::unexpected(alive.error());
    }
    if (alive->empty()) {
      break;
    }
    detail::sleep_for(detail::k_process_poll);
  }
  auto alive = detail::living(host, targets);
  if (alive && !alive->empty()) {
    for (int group : groups) {
      remote::signal_group(host, group, SIGKILL);
    }
    remote::signal_pids(host, targets, SIGKILL);
    for (const auto& info : *alive) {
      reporter.info(fmt::format("{}: KILLed {} after {} grace", host.describe(), describe_process(info),
                                util::format_duration(cleanup.grace)));
    }
  }
  for (const auto& action : report.actions) {
    reporter.info(fmt::format("{}: {}", host.describe(), action));
  }
  return {};
}

std::expected<void, Error> wait_gpu_memory(remote::Host& host, const ServerConfig& config, const CleanupReport& report) {
  if (!report.gpus_checked) {
    return {};
  }
  const auto& cleanup = config.cleanup;
  auto deadline = std::chrono::steady_clock::now() + cleanup.timeout;
  while (true) {
    auto snapshot = query_gpus(host, config.gpus);
    if (!snapshot) {
      return std::unexpected(snapshot.error());
    }
    std::vector<std::string> busy;
    for (const auto& gpu : snapshot->gpus) {
      if (gpu.used_mib && *gpu.used_mib >= cleanup.gpu_free_below_mib) {
        busy.push_back(fmt::format("GPU {} uses {} MiB", gpu.index, *gpu.used_mib));
      }
    }
    if (busy.empty()) {
      return {};
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      std::vector<std::string> holders;
      for (const auto& app : snapshot->apps) {
        holders.push_back(describe_app(app));
      }
      return std::unexpected(Error(
          fmt::format("{}: GPUs not free after {} (threshold {} MiB): {}{}", host.describe(),
                      util::format_duration(cleanup.timeout), cleanup.gpu_free_below_mib, util::join(busy, ", "),
                      holders.empty() ? "" : "; held by " + util::join(holders, "; ")),
          ErrorKind::timed_out));
    }
    detail::sleep_for(detail::k_gpu_poll);
  }
}

std::expected<void, Error> free_port(remote::Host& host, const ServerConfig& config, const CleanupOptions& options,
                                     CleanupReport& report) {
  auto holders = remote::port_holders(host, config.port);
  if (!holders) {
    return std::unexpected(holders.error());
  }
  for (int pid : *holders) {
    auto tag = remote::tag_of(host, pid);
    auto info = remote::process_info(host, {pid});
    if (!tag || !info) {
      return std::unexpected(!tag ? tag.error() : info.error());
    }
    std::string who = info->empty() ? fmt::format("pid {}", pid) : describe_process(info->front());
    if (tag->empty()) {
      std::string why = fmt::format("port {} is already in use by {}, which specctl did not start", config.port, who);
      if (options.dry_run) {
        report.left_alone.push_back(why + ": the launch would be refused");
        continue;
      }
      return std::unexpected(Error(fmt::format("{}: {}", host.describe(), why)));
    }
    if (options.dry_run) {
      report.actions.push_back(fmt::format("would stop {} (specctl's {}) holding port {}", who, *tag, config.port));
      continue;
    }
    int pgid = info->empty() ? pid : info->front().pgid;
    auto stopped = detail::stop_server(host, pgid, *tag, config.cleanup.grace);
    if (!stopped) {
      return std::unexpected(stopped.error());
    }
    report.actions.push_back(fmt::format("stopped {} (specctl's {}) holding port {}", who, *tag, config.port));
  }
  return {};
}

} // namespace

std::expected<CleanupReport, Error> cleanup_before_launch(remote::Host& host, const ServerConfig& config,
                                                          const CleanupOptions& options, util::Reporter& reporter) {
  CleanupReport report;
  auto state_dir = detail::resolve_state_dir(host, options.state_dir);
  if (!state_dir) {
    return std::unexpected(state_dir.error());
  }
  if (auto done = stop_earlier(host, config, *state_dir, options, report); !done) {
    return std::unexpected(done.error());
  }
  if (auto done = apply_policy(host, config, options, reporter, report); !done) {
    return std::unexpected(done.error());
  }
  if (!options.dry_run) {
    if (auto done = wait_gpu_memory(host, config, report); !done) {
      return std::unexpected(done.error());
    }
  }
  if (auto done = free_port(host, config, options, report); !done) {
    return std::unexpected(done.error());
  }
  return report;
}

} // namespace specctl::server
