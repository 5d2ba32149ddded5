// A port, and the GPUs a server names, belong to one specctl run at a time. Runs
// started at the same instant each see a free host in the cleanup, so the claim is
// taken under flock(1) on the host, one file per port or GPU in <state>/claims/.
// A claim dies with its run: on the machine the run's specctl runs on, its process
// (pid and start time) says; from elsewhere, a claim or server heartbeat fresher
// than k_owner_heartbeat_stale. And before each benchmark the run makes sure every
// socket listening on its port is its own server's (SO_REUSEPORT lets several bind).

#include <specctl/server/lifecycle.hpp>

#include "lifecycle_util.hpp"

#include <specctl/util/shell.hpp>
#include <specctl/util/text.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <set>

namespace specctl::server {

namespace {

// How long one claim may wait for another run's short critical section (one shell command).
constexpr int k_lock_wait_s = 30;

std::vector<std::string> claim_names(const ServerConfig& config) {
  std::vector<std::string> names{fmt::format("port-{}", config.port)};
  if (config.gpus) {
    for (int gpu : *config.gpus) {
      names.push_back(fmt::format("gpu-{}", gpu));
    }
  }
  return names;
}

// The first line of a claim file: what identifies the run's process.
std::string identity(const RunOwner& owner) {
  return fmt::format("{} {} {}", owner.boot_id.empty() ? "-" : owner.boot_id, owner.pid,
                     owner.start_ticks.empty() ? "-" : owner.start_ticks);
}

// `body` runs on the host holding the claims' lock, in the claims folder ($d).
std::string locked(const std::string& state_dir, const std::string& body) {
  return fmt::format("d={}/claims; mkdir -p \"$d\" && exec 9>>\"$d/.lock\" || exit 3; "
                     "command -v flock >/dev/null || {{ echo 'no flock(1) on PATH (util-linux)'; exit 3; }}; "
                     "flock -w {} 9 || {{ echo 'the claims lock stayed held'; exit 3; }}; {}",
                     util::shell_quote(state_dir), k_lock_wait_s, body);
}

struct Attempt {
  bool claimed = false;
  // "specctl run ... (pid ...) holds port 8000" when not.
  std::string holder;
};

std::expected<Attempt, Error> try_claim(remote::Host& host, const std::string& state_dir,
                                        const std::vector<std::string>& names, const RunOwner& owner,
                                        const std::string& options_tag) {
  std::string list;
  for (const auto& name : names) {
    list += " " + util::shell_quote(name);
  }
  long stale_s = std::chrono::duration_cast<std::chrono::seconds>(k_owner_heartbeat_stale).count();
  // A claim is alive while its process is (same boot: /proc/PID/stat's start time,
  // field 22, the 20th after the name's closing parenthesis), else while it, or the
  // server it launched, was touched within the stale time.
  std::string body = fmt::format(
      "me={me}; boot=$(cat /proc/sys/kernel/random/boot_id 2>/dev/null); now=$(date +%s); "
      "for n in{list}; do f=\"$d/$n\"; [ -f \"$f\" ] || continue; "
      "{{ read -r cb cpid ct ctag; read -r who; }} < \"$f\"; "
      "[ \"$cb $cpid $ct\" = \"$me\" ] && continue; "
      "if [ \"$cb\" = \"$boot\" ]; then "
      "st=$(sed -n 's/.*) //p' \"/proc/$cpid/stat\" 2>/dev/null | cut -d' ' -f20); "
      "[ -n \"$st\" ] && [ \"$st\" = \"$ct\" ] || continue; "
      "else beat=$(stat -c %Y \"$f\" \"$d/../$ctag/owner.beat\" 2>/dev/null | sort -n | tail -n 1); "
      "[ $((now - ${{beat:-0}})) -le {stale} ] || continue; fi; "
      "printf 'busy %s %s\\n' \"$n\" \"$who\"; exit 0; done; "
      "for n in{list}; do printf '%s\\n%s\\n' \"$me \"{tag} {who} > \"$d/$n.$$\" && mv -f \"$d/$n.$$\" \"$d/$n\" || "
      "exit 3; "
      "done; echo claimed",
      fmt::arg("me", util::shell_quote(identity(owner))), fmt::arg("list", list), fmt::arg("stale", stale_s),
      fmt::arg("tag", util::shell_quote(options_tag.empty() ? std::string("-") : options_tag)),
      fmt::arg("who", util::shell_quote(owner.describe())));
  auto result = host.exec(locked(state_dir, body));
  if (!result) {
    return std::unexpected(result.error());
  }
  std::string out = util::trim(result->out);
  if (result->exit_code != 0 || out.empty()) {
    std::string why = util::first_line(out.empty() ? result->err : out);
    return std::unexpected(
        Error(fmt::format("{}: cannot claim port {} in {}/claims: {}", host.describe(), names.front().substr(5),
                          state_dir, why.empty() ? fmt::format("exit {}", result->exit_code) : why)));
  }
  if (out == "claimed") {
    return Attempt{true, ""};
  }
  // "busy port-8000 specctl run ... (pid ...)"
  auto fields = util::trim(out.substr(std::min<std::size_t>(out.size(), 5)));
  auto space = fields.find(' ');
  std::string name = fields.substr(0, space);
  std::string who = space == std::string::npos ? "another specctl run" : fields.substr(space + 1);
  std::string what = name.starts_with("port-") ? "port " + name.substr(5) : "GPU " + name.substr(4);
  return Attempt{false, fmt::format("{} holds {}", who, what)};
}

} // namespace

namespace detail {

std::expected<void, Error> claim_host(remote::Host& host, const ServerConfig& config, const std::string& state_dir,
                                      const CleanupOptions& options, CleanupReport& report) {
  auto names = claim_names(config);
  auto deadline = std::chrono::steady_clock::now() + config.cleanup.timeout;
  bool waited = false;
  while (true) {
    auto attempt = try_claim(host, state_dir, names, options.owner, options.tag);
    if (!attempt) {
      return std::unexpected(attempt.error());
    }
    if (attempt->claimed) {
      return {};
    }
    std::string why = fmt::format("{} is busy: {}", host.describe(), attempt->holder);
    if (config.cleanup.busy != BusyPolicy::wait) {
      return std::unexpected(Error(why + " (cleanup.busy: fail; `wait` waits for it)"));
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      return std::unexpected(
          Error(fmt::format("{} (still, after waiting {})", why, util::format_duration(config.cleanup.timeout)),
                ErrorKind::timed_out));
    }
    if (!waited) {
      report.actions.push_back("waited: " + why);
      waited = true;
    }
    if (detail::sleep_for(detail::k_gpu_poll, options.cancel)) {
      return std::unexpected(Error("interrupted while waiting for a busy host", ErrorKind::interrupted));
    }
  }
}

void touch_claims(remote::Host& host, const std::string& state_dir, const RunOwner& owner) {
  std::string body = fmt::format("me={}; for f in \"$d\"/port-* \"$d\"/gpu-*; do [ -f \"$f\" ] || continue; "
                                 "read -r cb cpid ct rest < \"$f\"; [ \"$cb $cpid $ct\" = \"$me\" ] && touch \"$f\"; "
                                 "done; true",
                                 util::shell_quote(identity(owner)));
  (void)host.exec(locked(state_dir, body));
}

} // namespace detail

std::expected<void, Error> release_claims(remote::Host& host, const ServerConfig& config, const std::string& state_dir,
                                          const RunOwner& owner) {
  auto dir = detail::resolve_state_dir(host, state_dir);
  if (!dir) {
    return std::unexpected(dir.error());
  }
  std::string list;
  for (const auto& name : claim_names(config)) {
    list += " " + util::shell_quote(name);
  }
  // Only this server's claims: another slot of the same run may hold others on the host.
  std::string body = fmt::format("me={}; for n in{}; do f=\"$d/$n\"; [ -f \"$f\" ] || continue; "
                                 "read -r cb cpid ct rest < \"$f\"; [ \"$cb $cpid $ct\" = \"$me\" ] && rm -f \"$f\"; "
                                 "done; true",
                                 util::shell_quote(identity(owner)), list);
  auto result = host.exec(locked(*dir, body));
  if (!result) {
    return std::unexpected(result.error());
  }
  if (result->exit_code != 0) {
    return std::unexpected(Error(fmt::format("{}: cannot release the claims in {}/claims: {}", host.describe(), *dir,
                                             util::first_line(result->out + result->err))));
  }
  return {};
}

std::expected<std::string, Error> check_port_is_ours(remote::Host& host, const RunningServer& server, int port) {
  auto sockets = remote::port_sockets(host, port);
  if (!sockets) {
    return std::unexpected(sockets.error());
  }
  auto tagged = remote::find_tagged(host, server.tag);
  if (!tagged) {
    return std::unexpected(tagged.error());
  }
  std::set<int> ours(tagged->begin(), tagged->end());
  ours.insert(server.pid);
  int held_by_us = 0;
  std::vector<std::string> others;
  std::vector<std::string> other_runs;
  for (const auto& socket : *sockets) {
    if (socket.pids.empty()) {
      // Listed by the kernel, held by no process this user may look into: another user's.
      others.push_back(fmt::format("a socket (inode {}) of a process this user cannot see", socket.inode));
    }
    bool ours_here = false;
    for (int pid : socket.pids) {
      if (ours.contains(pid)) {
        ours_here = true;
        continue;
      }
      auto tag = remote::tag_of(host, pid);
      auto info = remote::process_info(host, {pid});
      std::string who = info && !info->empty() ? detail::describe_process(info->front()) : fmt::format("pid {}", pid);
      (tag && !tag->empty() ? other_runs : others)
          .push_back(tag && !tag->empty() ? fmt::format("{} (specctl's {})", who, *tag) : who);
    }
    held_by_us += ours_here ? 1 : 0;
  }
  // Another run's server on the port, or anyone beside ours: a request may reach either.
  if (!other_runs.empty() || (held_by_us > 0 && !others.empty())) {
    others.insert(others.end(), other_runs.begin(), other_runs.end());
    return std::unexpected(Error(fmt::format(
        "{}: port {} is also held by {}, not by this run's server {}: requests could reach another server, so "
        "nothing is measured",
        host.describe(), port, util::join(others, ", "), server.tag)));
  }
  if (held_by_us == 0) {
    // A proxy in front of the server (a container's) looks the same as a stranger: said, not failed.
    return fmt::format("{}: cannot tell that port {} is this run's server {}: {}", host.describe(), port, server.tag,
                       others.empty() ? "no process of it listens there" : "it is held by " + util::join(others, ", "));
  }
  return std::string();
}

} // namespace specctl::server
