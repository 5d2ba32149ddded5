#include "sshd.hpp"

#include <specctl/util/unique_fd.hpp>

#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <stdexcept>
#include <thread>

#include <fcntl.h>
#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>

namespace specctl::test {

namespace {

// The target's bounds: short, so a test that cuts connections sees the retries quickly.
constexpr auto k_target_connect_timeout = std::chrono::seconds{10};
constexpr auto k_target_keepalive = std::chrono::seconds{5};
constexpr int k_target_reconnect_attempts = 4;
constexpr auto k_target_reconnect_backoff = std::chrono::milliseconds{200};
constexpr auto k_target_reconnect_backoff_max = std::chrono::seconds{1};

} // namespace

std::string ip_program() {
  for (const char* candidate : {"/usr/sbin/ip", "/sbin/ip", "/usr/bin/ip", "/bin/ip"}) {
    if (::access(candidate, X_OK) == 0) {
      return candidate;
    }
  }
  auto found = find_program("ip");
  return found.find('/') != std::string::npos ? found : std::string();
}

bool port_accepts_in_netns(const std::string& netns, int port, const std::string& ip) {
  bool accepts = false;
  std::thread probe([&] {
    util::UniqueFd ns(::open(("/run/netns/" + netns).c_str(), O_RDONLY | O_CLOEXEC));
    if (ns && ::setns(ns.get(), CLONE_NEWNET) == 0) {
      accepts = port_accepts(port, ip);
    }
  });
  probe.join();
  return accepts;
}

std::expected<void, std::string> generate_key(const std::filesystem::path& path) {
  auto result = run_program({"ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "specctl-test", "-f", path.string()},
                            path.parent_path());
  if (result.exit_code != 0) {
    return std::unexpected("ssh-keygen failed: " + result.output);
  }
  return {};
}

std::string public_key_of(const std::filesystem::path& pub) {
  std::istringstream in(read_file(pub));
  std::string type;
  std::string key;
  in >> type >> key;
  return type + " " + key;
}

std::string fingerprint_of(const std::filesystem::path& pub) {
  auto result = run_program({"ssh-keygen", "-l", "-E", "sha256", "-f", pub.string()}, pub.parent_path());
  std::istringstream in(result.output);
  std::string bits;
  std::string fingerprint;
  in >> bits >> fingerprint;
  return fingerprint;
}

std::optional<std::string> TestSshd::unavailable() {
  if (pretend_missing("sshd") || ::access("/usr/sbin/sshd", X_OK) != 0) {
    return "no sshd (/usr/sbin/sshd is not installed; scripts/setup.sh --tests installs openssh-server)";
  }
  return std::nullopt;
}

std::expected<std::unique_ptr<TestSshd>, std::string> TestSshd::start(SshdOptions options) {
  if (auto why = unavailable()) {
    return std::unexpected(*why);
  }
  // sshd refuses to start without its privilege separation directory.
  std::error_code ec;
  if (!std::filesystem::is_directory("/run/sshd", ec)) {
    std::filesystem::create_directories("/run/sshd", ec);
    if (ec) {
      return std::unexpected("sshd needs /run/sshd and it cannot be created (" + ec.message() +
                             "); run as root or create it once");
    }
  }
  if (!options.netns.empty()) {
    if (options.netns.find('/') != std::string::npos || ip_program().empty()) {
      return std::unexpected("netns \"" + options.netns + "\": not a namespace name, or no ip program to enter it");
    }
  }
  if (!options.chroot.empty() &&
      (options.chroot.front() != '/' || options.chroot.find_first_of(" \"\n") != std::string::npos ||
       !std::filesystem::exists(options.chroot + "/bin/sh", ec))) {
    return std::unexpected("chroot \"" + options.chroot + "\": not an absolute root folder with /bin/sh");
  }
  for (const auto& entry : options.session_env) {
    // sshd_config has no escape for these; a value holding one would change the config.
    if (entry.find('=') == std::string::npos || entry.find_first_of("\"\n") != std::string::npos) {
      return std::unexpected("session_env: \"" + entry + "\" is not NAME=value without quotes or newlines");
    }
  }
  std::unique_ptr<TestSshd> server(new TestSshd());
  server->m_options = std::move(options);
  if (auto made = server->prepare(); !made) {
    return std::unexpected(made.error());
  }
  // A port found free may be taken before sshd binds it; try another then.
  std::string why;
  for (int attempt = 0; attempt < 3; ++attempt) {
    int port = -1;
    try {
      // Inside a namespace of its own the address is not this process's to bind;
      // any port free here is free there, and the lock keeps other tests off it.
      port = free_port(server->m_options.netns.empty() ? server->address() : "127.0.0.1");
    } catch (const std::runtime_error& e) {
      return std::unexpected(e.what());
    }
    auto started = server->launch(port);
    if (started) {
      return server;
    }
    why = started.error();
  }
  return std::unexpected(why);
}

TestSshd::~TestSshd() {
  stop();
  std::error_code ec;
  std::filesystem::remove_all(m_dir, ec);
}

std::string TestSshd::known_hosts_line() const {
  return "[" + address() + "]:" + std::to_string(m_port) + " " + public_key_of(m_dir / "host_key.pub") + "\n";
}

remote::SshTarget TestSshd::target(std::string name) const {
  remote::SshTarget t;
  t.name = std::move(name);
  t.user = m_user;
  t.hostname = address();
  t.port = m_port;
  t.identities = {user_key().string()};
  t.known_hosts = known_hosts().string();
  t.host_key_policy = remote::HostKeyPolicy::strict;
  t.connect_timeout = k_target_connect_timeout;
  t.keepalive = k_target_keepalive;
  t.reconnect_attempts = k_target_reconnect_attempts;
  t.reconnect_backoff = k_target_reconnect_backoff;
  t.reconnect_backoff_max = k_target_reconnect_backoff_max;
  return t;
}

std::vector<pid_t> TestSshd::session_pids() const {
  std::vector<pid_t> pids;
  if (m_pid <= 0) {
    return pids;
  }
  for (pid_t pid : descendants(m_pid)) {
    // OpenSSH 9.8 and later (Debian 13) name them sshd-session and sshd-auth.
    if (comm_of(pid).starts_with("sshd")) {
      pids.push_back(pid);
    }
  }
  return pids;
}

std::expected<void, std::string> TestSshd::change_host_key() {
  const auto next = m_dir / "host_key.next";
  std::error_code ec;
  std::filesystem::remove(next, ec);
  std::filesystem::remove(next.string() + ".pub", ec);
  if (auto made = generate_key(next); !made) {
    return made;
  }
  std::filesystem::rename(next.string() + ".pub", host_key().string() + ".pub", ec);
  if (!ec) {
    std::filesystem::rename(next, host_key(), ec);
  }
  if (ec) {
    return std::unexpected("change_host_key: cannot replace " + host_key().string() + ": " + ec.message());
  }
  constexpr std::string_view listening = "Server listening on";
  const auto listened = [&] {
    const std::string text = log();
    std::size_t count = 0;
    for (auto at = text.find(listening); at != std::string::npos; at = text.find(listening, at + listening.size())) {
      ++count;
    }
    return count;
  };
  const auto before = listened();
  if (::kill(m_pid, SIGHUP) != 0) {
    return std::unexpected(std::string("change_host_key: SIGHUP to sshd failed: ") + std::strerror(errno));
  }
  const bool back = wait_until(
      [&] {
        return listened() > before &&
               (m_options.netns.empty() ? port_accepts(m_port, address())
                                        : port_accepts_in_netns(m_options.netns, m_port, address()));
      },
      k_sshd_start_timeout);
  if (!back) {
    return std::unexpected("change_host_key: sshd did not listen again within 15s after SIGHUP: " + log());
  }
  return {};
}

std::size_t TestSshd::kill_sessions() {
  auto pids = session_pids();
  for (pid_t pid : pids) {
    ::kill(pid, SIGKILL);
  }
  return pids.size();
}

void TestSshd::stop() {
  if (m_pid <= 0) {
    return;
  }
  auto under = descendants(m_pid);
  ::kill(m_pid, SIGTERM);
  for (pid_t pid : under) {
    ::kill(pid, SIGKILL);
  }
  wait_for(m_pid, k_sshd_stop_grace);
  m_pid = -1;
}

std::string TestSshd::inside(const std::filesystem::path& path) const {
  if (m_options.chroot.empty()) {
    return path.string();
  }
  const std::string text = path.string();
  return text.starts_with(m_options.chroot + "/") ? text.substr(m_options.chroot.size()) : text;
}

std::expected<void, std::string> TestSshd::prepare() {
  // In a chroot, the folder is in the root's /tmp, where sessions see it.
  const auto parent = m_options.chroot.empty() ? std::filesystem::temp_directory_path()
                                               : std::filesystem::path(m_options.chroot) / "tmp";
  std::string pattern = (parent / "specctl-sshd-XXXXXX").string();
  if (::mkdtemp(pattern.data()) == nullptr) {
    return std::unexpected(std::string("mkdtemp failed: ") + std::strerror(errno));
  }
  m_dir = pattern;
  m_user = current_user();
  for (const char* name : {"host_key", "user_key"}) {
    if (auto made = generate_key(m_dir / name); !made) {
      return made;
    }
  }
  std::filesystem::copy_file(m_dir / "user_key.pub", m_dir / "authorized_keys");
  std::filesystem::create_directory(session_home());
  return {};
}

std::expected<void, std::string> TestSshd::launch(int port) {
  m_port = port;
  auto config = m_dir / "sshd_config";
  std::ostringstream text;
  text << "ListenAddress " << address() << "\n"
       << "Port " << port << "\n"
       << "HostKey " << (m_dir / "host_key").string() << "\n"
       << "AuthorizedKeysFile " << (m_dir / "authorized_keys").string() << "\n"
       << "PidFile " << (m_dir / "sshd.pid").string() << "\n"
       << "StrictModes no\n"
       << "UsePAM no\n"
       << "PermitRootLogin yes\n"
       << "PasswordAuthentication no\n"
       << "KbdInteractiveAuthentication no\n"
       << "AllowTcpForwarding yes\n"
       << "LogLevel VERBOSE\n";
  // Every session's HOME is a folder of this server's own, so no shell it starts reads the
  // real user's ~/.bashrc (pyenv, conda: seconds each, or a stale lock's 60 s) and nothing
  // run over it writes to the real home (tests/hostile-home.sh checks both). sshd still
  // starts sessions in the passwd entry's home; later entries of SetEnv win.
  if (!m_options.chroot.empty()) {
    text << "ChrootDirectory " << m_options.chroot << "\n";
  }
  text << "SetEnv \"HOME=" << inside(session_home()) << "\"";
  for (const auto& entry : m_options.session_env) {
    text << " \"" << entry << "\"";
  }
  text << "\n";
  write_file(config, text.str());
  write_file(known_hosts(), known_hosts_line());
  std::vector<std::string> argv{"/usr/sbin/sshd", "-D", "-e", "-f", config.string()};
  if (!m_options.netns.empty()) {
    // `ip netns exec` joins the namespace and execs sshd in place: m_pid is sshd's.
    argv.insert(argv.begin(), {ip_program(), "netns", "exec", m_options.netns});
  }
  if (!m_options.chroot.empty()) {
    // The root's /proc (ps, ss and liveness read it), mounted in a namespace of sshd's
    // own that ends with it. The only shell here: its paths come as arguments.
    argv.insert(argv.begin(),
                {"unshare", "--mount", "--propagation", "private", "--", "/bin/sh", "-c",
                 "root=$1; shift; mount -t proc proc \"$root/proc\" && exec \"$@\"", "sh", m_options.chroot});
  }
  m_pid = spawn(argv, m_dir / "sshd.log");
  if (m_pid <= 0) {
    return std::unexpected("cannot start /usr/sbin/sshd");
  }
  auto deadline = std::chrono::steady_clock::now() + k_sshd_start_timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    int status = 0;
    if (::waitpid(m_pid, &status, WNOHANG) == m_pid) {
      m_pid = -1;
      return std::unexpected("sshd exited at start: " + log());
    }
    bool ready = m_options.netns.empty() ? port_accepts(port, address())
                                         : port_accepts_in_netns(m_options.netns, port, address());
    if (ready) {
      return {};
    }
    std::this_thread::sleep_for(k_poll_interval);
  }
  stop();
  return std::unexpected("sshd did not accept connections within 15s: " + log());
}

std::expected<std::unique_ptr<TestSshAgent>, std::string> TestSshAgent::start(const std::filesystem::path& dir) {
  std::unique_ptr<TestSshAgent> agent(new TestSshAgent());
  agent->m_dir = dir;
  agent->m_socket = dir / "agent.sock";
  agent->m_pid = spawn({"ssh-agent", "-D", "-a", agent->m_socket.string()}, dir / "agent.log");
  if (agent->m_pid <= 0) {
    return std::unexpected("cannot start ssh-agent");
  }
  auto deadline = std::chrono::steady_clock::now() + k_sshd_start_timeout;
  std::error_code ec;
  while (!std::filesystem::exists(agent->m_socket, ec)) {
    if (std::chrono::steady_clock::now() >= deadline) {
      return std::unexpected("ssh-agent did not create its socket: " + read_file(dir / "agent.log"));
    }
    std::this_thread::sleep_for(k_poll_interval);
  }
  return agent;
}

TestSshAgent::~TestSshAgent() {
  if (m_pid > 0) {
    ::kill(m_pid, SIGTERM);
    wait_for(m_pid, k_sshd_stop_grace);
  }
}

std::expected<void, std::string> TestSshAgent::add(const std::filesystem::path& key) {
  auto result = run_program({"ssh-add", "-q", key.string()}, m_dir, {"SSH_AUTH_SOCK=" + m_socket.string()});
  if (result.exit_code != 0) {
    return std::unexpected("ssh-add failed: " + result.output);
  }
  return {};
}

} // namespace specctl::test
