#include "jump_topology.hpp"

#include "files.hpp"
#include "net.hpp"
#include "process.hpp"
#include "skip.hpp"
#include "wait.hpp"

#include <specctl/util/text.hpp>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <sstream>
#include <stdexcept>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

extern char** environ;

namespace specctl::test {

namespace {

constexpr std::string_view k_netns_prefix = "specctl-jt-";
constexpr std::string_view k_netns_dir = "/run/netns";
// The links, RFC 5737 documentation ranges: ".1" is the nearer hop's end, ".2" the farther's.
constexpr std::string_view k_first_link = "198.51.100";
constexpr std::string_view k_second_link = "203.0.113";
constexpr std::string_view k_bastion_address = "127.0.0.1";
constexpr int k_listen_backlog = 64;
constexpr int k_accept_poll_ms = 50;
constexpr int k_bind_attempts = 3;
constexpr auto k_ip_timeout = std::chrono::seconds{10};
constexpr auto k_client_connect_timeout = std::chrono::seconds{10};
constexpr auto k_client_alive_interval = std::chrono::seconds{5};

std::string ns_error(const std::vector<std::string>& argv, const ProgramResult& result) {
  return "\"" + util::join(argv, " ") + "\" failed (exit " + std::to_string(result.exit_code) + "): " + result.output;
}

std::expected<void, std::string> run_ip(const std::string& ip, std::vector<std::string> args,
                                        const std::filesystem::path& scratch) {
  args.insert(args.begin(), ip);
  auto result = run_program(args, scratch, {}, k_ip_timeout);
  if (result.exit_code != 0) {
    return std::unexpected(ns_error(args, result));
  }
  return {};
}

// SIGKILLs whatever runs in namespace `ns` (never this process) and waits, bounded, until it is gone.
void kill_namespace_processes(const std::string& ip, const std::string& ns, const std::filesystem::path& scratch) {
  auto result = run_program({ip, "netns", "pids", ns}, scratch, {}, k_ip_timeout);
  std::istringstream in(result.output);
  std::vector<pid_t> pids;
  long pid = 0;
  while (in >> pid) {
    if (pid > 0 && pid != ::getpid()) {
      pids.push_back(static_cast<pid_t>(pid));
      ::kill(static_cast<pid_t>(pid), SIGKILL);
    }
  }
  wait_until([&] { return std::none_of(pids.begin(), pids.end(), process_alive); }, k_sshd_stop_grace);
}

// The pid in "specctl-jt-<pid>-...", or -1.
pid_t owner_of(const std::string& ns) {
  if (!ns.starts_with(k_netns_prefix)) {
    return -1;
  }
  auto digits = ns.substr(k_netns_prefix.size());
  digits = digits.substr(0, digits.find('-'));
  if (digits.empty() || digits.find_first_not_of("0123456789") != std::string::npos || digits.size() > 9) {
    return -1;
  }
  return static_cast<pid_t>(std::stol(digits));
}

// Namespaces of this scheme left by test processes that died without their destructors.
void sweep_stale_namespaces(const std::string& ip) {
  std::error_code ec;
  const auto scratch = std::filesystem::temp_directory_path(ec);
  std::vector<std::string> stale;
  for (std::filesystem::directory_iterator it(std::string(k_netns_dir), ec), end; !ec && it != end; it.increment(ec)) {
    auto name = it->path().filename().string();
    pid_t owner = owner_of(name);
    if (owner > 0 && owner != ::getpid() && !process_alive(owner)) {
      stale.push_back(std::move(name));
    }
  }
  for (const auto& name : stale) {
    kill_namespace_processes(ip, name, scratch);
    // Another test process may be sweeping the same one; whoever comes second fails, harmlessly.
    (void)run_ip(ip, {"netns", "del", name}, scratch);
  }
}

std::optional<std::string> probe_namespaces() {
  if (::geteuid() != 0) {
    return "no network namespaces (not root: `ip netns add` needs CAP_SYS_ADMIN)";
  }
  auto ip = ip_program();
  if (ip.empty()) {
    return "no ip (iproute2 is not installed)";
  }
  std::error_code ec;
  const auto scratch = std::filesystem::temp_directory_path(ec);
  const std::string name = std::string(k_netns_prefix) + std::to_string(::getpid()) + "-probe";
  if (auto made = run_ip(ip, {"netns", "add", name}, scratch); !made) {
    return "no network namespaces (" + made.error() + ")";
  }
  (void)run_ip(ip, {"netns", "del", name}, scratch);
  return std::nullopt;
}

std::string quoted(const std::filesystem::path& path) {
  return "\"" + path.string() + "\"";
}

} // namespace

std::string_view hop_name(Hop hop) {
  switch (hop) {
  case Hop::bastion:
    return "bastion";
  case Hop::login2:
    return "login2";
  case Hop::target:
    return "target";
  }
  return "?";
}

std::optional<std::string> JumpTopology::unavailable() {
  if (pretend_missing("netns")) {
    return "no network namespaces (SPECCTL_TEST_WITHOUT names netns)";
  }
  if (auto why = TestSshd::unavailable()) {
    return why;
  }
  // Probed once per process: it adds and deletes a namespace.
  static const std::optional<std::string> probed = probe_namespaces();
  return probed;
}

std::expected<std::unique_ptr<JumpTopology>, std::string> JumpTopology::start(JumpTopologyOptions options) {
  if (auto why = unavailable()) {
    return std::unexpected(*why);
  }
  if (options.hops != 1 && options.hops != 2) {
    return std::unexpected("hops: " + std::to_string(options.hops) + " (1 or 2)");
  }
  std::unique_ptr<JumpTopology> topology(new JumpTopology());
  topology->m_options = std::move(options);
  topology->m_ip = ip_program();
  sweep_stale_namespaces(topology->m_ip);
  std::string pattern = (std::filesystem::temp_directory_path() / "specctl-jump-XXXXXX").string();
  if (::mkdtemp(pattern.data()) == nullptr) {
    return std::unexpected(std::string("mkdtemp failed: ") + std::strerror(errno));
  }
  topology->m_dir = pattern;
  if (auto made = topology->make_namespaces(); !made) {
    return std::unexpected(made.error());
  }

  auto target_env = topology->m_options.target_session_env;
  target_env.push_back("SPECCTL_TEST_HOP=target");
  auto target = TestSshd::start(
      {.listen_address = topology->address(Hop::target), .session_env = target_env, .netns = topology->m_t});
  if (!target) {
    return std::unexpected("target sshd in " + topology->m_t + ": " + target.error());
  }
  topology->m_target = std::move(*target);
  const auto one_key = public_key_of(topology->user_key().string() + ".pub") + "\n";
  if (topology->hops() == 2) {
    auto login2 = TestSshd::start({.listen_address = topology->address(Hop::login2),
                                   .session_env = {"SPECCTL_TEST_HOP=login2"},
                                   .netns = topology->m_j2});
    if (!login2) {
      return std::unexpected("login2 sshd in " + topology->m_j2 + ": " + login2.error());
    }
    topology->m_login2 = std::move(*login2);
    write_file(topology->m_login2->authorized_keys(), read_file(topology->m_login2->authorized_keys()) + one_key);
  }
  write_file(topology->m_dir / "authorized_keys", one_key);
  if (auto made = topology->start_bastion(); !made) {
    return std::unexpected(made.error());
  }

  write_file(topology->known_hosts(), topology->known_hosts_lines());
  std::ostringstream config;
  config << "Host *\n"
         << "  User " << topology->user() << "\n"
         << "  IdentityFile " << quoted(topology->user_key()) << "\n"
         << "  IdentitiesOnly yes\n"
         << "  IdentityAgent none\n"
         << "  UserKnownHostsFile " << quoted(topology->known_hosts()) << "\n"
         << "  GlobalKnownHostsFile /dev/null\n"
         << "  StrictHostKeyChecking yes\n"
         << "  UpdateHostKeys no\n"
         << "  BatchMode yes\n"
         << "  ConnectTimeout " << k_client_connect_timeout.count() << "\n"
         << "  ServerAliveInterval " << k_client_alive_interval.count() << "\n"
         << "  ServerAliveCountMax 3\n"
         << "  ControlMaster no\n"
         << "  ControlPath none\n";
  write_file(topology->ssh_config(), config.str());
  return topology;
}

JumpTopology::~JumpTopology() {
  m_stop = true;
  if (m_acceptor.joinable()) {
    m_acceptor.join();
  }
  {
    std::lock_guard lock(m_mutex);
    for (pid_t pid : m_connections) {
      auto under = descendants(pid);
      ::kill(pid, SIGKILL);
      for (pid_t child : under) {
        ::kill(child, SIGKILL);
      }
      wait_for(pid, k_sshd_stop_grace);
    }
    m_connections.clear();
  }
  m_login2.reset();
  m_target.reset();
  // Whatever slipped away from the process trees (a daemonized command) is still in a namespace.
  for (const auto& ns : m_namespaces) {
    kill_namespace_processes(m_ip, ns, m_dir);
    (void)run_ip(m_ip, {"netns", "del", ns}, m_dir);
  }
  std::error_code ec;
  if (!m_dir.empty()) {
    std::filesystem::remove_all(m_dir, ec);
  }
}

const std::string& JumpTopology::user() const {
  return m_target->user();
}

std::string JumpTopology::address(Hop hop) const {
  switch (hop) {
  case Hop::bastion:
    return std::string(k_bastion_address);
  case Hop::login2:
    return hops() == 2 ? std::string(k_first_link) + ".2" : std::string();
  case Hop::target:
    return std::string(hops() == 2 ? k_second_link : k_first_link) + ".2";
  }
  return {};
}

int JumpTopology::port(Hop hop) const {
  switch (hop) {
  case Hop::bastion:
    return m_bastion_port;
  case Hop::login2:
    return m_login2 ? m_login2->port() : -1;
  case Hop::target:
    return m_target ? m_target->port() : -1;
  }
  return -1;
}

std::string JumpTopology::netns(Hop hop) const {
  switch (hop) {
  case Hop::bastion:
    return m_j1;
  case Hop::login2:
    return m_j2;
  case Hop::target:
    return m_t;
  }
  return {};
}

std::string JumpTopology::known_hosts_line(Hop hop) const {
  switch (hop) {
  case Hop::bastion:
    return "[" + address(hop) + "]:" + std::to_string(m_bastion_port) + " " + public_key_of(m_dir / "host_key.pub") +
           "\n";
  case Hop::login2:
    return m_login2 ? m_login2->known_hosts_line() : std::string();
  case Hop::target:
    return m_target->known_hosts_line();
  }
  return {};
}

std::string JumpTopology::host_key_fingerprint(Hop hop) const {
  switch (hop) {
  case Hop::bastion:
    return fingerprint_of(m_dir / "host_key.pub");
  case Hop::login2:
    return m_login2 ? m_login2->host_key_fingerprint() : std::string();
  case Hop::target:
    return m_target->host_key_fingerprint();
  }
  return {};
}

std::string JumpTopology::known_hosts_lines() const {
  return known_hosts_line(Hop::bastion) + known_hosts_line(Hop::login2) + known_hosts_line(Hop::target);
}

std::filesystem::path JumpTopology::user_key() const {
  return m_target->user_key();
}

std::string JumpTopology::jump_spec() const {
  auto spec = user() + "@" + address(Hop::bastion) + ":" + std::to_string(port(Hop::bastion));
  if (hops() == 2) {
    spec += "," + user() + "@" + address(Hop::login2) + ":" + std::to_string(port(Hop::login2));
  }
  return spec;
}

remote::SshTarget JumpTopology::hop_target(Hop hop, std::string name) const {
  auto target = m_target->target(std::move(name));
  target.hostname = address(hop);
  target.port = port(hop);
  target.known_hosts = known_hosts().string();
  return target;
}

std::size_t JumpTopology::bastion_connections() const {
  std::lock_guard lock(m_mutex);
  return m_accepted;
}

std::vector<pid_t> JumpTopology::bastion_session_pids() const {
  std::vector<pid_t> pids;
  std::lock_guard lock(m_mutex);
  for (pid_t pid : m_connections) {
    if (!process_alive(pid)) {
      continue;
    }
    pids.push_back(pid);
    for (pid_t child : descendants(pid)) {
      // OpenSSH 9.8 and later name the per-connection processes sshd-session and sshd-auth.
      if (comm_of(child).starts_with("sshd")) {
        pids.push_back(child);
      }
    }
  }
  return pids;
}

std::size_t JumpTopology::kill_bastion_sessions() {
  auto pids = bastion_session_pids();
  for (pid_t pid : pids) {
    ::kill(pid, SIGKILL);
  }
  wait_until([&] { return std::none_of(pids.begin(), pids.end(), process_alive); }, k_jump_settle_timeout);
  return pids.size();
}

std::expected<void, std::string> JumpTopology::change_host_key(Hop hop) {
  TestSshd* sshd = hop == Hop::bastion ? nullptr : hop == Hop::login2 ? m_login2.get() : m_target.get();
  if (hop != Hop::bastion && sshd == nullptr) {
    return std::unexpected("change_host_key: no " + std::string(hop_name(hop)) + " in a one-hop topology");
  }
  if (sshd != nullptr) {
    return sshd->change_host_key();
  }
  // Every bastion connection execs a fresh sshd -i, which reads the new key.
  const auto key = m_dir / "host_key";
  const auto next = key.parent_path() / "host_key.next";
  std::error_code ec;
  std::filesystem::remove(next, ec);
  std::filesystem::remove(next.string() + ".pub", ec);
  if (auto made = generate_key(next); !made) {
    return made;
  }
  std::filesystem::rename(next.string() + ".pub", key.string() + ".pub", ec);
  if (!ec) {
    std::filesystem::rename(next, key, ec);
  }
  if (ec) {
    return std::unexpected("change_host_key: cannot replace " + key.string() + ": " + ec.message());
  }
  return {};
}

std::string JumpTopology::logs() const {
  std::string text = "--- bastion " + std::string(k_bastion_address) + ":" + std::to_string(m_bastion_port) +
                     " (sessions in " + m_j1 + ") ---\n" + read_file(m_dir / "sshd.log");
  if (m_login2) {
    text += "--- login2 " + address(Hop::login2) + ":" + std::to_string(m_login2->port()) + " (in " + m_j2 + ") ---\n" +
            m_login2->log();
  }
  if (m_target) {
    text += "--- target " + address(Hop::target) + ":" + std::to_string(m_target->port()) + " (in " + m_t + ") ---\n" +
            m_target->log();
  }
  return text;
}

std::expected<void, std::string> JumpTopology::make_namespaces() {
  static std::atomic<int> serial{0};
  const auto base = std::string(k_netns_prefix) + std::to_string(::getpid()) + "-" + std::to_string(serial++) + "-";
  m_j1 = base + "j1";
  m_t = base + "t";
  if (hops() == 2) {
    m_j2 = base + "j2";
  }
  for (const auto* ns : {&m_j1, &m_j2, &m_t}) {
    if (ns->empty()) {
      continue;
    }
    if (auto made = run_ip(m_ip, {"netns", "add", *ns}, m_dir); !made) {
      return made;
    }
    m_namespaces.push_back(*ns);
    if (auto up = run_ip(m_ip, {"-n", *ns, "link", "set", "lo", "up"}, m_dir); !up) {
      return up;
    }
  }
  if (hops() == 1) {
    return make_link(m_j1, m_t, std::string(k_first_link));
  }
  if (auto made = make_link(m_j1, m_j2, std::string(k_first_link)); !made) {
    return made;
  }
  return make_link(m_j2, m_t, std::string(k_second_link));
}

std::expected<void, std::string> JumpTopology::make_link(const std::string& from, const std::string& to,
                                                         const std::string& net) {
  // Both ends are born inside their namespaces: this process's never sees them, and
  // interface names need only be unique within one namespace.
  const std::vector<std::vector<std::string>> steps{
      {"-n", from, "link", "add", "to-next", "type", "veth", "peer", "name", "to-prev", "netns", to},
      {"-n", from, "addr", "add", net + ".1/24", "dev", "to-next"},
      {"-n", to, "addr", "add", net + ".2/24", "dev", "to-prev"},
      {"-n", from, "link", "set", "to-next", "up"},
      {"-n", to, "link", "set", "to-prev", "up"},
  };
  for (const auto& step : steps) {
    if (auto done = run_ip(m_ip, step, m_dir); !done) {
      return done;
    }
  }
  return {};
}

std::expected<void, std::string> JumpTopology::start_bastion() {
  if (auto made = generate_key(m_dir / "host_key"); !made) {
    return made;
  }
  const auto config = m_dir / "sshd_config";
  std::ostringstream text;
  text << "HostKey " << quoted(m_dir / "host_key") << "\n"
       << "AuthorizedKeysFile " << quoted(m_dir / "authorized_keys") << "\n"
       << "PidFile none\n"
       << "StrictModes no\n"
       << "UsePAM no\n"
       << "PermitRootLogin yes\n"
       << "PasswordAuthentication no\n"
       << "KbdInteractiveAuthentication no\n"
       << "AllowTcpForwarding yes\n"
       << "LogLevel VERBOSE\n"
       << "SetEnv \"HOME=" << (m_dir / "home").string() << "\" \"SPECCTL_TEST_HOP=bastion\"\n"; // sshd.cpp: why
  write_file(config, text.str());
  // A configuration error shows here, not as a connection that closes at once.
  auto checked = run_program({"/usr/sbin/sshd", "-t", "-f", config.string()}, m_dir);
  if (checked.exit_code != 0) {
    return std::unexpected("bastion sshd_config: " + checked.output);
  }

  m_j1_fd.reset(::open((std::string(k_netns_dir) + "/" + m_j1).c_str(), O_RDONLY | O_CLOEXEC));
  m_bastion_log.reset(::open((m_dir / "sshd.log").c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600));
  if (!m_j1_fd || !m_bastion_log) {
    return std::unexpected("bastion: cannot open " + m_j1 + " or its log: " + std::strerror(errno));
  }
  m_bastion_argv = {"/usr/sbin/sshd", "-i", "-e", "-f", config.string()};
  for (auto& arg : m_bastion_argv) {
    m_bastion_args.push_back(arg.data());
  }
  m_bastion_args.push_back(nullptr);

  std::string why;
  for (int attempt = 0; attempt < k_bind_attempts; ++attempt) {
    int port = -1;
    try {
      port = free_port(std::string(k_bastion_address));
    } catch (const std::runtime_error& e) {
      return std::unexpected(e.what());
    }
    util::UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    int on = 1;
    ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(static_cast<std::uint16_t>(port));
    ::inet_pton(AF_INET, std::string(k_bastion_address).c_str(), &address.sin_addr);
    if (fd && ::bind(fd.get(), reinterpret_cast<sockaddr*>(&address), sizeof address) == 0 &&
        ::listen(fd.get(), k_listen_backlog) == 0) {
      m_listen_fd = std::move(fd);
      m_bastion_port = port;
      m_acceptor = std::thread([this] { accept_loop(); });
      return {};
    }
    why = "bastion: cannot listen on 127.0.0.1:" + std::to_string(port) + ": " + std::strerror(errno);
  }
  return std::unexpected(why);
}

void JumpTopology::accept_loop() {
  while (!m_stop) {
    reap_connections();
    pollfd p{m_listen_fd.get(), POLLIN, 0};
    if (::poll(&p, 1, k_accept_poll_ms) <= 0) {
      continue;
    }
    util::UniqueFd client(::accept4(m_listen_fd.get(), nullptr, nullptr, SOCK_CLOEXEC));
    if (!client) {
      continue;
    }
    // Under the lock: a pid is recorded before anyone can look for sessions to kill.
    std::lock_guard lock(m_mutex);
    ++m_accepted;
    pid_t pid = serve_connection(client.get());
    if (pid > 0) {
      m_connections.push_back(pid);
    }
  }
}

void JumpTopology::reap_connections() {
  std::lock_guard lock(m_mutex);
  std::erase_if(m_connections, [](pid_t pid) {
    int status = 0;
    return ::waitpid(pid, &status, WNOHANG) != 0;
  });
}

pid_t JumpTopology::serve_connection(int socket) {
  const pid_t parent = ::getpid();
  const int j1 = m_j1_fd.get();
  const int log = m_bastion_log.get();
  char* const* args = m_bastion_args.data();
  char* const* env = environ;
  pid_t pid = ::fork();
  if (pid != 0) {
    return pid;
  }
  // The child: async-signal-safe calls only. It dies with the acceptor thread.
  prepare_forked_child(parent);
  if (::setns(j1, CLONE_NEWNET) != 0) {
    ::_exit(126);
  }
  // Above 2, so that dup2 onto 0 and 1 never meets itself (and keeps close-on-exec).
  int conn = ::fcntl(socket, F_DUPFD_CLOEXEC, 3);
  if (conn < 0 || ::dup2(conn, 0) < 0 || ::dup2(conn, 1) < 0 || ::dup2(log, 2) < 0) {
    ::_exit(126);
  }
  ::execve(args[0], args, env);
  ::_exit(127);
}

} // namespace specctl::test
