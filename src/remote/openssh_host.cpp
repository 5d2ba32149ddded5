#include "openssh_host_impl.hpp"

#include "openssh_tunnel.hpp"

#include <specctl/util/duration.hpp>
#include <specctl/util/text.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <system_error>

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

// How the OpenSSH transport works, and why.
//
// The master. Every ssh this host runs has ControlMaster=auto and a
// ControlPath of its own, so one authenticated connection carries every
// command and tunnel. Before a command, the host connects to the control
// socket itself (no process): when nothing listens (none yet, or a master
// that died and left its socket behind), it runs `ssh ... -- exit 0` under a
// lock, which becomes the new master (ControlPersist puts it in the
// background) and proves that the node answers; its stderr is the error when
// it does not. The lock keeps concurrent commands from each starting a master
// (the losers would print "ControlSocket ... already exists"). Should the
// master die between that check and the command's own ssh, ControlMaster=auto
// makes that ssh the new master. ssh's own failures are read from its stderr
// (classify_failure); openssh_exec.cpp tells them from the command's.
//
// A forked master closes the stdin, stdout and stderr it inherited (OpenSSH
// 9.2 points them at /dev/null, and sends a ProxyJump helper's stderr there
// too), but runs never wait for end of file alone: once ssh has exited, its
// output is read until end of file or one quiet second, so a master that held
// them could only delay a run by that second.
//
// The destructor asks the master to exit (`ssh -O exit`: a request on the
// local socket, answered even when the node is gone), bounded, and removes the
// socket. The master is never signalled: it is not our child (it daemonized).

namespace specctl::remote::openssh {

namespace {

// The master outlives its last client this long: between commands it stays
// up, and after a crash of specctl it goes away by itself.
constexpr auto k_control_persist = std::chrono::minutes{5};
// Beyond the connect timeout, what authenticating and starting the login
// shell may take for the command that checks a new master.
constexpr auto k_check_slack = std::chrono::seconds{15};
// `ssh -G` and `ssh -O exit` only read the configuration or talk to the local
// socket.
constexpr auto k_local_ssh_timeout = std::chrono::seconds{5};
constexpr auto k_exit_request_timeout = std::chrono::seconds{3};
// ssh creates the socket as "<ControlPath>.<16 random characters>" first.
constexpr std::size_t k_control_path_suffix = 17;

bool contains_nocase(std::string_view text, std::string_view word) {
  auto it = std::search(text.begin(), text.end(), word.begin(), word.end(), [](char a, char b) {
    return std::tolower(static_cast<unsigned char>(a)) == std::tolower(static_cast<unsigned char>(b));
  });
  return it != text.end();
}

bool contains_any(std::string_view text, std::initializer_list<std::string_view> words) {
  return std::any_of(words.begin(), words.end(), [&](std::string_view w) { return contains_nocase(text, w); });
}

std::vector<std::string> split_lines(std::string_view text) {
  std::vector<std::string> lines;
  while (!text.empty()) {
    auto end = text.find('\n');
    lines.emplace_back(text.substr(0, end));
    if (end == std::string_view::npos) {
      break;
    }
    text.remove_prefix(end + 1);
  }
  return lines;
}

std::vector<std::string> nonempty_lines(std::string_view text) {
  std::vector<std::string> lines;
  for (const auto& line : split_lines(text)) {
    auto trimmed = util::trim(line);
    if (!trimmed.empty()) {
      lines.push_back(trimmed);
    }
  }
  return lines;
}

std::string without_period(std::string line) {
  if (!line.empty() && line.back() == '.') {
    line.pop_back();
  }
  return line;
}

std::expected<void, Error> validate(const OpenSshTarget& target) {
  const auto where = target.describe();
  auto bad = [&](std::string why) {
    return std::unexpected(Error(fmt::format("{}: {}", where, why), ErrorKind::bad_input));
  };
  if (target.destination.empty()) {
    return bad("no destination to connect to");
  }
  if (target.port && (*target.port <= 0 || *target.port > 65535)) {
    return bad(fmt::format("invalid port {}", *target.port));
  }
  if (target.user && target.user->empty()) {
    return bad("the user is empty");
  }
  if (target.strict_host_key_checking && *target.strict_host_key_checking != "yes" &&
      *target.strict_host_key_checking != "accept-new") {
    return bad(fmt::format("strict_host_key_checking is \"{}\"; it must be \"yes\" or \"accept-new\"",
                           *target.strict_host_key_checking));
  }
  if (target.control_dir.empty()) {
    return bad("no control_dir for the master's socket");
  }
  if (target.connect_timeout <= util::Duration::zero()) {
    return bad("the connect timeout must be positive");
  }
  if (target.keepalive < util::Duration::zero()) {
    return bad("the keepalive interval must not be negative");
  }
  for (const auto& value : {target.destination, target.control_dir}) {
    if (value.find_first_of("\n\r") != std::string::npos) {
      return bad(fmt::format("\"{}\" holds a line break", value));
    }
  }
  return {};
}

} // namespace

long long whole_seconds(util::Duration d) {
  return std::max<long long>(1, std::chrono::ceil<std::chrono::seconds>(d).count());
}

// A value for `-o Name=value`: ssh splits option lines at spaces and takes
// quotes, so such values go in double quotes.
std::string option_value(std::string_view value) {
  if (value.find_first_of(" \t\"'\\") == std::string_view::npos) {
    return std::string(value);
  }
  std::string quoted = "\"";
  for (char c : value) {
    if (c == '"' || c == '\\') {
      quoted += '\\';
    }
    quoted += c;
  }
  return quoted + "\"";
}

// ssh expands %-tokens in paths (ControlPath, UserKnownHostsFile, -i).
std::string escape_tokens(std::string_view path) {
  std::string out;
  for (char c : path) {
    out += c;
    if (c == '%') {
      out += '%';
    }
  }
  return out;
}

SshFailure classify_failure(const std::string& where, std::string_view err, int status) {
  auto lines = nonempty_lines(err);
  if (status != 255) {
    // ssh itself worked: the login shell on the node did not.
    auto detail = lines.empty() ? std::string() : ": " + lines.back();
    return {Error(fmt::format("{}: the node's login shell could not run a command (exit status {}){}", where, status,
                              detail)),
            false};
  }
  if (lines.empty()) {
    // A client whose master died under it says nothing at LogLevel ERROR.
    return {Error(fmt::format("{}: ssh exited with status 255 without a message", where), ErrorKind::unreachable),
            true};
  }
  const std::string& last = lines.back();
  std::string message = fmt::format("{}: {}", where, last);
  for (const auto& line : lines) {
    if (&line != &last && contains_nocase(line, "host key") && !line.starts_with("Add correct host key")) {
      message += fmt::format(" ({})", without_period(line));
    } else if (line.starts_with("SHA256:")) {
      message += fmt::format(" (the host sent key {})", without_period(line));
    } else if (line.starts_with("ssh-keygen -f")) {
      message += fmt::format("; to forget the old key: {}", line);
    } else if (line.starts_with("Warning: Identity file")) {
      message += fmt::format("; {}", without_period(line));
    }
  }
  const std::string all(err);
  if (contains_any(all, {"mux_client", "Control socket", "ControlSocket", "control master", "Session open refused"})) {
    return {Error(message, ErrorKind::unreachable), true};
  }
  if (contains_any(all, {"Bad configuration option", "command-line line", "Unsupported option", "bad configuration",
                         "Can't open user config", "Bad port", "unknown option", "illegal option", "usage: ssh"})) {
    return {Error(message, ErrorKind::bad_input), false};
  }
  if (contains_any(last, {"timed out", "timeout"})) {
    return {Error(message, ErrorKind::timed_out), false};
  }
  if (contains_any(all, {"Connection refused", "No route to host", "Network is unreachable", "Could not resolve",
                         "Name or service not known", "name resolution", "Connection closed", "Connection reset",
                         "closed by remote host", "kex_exchange_identification", "Broken pipe", "Host is down",
                         "connect to host"})) {
    return {Error(message, ErrorKind::unreachable), false};
  }
  return {Error(message), false};
}

OpenSshHost::OpenSshHost(OpenSshTarget target, std::string program, std::string control_path)
    : m_target(std::move(target)), m_program(std::move(program)), m_control_path(std::move(control_path)),
      m_where(m_target.describe()) {
  m_shells = std::make_unique<ShellPool>(
      m_where, [this](const std::string& command_line, util::Duration) { return open_shell(command_line); },
      m_target.connect_timeout);
}

OpenSshHost::~OpenSshHost() {
  // Each shell's ssh is killed, before the master is asked to go.
  m_shells.reset();
  {
    std::lock_guard lock(m_tunnel_mutex);
    // Stops its thread and kills the `ssh -W` of every open connection.
    m_tunnels.reset();
  }
  drop_master();
  clear_jump_errors(m_target);
  // The folder is this host's alone: gone with it, unless something else was put there.
  std::error_code ec;
  std::filesystem::remove(m_target.control_dir, ec);
}

std::vector<std::string> OpenSshHost::argv(const std::vector<std::string>& extra) const {
  return ssh_argv(m_target, m_program, extra);
}

void add_login_options(const OpenSshTarget& t, std::vector<std::string>& args) {
  auto option = [&](std::string_view name, std::string_view value) {
    args.insert(args.end(), {"-o", fmt::format("{}={}", name, option_value(value))});
  };
  option("BatchMode", "yes");
  option("ConnectTimeout", std::to_string(whole_seconds(t.connect_timeout)));
  option("ServerAliveInterval",
         t.keepalive > util::Duration::zero() ? std::to_string(whole_seconds(t.keepalive)) : std::string("0"));
  option("ServerAliveCountMax", "3");
  // Errors only: "Warning: Permanently added ..." would land in a command's stderr.
  option("LogLevel", "ERROR");
  // A Local/Remote/DynamicForward or RemoteCommand of the user's config would
  // be set up again by every command (and a hop's `-W` refuses a command).
  option("ClearAllForwardings", "yes");
  option("RemoteCommand", "none");
  if (t.known_hosts) {
    option("UserKnownHostsFile", escape_tokens(*t.known_hosts));
  }
  if (t.strict_host_key_checking) {
    option("StrictHostKeyChecking", *t.strict_host_key_checking);
  }
  if (t.user) {
    args.insert(args.end(), {"-l", *t.user});
  }
  if (t.port) {
    args.insert(args.end(), {"-p", std::to_string(*t.port)});
  }
  // Not -i: ssh looks for the file named by -i before it expands its tokens,
  // and drops it ("not accessible") when the name has a '%'.
  for (const auto& identity : t.identities) {
    option("IdentityFile", escape_tokens(identity));
  }
}

std::vector<std::string> ssh_argv(const OpenSshTarget& t, const std::string& program,
                                  const std::vector<std::string>& extra) {
  std::vector<std::string> args = {program};
  if (t.config_file) {
    args.insert(args.end(), {"-F", *t.config_file});
  }
  add_login_options(t, args);
  args.insert(args.end(),
              {"-o", "ControlMaster=auto", "-o", "ControlPath=" + option_value(escape_tokens(t.control_dir) + "/%C"),
               "-o", fmt::format("ControlPersist={}", std::chrono::seconds(k_control_persist).count())});
  if (!t.jumps.empty()) {
    // Taken verbatim to the end of the option: no quoting, only tokens.
    args.insert(args.end(), {"-o", "ProxyCommand=" + proxy_command(t, program)});
  }
  args.push_back("-T");
  args.insert(args.end(), extra.begin(), extra.end());
  args.push_back("--");
  args.push_back(t.destination);
  return args;
}

std::optional<pid_t> OpenSshHost::master_listening() const {
  sockaddr_un address{};
  if (m_control_path.size() >= sizeof address.sun_path) {
    return std::nullopt;
  }
  address.sun_family = AF_UNIX;
  std::memcpy(address.sun_path, m_control_path.c_str(), m_control_path.size() + 1);
  util::UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd) {
    return std::nullopt;
  }
  // A master that died (SIGKILL) leaves its socket: connecting is refused.
  if (::connect(fd.get(), reinterpret_cast<const sockaddr*>(&address), sizeof address) != 0) {
    return std::nullopt;
  }
  ucred peer{};
  socklen_t size = sizeof peer;
  if (::getsockopt(fd.get(), SOL_SOCKET, SO_PEERCRED, &peer, &size) != 0) {
    return pid_t{0};
  }
  return peer.pid;
}

void OpenSshHost::note_master(std::optional<pid_t> pid) {
  if (pid && pid != m_master_pid) {
    m_master_pid = pid;
    ++m_masters_seen;
  }
}

std::expected<void, Error> OpenSshHost::ensure_master(Check check) {
  std::lock_guard lock(m_master_mutex);
  const auto listening = master_listening();
  note_master(listening);
  if (check == Check::when_missing && listening) {
    return {};
  }
  const auto bound = m_target.connect_timeout + k_check_slack;
  clear_jump_errors(m_target);
  RunSpec spec;
  spec.argv = argv();
  spec.argv.push_back("exit 0");
  spec.start_deadline = Clock::now() + bound;
  auto run = run_ssh(spec);
  if (!run) {
    return std::unexpected(
        Error(fmt::format("{}: cannot start {}: {}", m_where, m_program, std::strerror(run.error()))));
  }
  if (run->status != 0) {
    if (auto hop = jump_failure(m_target, m_where)) {
      return std::unexpected(*hop);
    }
  }
  if (run->timed_out) {
    auto lines = nonempty_lines(run->err);
    return std::unexpected(Error(fmt::format("{}: no answer within {}{}", m_where, util::format_duration(bound),
                                             lines.empty() ? std::string() : " (" + lines.back() + ")"),
                                 ErrorKind::timed_out));
  }
  if (run->status == 0) {
    note_master(master_listening());
    return {};
  }
  return std::unexpected(classify_failure(m_where, run->err, run->status.value_or(-1)).error);
}

void OpenSshHost::abandon_master_if_hung() {
  std::lock_guard lock(m_master_mutex);
  RunSpec spec;
  spec.argv = argv({"-O", "check"});
  spec.start_deadline = Clock::now() + k_exit_request_timeout;
  auto run = run_ssh(spec);
  // Only the master's own answer counts: OpenSSH 10's client gives up on a master that does
  // not answer ("master hello exchange failed"), logs in by itself and exits 0.
  if (run && !run->timed_out && run->status == 0 && run->err.find("Master running") != std::string::npos) {
    // It answers: the node or its login shell was slow, and the master stays
    // for the commands running over it.
    return;
  }
  std::error_code ec;
  std::filesystem::remove(m_control_path, ec);
}

void OpenSshHost::drop_master() {
  RunSpec spec;
  spec.argv = argv({"-O", "exit"});
  spec.start_deadline = Clock::now() + k_exit_request_timeout;
  [[maybe_unused]] auto asked = run_ssh(spec);
  // The master removes its socket as it exits; one that hangs or died keeps it.
  std::error_code ec;
  std::filesystem::remove(m_control_path, ec);
}

std::expected<int, Error> OpenSshHost::open_tunnel(const std::string& target_host, int target_port) {
  if (target_host.empty() || target_port <= 0 || target_port > 65535 ||
      target_host.find_first_of(" \t\n/") != std::string::npos) {
    return std::unexpected(Error(fmt::format("{}: invalid tunnel target \"{}:{}\"", m_where, target_host, target_port),
                                 ErrorKind::bad_input));
  }
  std::lock_guard lock(m_tunnel_mutex);
  if (!m_tunnels) {
    try {
      m_tunnels = std::make_unique<TunnelRelay>(*this);
    } catch (const std::system_error& error) {
      return std::unexpected(Error(fmt::format("{}: cannot start the tunnel thread: {}", m_where, error.what())));
    }
  }
  return m_tunnels->listen(target_host, target_port);
}

std::expected<std::unique_ptr<Host>, Error> connect_host(const OpenSshTarget& target) {
  if (auto valid = validate(target); !valid) {
    return std::unexpected(valid.error());
  }
  const auto where = target.describe();
  auto program = find_in_path(target.ssh_program);
  if (!program) {
    return std::unexpected(
        Error(fmt::format("{}: the ssh client \"{}\" is not installed (not found in PATH)", where, target.ssh_program),
              ErrorKind::bad_input));
  }
  std::error_code ec;
  std::filesystem::create_directories(target.control_dir, ec);
  if (ec || ::chmod(target.control_dir.c_str(), 0700) != 0) {
    return std::unexpected(Error(fmt::format("{}: cannot create the control directory {}: {}", where,
                                             target.control_dir, ec ? ec.message() : std::strerror(errno))));
  }
  // ssh expands ControlPath (%C hashes host, port, user and jump) itself;
  // -G prints the result without connecting.
  RunSpec spec;
  spec.argv = ssh_argv(target, *program, {"-G"});
  spec.start_deadline = Clock::now() + k_local_ssh_timeout;
  auto config = run_ssh(spec);
  if (!config) {
    return std::unexpected(
        Error(fmt::format("{}: cannot start {}: {}", where, *program, std::strerror(config.error()))));
  }
  if (config->status != 0) {
    return std::unexpected(classify_failure(where, config->err, config->status.value_or(-1)).error);
  }
  std::string control_path;
  for (const auto& line : split_lines(config->out)) {
    if (line.starts_with("controlpath ")) {
      control_path = line.substr(std::string_view("controlpath ").size());
    }
  }
  if (control_path.empty()) {
    return std::unexpected(Error(fmt::format("{}: \"{} -G\" did not print the control path (OpenSSH 6.8 or later "
                                             "is needed)",
                                             where, *program),
                                 ErrorKind::bad_input));
  }
  if (control_path.size() + k_control_path_suffix >= sizeof(sockaddr_un::sun_path)) {
    return std::unexpected(Error(fmt::format("{}: the control socket {} is {} bytes long; a socket's path must stay "
                                             "under {}: choose a shorter control_dir",
                                             where, control_path, control_path.size(),
                                             sizeof(sockaddr_un::sun_path) - k_control_path_suffix),
                                 ErrorKind::bad_input));
  }
  auto host = std::make_unique<OpenSshHost>(target, *program, control_path);
  if (auto up = host->ensure_master(OpenSshHost::Check::always); !up) {
    return std::unexpected(up.error());
  }
  return host;
}

} // namespace specctl::remote::openssh

namespace specctl::remote {

std::string OpenSshTarget::describe() const {
  std::string address = destination;
  if (user) {
    address = *user + "@" + address;
  }
  if (port) {
    address += ":" + std::to_string(*port);
  }
  if (name.empty()) {
    return "openssh: " + address;
  }
  return fmt::format("{} (openssh: {})", name, address);
}

std::expected<std::unique_ptr<Host>, Error> connect_openssh(const OpenSshTarget& target) {
  return openssh::connect_host(target);
}

} // namespace specctl::remote
