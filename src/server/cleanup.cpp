#include <specctl/server/lifecycle.hpp>

#include "lifecycle_util.hpp"

#include <specctl/util/shell.hpp>
#include <specctl/util/text.hpp>
#include <specctl/util/try.hpp>

#include <csignal>
#include <fmt/format.h>
#include <map>
#include <set>
#include <sstream>

namespace specctl::server {

namespace {

using detail::describe_app;
using detail::describe_process;

struct EarlierServer {
  std::string tag;
  int pid = 0;
  detail::ServerMeta meta;
  // Seconds since the owning run last touched the heartbeat; nullopt without one.
  std::optional<long> heartbeat_age_s;
  // Its run is alive and is not the run asking: never touched.
  bool live_owner = false;
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

// Whether the run that launched `s` is alive, and not the run asking: on the
// coordinator's own machine its process (pid and start time) says; from elsewhere,
// a heartbeat fresher than k_owner_heartbeat_stale. A record without an owner was
// written by a specctl that had none: its run cannot be asked, and counts as gone.
bool owned_by_live_run(const EarlierServer& s, const RunOwner& asking) {
  if (!s.meta.owner || s.meta.owner->same_process(asking)) {
    return false;
  }
  if (auto here = detail::alive_here(*s.meta.owner)) {
    return *here;
  }
  return s.heartbeat_age_s &&
         *s.heartbeat_age_s <= std::chrono::duration_cast<std::chrono::seconds>(k_owner_heartbeat_stale).count();
}

// The servers recorded in the state dir; with `tag`, only that one's record.
std::expected<std::vector<EarlierServer>, Error> earlier_servers(remote::Host& host, const std::string& state_dir,
                                                                 const RunOwner& asking, const std::string& tag = "") {
  // One line per recorded server: tag, pid, heartbeat age (-1: none), then server.meta.
  std::string line = fmt::format("now=$(date +%s); for d in {}/{}/; do [ -f \"$d/server.pid\" ] || continue; "
                                 "beat=$(stat -c %Y \"$d/owner.beat\" 2>/dev/null) && age=$((now - beat)) || age=-1; "
                                 "printf '%s %s %s %s\\n' \"$(basename \"$d\")\" \"$(cat \"$d/server.pid\")\" \"$age\" "
                                 "\"$(head -n 1 \"$d/server.meta\" 2>/dev/null)\"; "
                                 "done",
                                 util::shell_quote(state_dir), tag.empty() ? std::string("*") : util::shell_quote(tag));
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
    long age = -1;
    if (!(fields >> s.tag >> s.pid >> age)) {
      continue;
    }
    if (age >= 0) {
      s.heartbeat_age_s = age;
    }
    std::string meta;
    std::getline(fields, meta);
    s.meta = detail::parse_meta(util::trim(meta));
    s.live_owner = owned_by_live_run(s, asking);
    out.push_back(std::move(s));
  }
  return out;
}

bool gpus_overlap(const std::optional<std::vector<int>>& a, const std::optional<std::vector<int>>& b) {
  if (!a || !b) {
    return false;
  }
  return std::any_of(a->begin(), a->end(), [&](int gpu) { return std::find(b->begin(), b->end(), gpu) != b->end(); });
}

// A server a dead run left collides with the new one on its port or on any GPU it
// may hold (no GPU list: all of them).
bool collides(const EarlierServer& earlier, const ServerConfig& config) {
  return earlier.meta.port == config.port || !earlier.meta.gpus || !config.gpus ||
         gpus_overlap(earlier.meta.gpus, config.gpus);
}

// A live run's server makes the host busy only where the two certainly meet: the
// port, or a GPU both lists name. Without GPU lists only ports collide.
bool blocks(const EarlierServer& earlier, const ServerConfig& config) {
  return earlier.meta.port == config.port || gpus_overlap(earlier.meta.gpus, config.gpus);
}

std::string busy_text(remote::Host& host, const EarlierServer& s, const ServerConfig& config) {
  std::vector<std::string> holds;
  if (gpus_overlap(s.meta.gpus, config.gpus)) {
    holds.push_back("GPUs " + gpus_text(s.meta.gpus));
  }
  if (s.meta.port == config.port) {
    holds.push_back(fmt::format("port {}", s.meta.port));
  }
  return fmt::format("{} is busy: {} holds {} (server {})", host.describe(), s.meta.owner->describe(),
                     util::join(holds, " / "), s.tag);
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

// The servers of live runs on the host, by tag. A tag not known yet (a server that
// another run launched after the list was read) is looked up when it is met: its
// record is written before its first process starts.
// How often a long wait touches this run's claims: well within k_owner_heartbeat_stale.
constexpr util::Duration k_claim_touch = std::chrono::seconds{30};

class LiveRuns {
public:
  LiveRuns(std::string state_dir, RunOwner asking) : m_state_dir(std::move(state_dir)), m_asking(std::move(asking)) {}
  void add(const std::string& tag) { m_live.insert(tag); }
  // Called in every wait: this run's claims stay fresh for runs on other machines.
  void keep_claims(remote::Host& host) {
    auto now = std::chrono::steady_clock::now();
    if (now - m_touched >= k_claim_touch) {
      detail::touch_claims(host, m_state_dir, m_asking);
      m_touched = now;
    }
  }
  // Every server recorded on the host when the live ones were last listed.
  std::vector<EarlierServer> records;
  std::expected<bool, Error> contains(remote::Host& host, const std::string& tag) {
    if (tag.empty() || m_live.contains(tag)) {
      return !tag.empty();
    }
    if (m_not_live.contains(tag)) {
      return false;
    }
    auto found = earlier_servers(host, m_state_dir, m_asking, tag);
    if (!found) {
      return std::unexpected(found.error());
    }
    bool live = std::any_of(found->begin(), found->end(), [](const EarlierServer& s) { return s.live_owner; });
    (live ? m_live : m_not_live).insert(tag);
    return live;
  }

private:
  std::string m_state_dir;
  RunOwner m_asking;
  std::set<std::string> m_live;
  std::set<std::string> m_not_live;
  std::chrono::steady_clock::time_point m_touched = std::chrono::steady_clock::now();
};

// Servers of live runs that the new server would meet: nothing is touched; the
// launch fails, or waits for them to go (cleanup.busy). Returns the tags of every
// live run's server on the host, whose processes the rest of the cleanup leaves alone.
std::expected<LiveRuns, Error> respect_live_runs(remote::Host& host, const ServerConfig& config,
                                                 const std::string& state_dir, const CleanupOptions& options,
                                                 CleanupReport& report) {
  auto deadline = std::chrono::steady_clock::now() + config.cleanup.timeout;
  bool waited = false;
  while (true) {
    auto earlier = earlier_servers(host, state_dir, options.owner);
    if (!earlier) {
      return std::unexpected(earlier.error());
    }
    LiveRuns live(state_dir, options.owner);
    live.records = std::move(*earlier);
    std::vector<const EarlierServer*> blocking;
    for (const auto& s : live.records) {
      if (!s.live_owner) {
        continue;
      }
      auto tagged = remote::find_tagged(host, s.tag);
      if (!tagged) {
        return std::unexpected(tagged.error());
      }
      if (tagged->empty()) {
        continue;
      }
      live.add(s.tag);
      if (blocks(s, config)) {
        blocking.push_back(&s);
      } else if (!waited) {
        report.left_alone.push_back(fmt::format("{}'s server {} (port {}, GPUs {}): its run is alive",
                                                s.meta.owner->describe(), s.tag, s.meta.port, gpus_text(s.meta.gpus)));
      }
    }
    if (blocking.empty()) {
      return live;
    }
    std::vector<std::string> why;
    for (const auto* s : blocking) {
      why.push_back(busy_text(host, *s, config));
    }
    bool wait = config.cleanup.busy == BusyPolicy::wait;
    if (options.dry_run) {
      report.left_alone.push_back(
          util::join(why, "; ") +
          (wait ? fmt::format(": the launch would wait up to {} for it", util::format_duration(config.cleanup.timeout))
                : ": the launch would fail (cleanup.busy: fail)"));
      return live;
    }
    if (!wait) {
      return std::unexpected(Error(util::join(why, "; ") + " (cleanup.busy: fail; `wait` waits for it)"));
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      return std::unexpected(Error(fmt::format("{} (still, after waiting {})", util::join(why, "; "),
                                               util::format_duration(config.cleanup.timeout)),
                                   ErrorKind::timed_out));
    }
    if (!waited) {
      report.actions.push_back("waited: " + util::join(why, "; "));
      waited = true;
    }
    if (detail::sleep_for(detail::k_gpu_poll, options.cancel)) {
      return std::unexpected(Error("interrupted while waiting for a busy host", ErrorKind::interrupted));
    }
  }
}

// Servers that runs now gone left behind (or this run's own) and that would
// collide are stopped.
std::expected<void, Error> stop_earlier(remote::Host& host, const ServerConfig& config, const std::string& state_dir,
                                        const std::vector<EarlierServer>& earlier, const CleanupOptions& options,
                                        CleanupReport& report) {
  for (const auto& s : earlier) {
    if (s.live_owner || !collides(s, config)) {
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
    std::string whose = !s.meta.owner                               ? ""
                        : s.meta.owner->same_process(options.owner) ? ", this run's"
                                                                    : ", its run gone: " + s.meta.owner->describe();
    std::string what = fmt::format("specctl's earlier server {} (pid {}, port {}, {} processes{})", s.tag, s.pid,
                                   s.meta.port, tagged->size(), whose);
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

// The GPU processes of live runs' servers (by their tag) leave the snapshot: the
// cleanup neither kills nor waits for them, and their memory is not ours to wait out.
std::expected<std::map<int, std::uint64_t>, Error> drop_live(remote::Host& host, GpuSnapshot& snapshot,
                                                             LiveRuns& live) {
  std::map<int, std::uint64_t> held;
  std::vector<ComputeApp> kept;
  for (auto& app : snapshot.apps) {
    auto tag = remote::tag_of(host, app.pid);
    if (!tag) {
      return std::unexpected(tag.error());
    }
    auto theirs = live.contains(host, *tag);
    if (!theirs) {
      return std::unexpected(theirs.error());
    }
    if (!*theirs) {
      kept.push_back(std::move(app));
    } else if (app.gpu_index && app.used_mib) {
      held[*app.gpu_index] += *app.used_mib;
    }
  }
  snapshot.apps = std::move(kept);
  return held;
}

// cleanup.policy wait: until no process (but live runs') is left on the GPUs, at most cleanup.timeout.
std::expected<void, Error> wait_for_apps(remote::Host& host, const ServerConfig& config, const CleanupOptions& options,
                                         LiveRuns& live, util::Reporter& reporter, CleanupReport& report,
                                         const std::string& described) {
  const auto& cleanup = config.cleanup;
  if (options.dry_run) {
    report.actions.push_back("would wait for " + described);
    return {};
  }
  reporter.info(
      fmt::format("{}: waiting up to {} for {}", host.describe(), util::format_duration(cleanup.timeout), described));
  auto deadline = std::chrono::steady_clock::now() + cleanup.timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    detail::sleep_for(detail::k_gpu_poll);
    live.keep_claims(host);
    auto again = SPECCTL_TRY(query_gpus(host, config.gpus));
    SPECCTL_TRY(drop_live(host, again, live));
    if (again.apps.empty()) {
      return {};
    }
  }
  return std::unexpected(Error(fmt::format("{}: GPU processes still running after {}: {}", host.describe(),
                                           util::format_duration(cleanup.timeout), described),
                               ErrorKind::timed_out));
}

// cleanup.policy kill: what cleanup.allow names (with its process group, when the group's
// leader is named too), SIGTERM, then SIGKILL after cleanup.grace; everything else is left
// alone and said so.
std::expected<void, Error> kill_allowed(remote::Host& host, const ServerConfig& config, const CleanupOptions& options,
                                        util::Reporter& reporter, CleanupReport& report,
                                        const std::vector<ComputeApp>& apps,
                                        const std::vector<remote::ProcessInfo>& infos) {
  const auto& cleanup = config.cleanup;
  auto info_of = [&](int pid) -> const remote::ProcessInfo* {
    auto it = std::find_if(infos.begin(), infos.end(), [&](const auto& info) { return info.pid == pid; });
    return it == infos.end() ? nullptr : &*it;
  };
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
      if (leader && !leader->empty() &&
          allowed(cleanup.allow, ComputeApp{info->pgid, leader->front().name, {}, {}, {}}, &leader->front())) {
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
    if (SPECCTL_TRY(detail::living(host, targets)).empty()) {
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

// The GPU processes on the server's GPUs, but live runs' servers, by cleanup.policy:
// fail, wait, or kill what cleanup.allow names.
std::expected<void, Error> apply_policy(remote::Host& host, const ServerConfig& config, const CleanupOptions& options,
                                        LiveRuns& live, util::Reporter& reporter, CleanupReport& report) {
  const auto& cleanup = config.cleanup;
  if (!SPECCTL_TRY(has_nvidia_smi(host))) {
    reporter.warning(
        fmt::format("{}: no nvidia-smi on PATH: GPU processes and memory are not checked", host.describe()));
    return {};
  }
  auto snapshot = SPECCTL_TRY(query_gpus(host, config.gpus));
  report.gpus_checked = true;
  SPECCTL_TRY(drop_live(host, snapshot, live));
  const auto& apps = snapshot.apps;
  if (apps.empty()) {
    return {};
  }
  std::vector<std::string> described;
  for (const auto& app : apps) {
    described.push_back(describe_app(app));
  }
  switch (cleanup.policy) {
  case CleanupPolicy::fail:
    return std::unexpected(Error(fmt::format("{}: GPUs {} are in use (cleanup policy fail): {}", host.describe(),
                                             gpus_text(config.gpus), util::join(described, "; "))));
  case CleanupPolicy::wait:
    return wait_for_apps(host, config, options, live, reporter, report, util::join(described, "; "));
  case CleanupPolicy::kill:
    break;
  }
  std::vector<int> pids;
  for (const auto& app : apps) {
    pids.push_back(app.pid);
  }
  auto infos = SPECCTL_TRY(remote::process_info(host, pids));
  return kill_allowed(host, config, options, reporter, report, apps, infos);
}

std::expected<void, Error> wait_gpu_memory(remote::Host& host, const ServerConfig& config, LiveRuns& live,
                                           const CleanupReport& report) {
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
    auto held = drop_live(host, *snapshot, live);
    if (!held) {
      return std::unexpected(held.error());
    }
    std::vector<std::string> busy;
    for (const auto& gpu : snapshot->gpus) {
      auto theirs = held->contains(gpu.index) ? held->at(gpu.index) : 0;
      if (gpu.used_mib && *gpu.used_mib >= cleanup.gpu_free_below_mib + theirs) {
        busy.push_back(theirs > 0 ? fmt::format("GPU {} uses {} MiB ({} MiB of them a live run's server)", gpu.index,
                                                *gpu.used_mib, theirs)
                                  : fmt::format("GPU {} uses {} MiB", gpu.index, *gpu.used_mib));
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
      return std::unexpected(
          Error(fmt::format("{}: GPUs not free after {} (threshold {} MiB): {}{}", host.describe(),
                            util::format_duration(cleanup.timeout), cleanup.gpu_free_below_mib, util::join(busy, ", "),
                            holders.empty() ? "" : "; held by " + util::join(holders, "; ")),
                ErrorKind::timed_out));
    }
    detail::sleep_for(detail::k_gpu_poll);
    live.keep_claims(host);
  }
}

std::expected<void, Error> free_port(remote::Host& host, const ServerConfig& config, const CleanupOptions& options,
                                     LiveRuns& live, CleanupReport& report) {
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
    auto theirs = live.contains(host, *tag);
    if (!theirs) {
      return std::unexpected(theirs.error());
    }
    if (*theirs) {
      // A live run's server that took the port after the busy check: never ours to stop.
      std::string why = fmt::format("port {} is held by {}, a server of a live specctl run", config.port, who);
      if (options.dry_run) {
        report.left_alone.push_back(why + ": the launch would be refused");
        continue;
      }
      return std::unexpected(Error(fmt::format("{} is busy: {}", host.describe(), why)));
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
  if (!options.dry_run) {
    if (auto claimed = detail::claim_host(host, config, *state_dir, options, report); !claimed) {
      return std::unexpected(claimed.error());
    }
  }
  auto live = respect_live_runs(host, config, *state_dir, options, report);
  if (!live) {
    return std::unexpected(live.error());
  }
  if (auto done = stop_earlier(host, config, *state_dir, live->records, options, report); !done) {
    return std::unexpected(done.error());
  }
  if (auto done = apply_policy(host, config, options, *live, reporter, report); !done) {
    return std::unexpected(done.error());
  }
  if (!options.dry_run) {
    if (auto done = wait_gpu_memory(host, config, *live, report); !done) {
      return std::unexpected(done.error());
    }
  }
  if (auto done = free_port(host, config, options, *live, report); !done) {
    return std::unexpected(done.error());
  }
  return report;
}

} // namespace specctl::server
