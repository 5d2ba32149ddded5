#include <specctl/remote/host_ops.hpp>

#include <specctl/util/atomic_file.hpp>

#include <specctl/util/parse.hpp>
#include <specctl/util/shell.hpp>
#include <specctl/util/text.hpp>

#include <cstdio>
#include <filesystem>
#include <fmt/format.h>
#include <fstream>
#include <set>
#include <sstream>

namespace specctl::remote {

namespace {

using util::shell_quote;

// Linux's PID_MAX_LIMIT.
constexpr int k_max_pid = 4'194'304;

// Writing the pid file is the detached shell's first act; this bounds the wait for it.
constexpr const char* k_pid_wait_loop =
    "i=0; while [ ! -s \"$pidfile\" ] && [ $i -lt 100 ]; do sleep 0.05; i=$((i+1)); done";

std::expected<CommandResult, Error> run_checked(Host& host, const std::string& line, const char* what) {
  auto result = host.exec(line);
  if (!result) {
    return std::unexpected(result.error());
  }
  if (result->timed_out) {
    return std::unexpected(Error(fmt::format("{}: {} timed out", host.describe(), what), ErrorKind::timed_out));
  }
  return result;
}

std::vector<int> parse_pids(const std::string& text) {
  std::vector<int> pids;
  std::istringstream in(text);
  std::string word;
  while (in >> word) {
    if (const auto pid = util::parse_number<int>(word); pid && *pid > 0) {
      pids.push_back(*pid);
    }
  }
  return pids;
}

std::string pid_list(const std::vector<int>& pids) {
  std::vector<std::string> words;
  for (int pid : pids) {
    words.push_back(std::to_string(pid));
  }
  return util::join(words, " ");
}

} // namespace

std::expected<int, Error> start_detached(Host& host, const DetachSpec& spec) {
  RunFiles files{spec.run_dir};
  std::vector<std::string> env_words;
  for (const auto& [name, value] : spec.env) {
    env_words.push_back(name + "=" + shell_quote(value));
  }
  // The inner shell leads the new session; the server is its child in the same group,
  // and the shell writes the server's exit code once it ends.
  std::string inner =
      fmt::format("echo $$ > {pid}; {env} {cmd} >> {log} 2>&1 < /dev/null; "
                  "echo $? > {exit}",
                  fmt::arg("pid", shell_quote(files.pid())), fmt::arg("env", util::join(env_words, " ")),
                  fmt::arg("cmd", util::shell_join(spec.argv)), fmt::arg("log", shell_quote(files.log())),
                  fmt::arg("exit", shell_quote(files.exit())));
  std::string line = fmt::format(
      "mkdir -p {dir} && rm -f {pid} {exit} && pidfile={pid} && "
      "({tag} setsid /bin/sh -c {inner} > /dev/null 2>&1 < /dev/null &) && {wait}; cat {pid}",
      fmt::arg("dir", shell_quote(files.dir)), fmt::arg("pid", shell_quote(files.pid())),
      fmt::arg("exit", shell_quote(files.exit())), fmt::arg("inner", shell_quote(inner)),
      fmt::arg("wait", k_pid_wait_loop), fmt::arg("tag", std::string(k_tag_variable) + "=" + shell_quote(spec.tag)));
  auto result = run_checked(host, line, "starting the server");
  if (!result) {
    return std::unexpected(result.error());
  }
  auto pids = parse_pids(result->out);
  if (result->exit_code != 0 || pids.size() != 1) {
    return std::unexpected(Error(fmt::format("{}: could not start the server in {}: {}", host.describe(), files.dir,
                                             util::first_line(result->err.empty() ? result->out : result->err))));
  }
  return pids.front();
}

std::expected<bool, Error> is_alive(Host& host, int pid) {
  // A zombie is dead: a re-parented process may wait long for its reaper (some
  // container inits never reap), and `kill -0` succeeds on it.
  auto result = run_checked(host, fmt::format("ps -o stat= -p {} 2>/dev/null", pid), "checking the server");
  if (!result) {
    return std::unexpected(result.error());
  }
  auto state = result->out.find_first_not_of(" \t\n");
  return state != std::string::npos && result->out[state] != 'Z';
}

std::expected<std::optional<int>, Error> read_exit_code(Host& host, const RunFiles& files) {
  auto result =
      run_checked(host, fmt::format("cat {} 2>/dev/null", shell_quote(files.exit())), "reading the exit code");
  if (!result) {
    return std::unexpected(result.error());
  }
  auto codes = parse_pids(result->out);
  if (result->out.find_first_of("0123456789") == std::string::npos) {
    return std::optional<int>();
  }
  return std::optional<int>(codes.empty() ? 0 : codes.front());
}

// `kill -N -PGID`, not `kill -N -- -PGID`: dash (Debian's /bin/sh) refuses the latter.
std::expected<void, Error> signal_group(Host& host, int pgid, int signal) {
  if (pgid <= 1) {
    return std::unexpected(Error(fmt::format("{}: refusing to signal process group {}", host.describe(), pgid)));
  }
  auto result =
      run_checked(host, fmt::format("kill -{0} -{1} 2>/dev/null; kill -{0} {1} 2>/dev/null; true", signal, pgid),
                  "signalling the server");
  if (!result) {
    return std::unexpected(result.error());
  }
  return {};
}

std::expected<void, Error> signal_pids(Host& host, const std::vector<int>& pids, int signal) {
  std::vector<int> safe;
  for (int pid : pids) {
    if (pid > 1) {
      safe.push_back(pid);
    }
  }
  if (safe.empty()) {
    return {};
  }
  auto result = run_checked(host, fmt::format("kill -{} {} 2>/dev/null; true", signal, pid_list(safe)), "signalling");
  if (!result) {
    return std::unexpected(result.error());
  }
  return {};
}

std::expected<std::string, Error> read_file_from(Host& host, const std::string& path, std::uint64_t offset,
                                                 std::size_t max_bytes) {
  auto result = run_checked(
      host, fmt::format("tail -c +{} {} 2>/dev/null | head -c {}", offset + 1, shell_quote(path), max_bytes),
      "reading the log");
  if (!result) {
    return std::unexpected(result.error());
  }
  return std::move(result->out);
}

std::expected<ServerPoll, Error> poll_server(Host& host, const RunFiles& files, int pid, std::uint64_t log_offset,
                                             std::size_t max_bytes) {
  // The status follows the log bytes on a line of its own; the marker goes in as an
  // argument because printf takes a format that starts with "--" for an option.
  static constexpr std::string_view k_marker = "\n--specctl-status-- ";
  std::string line =
      fmt::format("touch {} 2>/dev/null; tail -c +{} {} 2>/dev/null | head -c {}; "
                  "printf '\\n%s %s|%s\\n' '{}' \"$(cat {} 2>/dev/null)\" \"$(ps -o stat= -p {} 2>/dev/null)\"",
                  shell_quote(files.heartbeat()), log_offset + 1, shell_quote(files.log()), max_bytes,
                  k_marker.substr(1, k_marker.size() - 2), shell_quote(files.exit()), pid);
  auto result = run_checked(host, line, "watching the server");
  if (!result) {
    return std::unexpected(result.error());
  }
  // The log may contain anything, the marker included: the status is the last one.
  const std::string& out = result->out;
  auto at = out.rfind(k_marker);
  if (at == std::string::npos) {
    return std::unexpected(Error(fmt::format("{}: unexpected answer while watching the server", host.describe())));
  }
  ServerPoll poll;
  poll.log_bytes = out.substr(0, at);
  std::string status = out.substr(at + k_marker.size());
  auto bar = status.find('|');
  std::string code = status.substr(0, bar);
  std::string state = bar == std::string::npos ? "" : status.substr(bar + 1);
  auto digits = code.find_first_of("0123456789");
  if (digits != std::string::npos) {
    poll.exit_code = std::atoi(code.c_str() + digits);
  }
  auto first = state.find_first_not_of(" \t\n");
  poll.alive = first != std::string::npos && state[first] != 'Z';
  return poll;
}

std::expected<std::string, Error> tag_of(Host& host, int pid) {
  auto result =
      run_checked(host,
                  fmt::format("tr '\\0' '\\n' 2>/dev/null < /proc/{}/environ | sed -n 's/^{}=//p' | head -n 1", pid,
                              k_tag_variable),
                  "reading a process's tag");
  if (!result) {
    return std::unexpected(result.error());
  }
  return util::first_line(result->out);
}

std::expected<std::vector<int>, Error> find_tagged(Host& host, const std::string& tag) {
  std::string needle = std::string(k_tag_variable) + "=" + tag;
  // One grep over every environment (-z: NUL-separated entries, -x: the whole entry), not
  // two processes per pid: a GPU node runs thousands, and teardown asks this in a loop.
  // -s: a process that ended since the glob is no error; no match is no error either.
  std::string line =
      fmt::format("{{ grep -lszxF -e {} /proc/[0-9]*/environ || :; }} | sed -n 's,^/proc/\\([0-9]*\\)/environ$,\\1,p'",
                  shell_quote(needle));
  auto result = run_checked(host, line, "looking for tagged processes");
  if (!result) {
    return std::unexpected(result.error());
  }
  return parse_pids(result->out);
}

std::expected<std::vector<ProcessInfo>, Error> process_info(Host& host, const std::vector<int>& pids) {
  std::vector<ProcessInfo> out;
  if (pids.empty()) {
    return out;
  }
  std::vector<std::string> ids;
  for (int pid : pids) {
    // procps refuses the whole list when one pid is out of range.
    if (pid > 0 && pid <= k_max_pid) {
      ids.push_back(std::to_string(pid));
    }
  }
  if (ids.empty()) {
    return out;
  }
  auto result = run_checked(
      host, fmt::format("ps -o pid=,ppid=,pgid=,stat=,comm=,args= -p {} 2>/dev/null; true", util::join(ids, ",")),
      "ps");
  if (!result) {
    return std::unexpected(result.error());
  }
  std::istringstream in(result->out);
  std::string row;
  while (std::getline(in, row)) {
    std::istringstream fields(row);
    ProcessInfo info;
    if (!(fields >> info.pid >> info.ppid >> info.pgid >> info.state >> info.name)) {
      continue;
    }
    std::getline(fields >> std::ws, info.args);
    out.push_back(std::move(info));
  }
  return out;
}

std::expected<std::vector<PortSocket>, Error> port_sockets(Host& host, int port) {
  // Listening sockets (state 0A) on the port, then the processes holding each inode.
  std::string line =
      fmt::format("inodes=$(awk 'NR>1 && $4==\"0A\" {{ split($2,a,\":\"); if (a[2]==\"{:04X}\") print $10 }}' "
                  "/proc/net/tcp /proc/net/tcp6 2>/dev/null); "
                  "for i in $inodes; do echo \"inode $i\"; "
                  "find /proc/[0-9]*/fd -lname \"socket:\\[$i\\]\" 2>/dev/null | cut -d/ -f3 | sort -un; done",
                  port);
  auto result = run_checked(host, line, "looking for the port's holder");
  if (!result) {
    return std::unexpected(result.error());
  }
  std::vector<PortSocket> out;
  std::istringstream in(result->out);
  std::string row;
  while (std::getline(in, row)) {
    if (row.starts_with("inode ")) {
      out.push_back(PortSocket{row.substr(6), {}});
    } else if (!out.empty()) {
      auto pids = parse_pids(row);
      out.back().pids.insert(out.back().pids.end(), pids.begin(), pids.end());
    }
  }
  return out;
}

std::expected<std::vector<int>, Error> port_holders(Host& host, int port) {
  auto sockets = port_sockets(host, port);
  if (!sockets) {
    return std::unexpected(sockets.error());
  }
  std::set<int> pids;
  for (const auto& socket : *sockets) {
    pids.insert(socket.pids.begin(), socket.pids.end());
  }
  return std::vector<int>(pids.begin(), pids.end());
}

std::expected<void, Error> put_file(Host& host, const std::string& remote_path, std::string_view content) {
  auto dir = std::filesystem::path(remote_path).parent_path().string();
  auto temp = remote_path + ".tmp";
  auto result =
      run_checked(host,
                  fmt::format("mkdir -p {} && printf '%s' {} > {} && mv -f {} {}", shell_quote(dir),
                              shell_quote(content), shell_quote(temp), shell_quote(temp), shell_quote(remote_path)),
                  "writing a file");
  if (!result) {
    return std::unexpected(result.error());
  }
  if (result->exit_code != 0) {
    return std::unexpected(
        Error(fmt::format("{}: cannot write {}: {}", host.describe(), remote_path, util::first_line(result->err))));
  }
  return {};
}

std::expected<HostFacts, Error> host_facts(Host& host) {
  auto result = run_checked(host,
                            "hostname; uname -r; df -Pm \"$HOME\" 2>/dev/null | awk 'NR==2 {print $4}'; "
                            "if command -v nvidia-smi >/dev/null 2>&1; then "
                            "nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null; "
                            "nvidia-smi 2>/dev/null | sed -n 's/.*CUDA Version: *\\([0-9.]*\\).*/cuda \\1/p'; fi",
                            "reading host facts");
  if (!result) {
    return std::unexpected(result.error());
  }
  HostFacts facts;
  std::istringstream in(result->out);
  std::getline(in, facts.hostname);
  std::getline(in, facts.kernel);
  std::string disk;
  std::getline(in, disk);
  if (auto mib = parse_pids(disk); !mib.empty()) {
    facts.free_disk_mib = static_cast<std::uint64_t>(mib.front());
  }
  std::string line;
  while (std::getline(in, line)) {
    if (line.starts_with("cuda ")) {
      facts.cuda = line.substr(5);
      continue;
    }
    auto comma = line.rfind(',');
    if (comma == std::string::npos) {
      continue;
    }
    facts.gpus.push_back(line.substr(0, comma));
    auto driver = line.substr(comma + 1);
    facts.driver = driver.substr(driver.find_first_not_of(' '));
  }
  return facts;
}

} // namespace specctl::remote
