#pragma once

// Test support: a throwaway OpenSSH server (and ssh-agent) on 127.0.0.1.
//
//   auto sshd = specctl::test::TestSshd::start();   // or the reason it cannot run
//   REQUIRE_MESSAGE(sshd, sshd.error());
//   auto host = specctl::remote::connect_ssh((*sshd)->target());
//
// A test that needs several "machines" starts one sshd per loopback address
// (all of 127.0.0.0/8 is this machine on Linux), each giving its sessions an
// environment of their own:
//
//   auto node = TestSshd::start({.listen_address = "127.0.0.2",
//                                .session_env = {"SPECSIM_GPU_DIR=/tmp/node-a"}});
//
// Everything lives in a fresh temporary directory: host key, user key,
// authorized_keys, a known_hosts that trusts the host key, sshd_config and
// sshd's log. The destructor kills sshd and every process under it and removes
// the directory, also when a test fails. No shell is involved in starting
// anything; every wait has a deadline.

#include "skip.hpp"

#include <specctl/remote/ssh_host.hpp>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <expected>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pwd.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

extern char** environ;

namespace specctl::test {

using namespace std::chrono_literals;

inline constexpr auto k_sshd_start_timeout = std::chrono::seconds{15};
inline constexpr auto k_program_timeout = std::chrono::seconds{30};
inline constexpr auto k_sshd_stop_grace = std::chrono::seconds{2};
inline constexpr auto k_poll_interval = std::chrono::milliseconds{20};

struct ProgramResult {
  int exit_code = -1; // -1: did not start or did not finish in time
  std::string output; // stdout and stderr together
};

namespace detail {

inline std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

inline void write_file(const std::filesystem::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
}

// argv[0] as a path: itself when it has a slash, else the first executable in PATH.
inline std::string find_program(const std::string& name) {
  if (name.find('/') != std::string::npos) {
    return name;
  }
  const char* path = std::getenv("PATH");
  std::istringstream dirs(path != nullptr ? path : "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin");
  std::string dir;
  while (std::getline(dirs, dir, ':')) {
    auto candidate = (std::filesystem::path(dir.empty() ? "." : dir) / name).string();
    if (::access(candidate.c_str(), X_OK) == 0) {
      return candidate;
    }
  }
  return name;
}

// Starts argv[0] (looked up in PATH) with stdin from /dev/null and stdout and
// stderr into `log`, in its own process group. `env` entries ("K=V") are added.
// The child is killed when the thread that started it dies (PR_SET_PDEATHSIG),
// so a crashing test leaves no sshd behind; start fixtures from the test's thread.
inline pid_t spawn(const std::vector<std::string>& argv, const std::filesystem::path& log,
                   const std::vector<std::string>& env = {}) {
  // Everything is prepared before fork: the child of a threaded process may
  // only make async-signal-safe calls until it execs.
  std::string program = find_program(argv.at(0));
  std::vector<char*> args;
  for (const auto& a : argv) {
    args.push_back(const_cast<char*>(a.c_str()));
  }
  args.push_back(nullptr);
  // `env` first: getenv takes the first match, and the inherited value is skipped anyway.
  std::vector<std::string> env_strings = env;
  for (char** e = environ; *e != nullptr; ++e) {
    std::string_view entry(*e);
    bool overridden = std::any_of(env.begin(), env.end(), [&](const std::string& mine) {
      auto key = mine.substr(0, mine.find('=') + 1);
      return entry.starts_with(key);
    });
    if (!overridden) {
      env_strings.emplace_back(entry);
    }
  }
  std::vector<char*> envp;
  for (auto& e : env_strings) {
    envp.push_back(e.data());
  }
  envp.push_back(nullptr);
  int input = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  int output = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  if (input < 0 || output < 0) {
    ::close(input);
    ::close(output);
    return -1;
  }
  pid_t parent = ::getpid();
  pid_t pid = ::fork();
  if (pid == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) {
      ::_exit(127);
    }
    ::setpgid(0, 0);
    struct sigaction default_action {};
    default_action.sa_handler = SIG_DFL;
    for (int sig = 1; sig < NSIG; ++sig) {
      ::sigaction(sig, &default_action, nullptr);
    }
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    ::dup2(input, 0);
    ::dup2(output, 1);
    ::dup2(output, 2);
    ::execve(program.c_str(), args.data(), envp.data());
    ::_exit(127);
  }
  ::close(input);
  ::close(output);
  return pid;
}

// Waits for `pid` until the deadline; SIGKILLs it past the deadline. Returns its exit code, or -1.
inline int wait_for(pid_t pid, std::chrono::steady_clock::duration timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    int status = 0;
    pid_t done = ::waitpid(pid, &status, WNOHANG);
    if (done == pid) {
      return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    }
    if (done < 0) {
      return -1;
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      return -1;
    }
    std::this_thread::sleep_for(k_poll_interval);
  }
}

// Processes whose parent is in `roots`, transitively, read from /proc.
inline std::vector<pid_t> descendants(pid_t root) {
  std::vector<std::pair<pid_t, pid_t>> parent_of; // (pid, ppid)
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator("/proc", ec)) {
    auto name = entry.path().filename().string();
    if (name.empty() || !std::all_of(name.begin(), name.end(), [](char c) { return c >= '0' && c <= '9'; })) {
      continue;
    }
    auto stat = read_file(entry.path() / "stat");
    // "pid (comm) state ppid ...": comm may hold spaces and parentheses.
    auto close = stat.rfind(')');
    if (close == std::string::npos) {
      continue;
    }
    std::istringstream rest(stat.substr(close + 1));
    std::string state;
    pid_t ppid = 0;
    rest >> state >> ppid;
    parent_of.emplace_back(static_cast<pid_t>(std::stol(name)), ppid);
  }
  std::vector<pid_t> found{root};
  for (std::size_t i = 0; i < found.size(); ++i) {
    for (const auto& [pid, ppid] : parent_of) {
      if (ppid == found[i] && std::find(found.begin(), found.end(), pid) == found.end()) {
        found.push_back(pid);
      }
    }
  }
  found.erase(found.begin());
  return found;
}

inline std::string comm_of(pid_t pid) {
  auto comm = read_file(std::filesystem::path("/proc") / std::to_string(pid) / "comm");
  while (!comm.empty() && comm.back() == '\n') {
    comm.pop_back();
  }
  return comm;
}

// An IPv4 socket address; 0.0.0.0 when `ip` is not a dotted quad.
inline sockaddr_in ipv4_address(const std::string& ip, int port) {
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<std::uint16_t>(port));
  ::inet_pton(AF_INET, ip.c_str(), &address.sin_addr);
  return address;
}

inline int free_port(const std::string& ip = "127.0.0.1") {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in address = ipv4_address(ip, 0);
  socklen_t length = sizeof address;
  int port = -1;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) == 0) {
    port = ntohs(address.sin_port);
  }
  ::close(fd);
  return port;
}

inline bool port_accepts(int port, const std::string& ip = "127.0.0.1") {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in address = ipv4_address(ip, port);
  bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0;
  ::close(fd);
  return ok;
}

inline std::string current_user() {
  const passwd* entry = ::getpwuid(::getuid());
  return entry != nullptr ? entry->pw_name : "root";
}

} // namespace detail

// Runs a program without a shell, bounded by `timeout`.
inline ProgramResult run_program(const std::vector<std::string>& argv, const std::filesystem::path& scratch_dir,
                                 const std::vector<std::string>& env = {},
                                 std::chrono::steady_clock::duration timeout = k_program_timeout) {
  static int counter = 0;
  auto log = scratch_dir / ("program-" + std::to_string(::getpid()) + "-" + std::to_string(++counter) + ".log");
  ProgramResult result;
  pid_t pid = detail::spawn(argv, log, env);
  if (pid > 0) {
    result.exit_code = detail::wait_for(pid, timeout);
  }
  result.output = detail::read_file(log);
  std::error_code ec;
  std::filesystem::remove(log, ec);
  return result;
}

// Writes an unencrypted ed25519 key pair at `path` and `path`.pub.
inline std::expected<void, std::string> generate_key(const std::filesystem::path& path) {
  auto result = run_program({"ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "specctl-test", "-f", path.string()},
                            path.parent_path());
  if (result.exit_code != 0) {
    return std::unexpected("ssh-keygen failed: " + result.output);
  }
  return {};
}

// "ssh-ed25519 AAAA..." from a .pub file, without its comment.
inline std::string public_key_of(const std::filesystem::path& pub) {
  std::istringstream in(detail::read_file(pub));
  std::string type;
  std::string key;
  in >> type >> key;
  return type + " " + key;
}

// "SHA256:..." of a public key file, as ssh-keygen prints it.
inline std::string fingerprint_of(const std::filesystem::path& pub) {
  auto result = run_program({"ssh-keygen", "-l", "-E", "sha256", "-f", pub.string()}, pub.parent_path());
  std::istringstream in(result.output);
  std::string bits;
  std::string fingerprint;
  in >> bits >> fingerprint;
  return fingerprint;
}

// Where a test sshd listens and what its sessions see.
struct SshdOptions {
  // An IPv4 loopback address: 127.0.0.2, 127.0.0.3, ... stand for other machines.
  std::string listen_address = "127.0.0.1";
  // "NAME=value" for every session (sshd_config SetEnv, OpenSSH 7.8 and later); it
  // overrides sshd's default PATH, so a node's PATH can hold a fake nvidia-smi.
  std::vector<std::string> session_env;
};

class TestSshd {
public:
  // Why no test sshd can run here (it is not installed, or SPECCTL_TEST_WITHOUT
  // names it), or nothing: the reason a suite that needs one skips.
  static std::optional<std::string> unavailable() {
    if (pretend_missing("sshd") || ::access("/usr/sbin/sshd", X_OK) != 0) {
      return "no sshd (/usr/sbin/sshd is not installed; scripts/setup.sh --tests installs openssh-server)";
    }
    return std::nullopt;
  }

  // Starts sshd, or says why it cannot (not installed, no privilege separation
  // directory and no right to create it, ...).
  static std::expected<std::unique_ptr<TestSshd>, std::string> start(SshdOptions options = {}) {
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
      auto started = server->launch(detail::free_port(server->address()));
      if (started) {
        return server;
      }
      why = started.error();
    }
    return std::unexpected(why);
  }

  TestSshd(const TestSshd&) = delete;
  TestSshd& operator=(const TestSshd&) = delete;

  ~TestSshd() {
    stop();
    std::error_code ec;
    std::filesystem::remove_all(m_dir, ec);
  }

  int port() const { return m_port; }
  // The address sshd listens on (127.0.0.1 unless the options said otherwise).
  const std::string& address() const { return m_options.listen_address; }
  const std::string& user() const { return m_user; }
  const std::filesystem::path& dir() const { return m_dir; }
  // The authorized user key (private half; ".pub" beside it).
  std::filesystem::path user_key() const { return m_dir / "user_key"; }
  std::filesystem::path host_key() const { return m_dir / "host_key"; }
  // A known_hosts file that trusts this server's host key for [address]:port.
  std::filesystem::path known_hosts() const { return m_dir / "known_hosts"; }
  // This server's line for a known_hosts file.
  std::string known_hosts_line() const {
    return "[" + address() + "]:" + std::to_string(m_port) + " " + public_key_of(m_dir / "host_key.pub") + "\n";
  }
  std::string host_key_fingerprint() const { return fingerprint_of(m_dir / "host_key.pub"); }
  // What sshd wrote with -e, to show when a test fails.
  std::string log() const { return detail::read_file(m_dir / "sshd.log"); }
  pid_t pid() const { return m_pid; }

  // A target that reaches this server as the current user with the test key,
  // strict host key checking, and short timeouts and backoff.
  remote::SshTarget target(std::string name = "testnode") const {
    remote::SshTarget t;
    t.name = std::move(name);
    t.user = m_user;
    t.hostname = address();
    t.port = m_port;
    t.identity = user_key().string();
    t.known_hosts = known_hosts().string();
    t.host_key_policy = remote::HostKeyPolicy::strict;
    t.connect_timeout = 10s;
    t.keepalive = 5s;
    t.reconnect_attempts = 4;
    t.reconnect_backoff = 200ms;
    t.reconnect_backoff_max = 1s;
    return t;
  }

  // The sshd processes serving connections now (sshd forks one or two per connection).
  std::vector<pid_t> session_pids() const {
    std::vector<pid_t> pids;
    if (m_pid <= 0) {
      return pids;
    }
    for (pid_t pid : detail::descendants(m_pid)) {
      if (detail::comm_of(pid) == "sshd") {
        pids.push_back(pid);
      }
    }
    return pids;
  }

  // Cuts every connection the way a network failure would look to the
  // client: SIGKILLs the sshd processes serving them, so their sockets close.
  // Commands they started keep running. Returns how many processes it killed.
  std::size_t kill_sessions() {
    auto pids = session_pids();
    for (pid_t pid : pids) {
      ::kill(pid, SIGKILL);
    }
    return pids.size();
  }

  // Stops sshd and kills everything still running under it (sessions and the
  // commands they started). Safe to call twice.
  void stop() {
    if (m_pid <= 0) {
      return;
    }
    auto under = detail::descendants(m_pid);
    ::kill(m_pid, SIGTERM);
    for (pid_t pid : under) {
      ::kill(pid, SIGKILL);
    }
    detail::wait_for(m_pid, k_sshd_stop_grace);
    m_pid = -1;
  }

private:
  TestSshd() = default;

  std::expected<void, std::string> prepare() {
    std::string pattern = (std::filesystem::temp_directory_path() / "specctl-sshd-XXXXXX").string();
    if (::mkdtemp(pattern.data()) == nullptr) {
      return std::unexpected(std::string("mkdtemp failed: ") + std::strerror(errno));
    }
    m_dir = pattern;
    m_user = detail::current_user();
    for (const char* name : {"host_key", "user_key"}) {
      if (auto made = generate_key(m_dir / name); !made) {
        return made;
      }
    }
    std::filesystem::copy_file(m_dir / "user_key.pub", m_dir / "authorized_keys");
    return {};
  }

  std::expected<void, std::string> launch(int port) {
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
    if (!m_options.session_env.empty()) {
      text << "SetEnv";
      for (const auto& entry : m_options.session_env) {
        text << " \"" << entry << "\"";
      }
      text << "\n";
    }
    detail::write_file(config, text.str());
    detail::write_file(known_hosts(), known_hosts_line());
    m_pid = detail::spawn({"/usr/sbin/sshd", "-D", "-e", "-f", config.string()}, m_dir / "sshd.log");
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
      if (detail::port_accepts(port, address())) {
        return {};
      }
      std::this_thread::sleep_for(k_poll_interval);
    }
    stop();
    return std::unexpected("sshd did not accept connections within 15s: " + log());
  }

  SshdOptions m_options;
  std::filesystem::path m_dir;
  std::string m_user;
  int m_port = -1;
  pid_t m_pid = -1;
};

// An ssh-agent on a socket in `dir`, holding the keys added to it.
class TestSshAgent {
public:
  static std::expected<std::unique_ptr<TestSshAgent>, std::string> start(const std::filesystem::path& dir) {
    std::unique_ptr<TestSshAgent> agent(new TestSshAgent());
    agent->m_dir = dir;
    agent->m_socket = dir / "agent.sock";
    agent->m_pid = detail::spawn({"ssh-agent", "-D", "-a", agent->m_socket.string()}, dir / "agent.log");
    if (agent->m_pid <= 0) {
      return std::unexpected("cannot start ssh-agent");
    }
    auto deadline = std::chrono::steady_clock::now() + k_sshd_start_timeout;
    std::error_code ec;
    while (!std::filesystem::exists(agent->m_socket, ec)) {
      if (std::chrono::steady_clock::now() >= deadline) {
        return std::unexpected("ssh-agent did not create its socket: " + detail::read_file(dir / "agent.log"));
      }
      std::this_thread::sleep_for(k_poll_interval);
    }
    return agent;
  }

  TestSshAgent(const TestSshAgent&) = delete;
  TestSshAgent& operator=(const TestSshAgent&) = delete;
  ~TestSshAgent() {
    if (m_pid > 0) {
      ::kill(m_pid, SIGTERM);
      detail::wait_for(m_pid, k_sshd_stop_grace);
    }
  }

  const std::filesystem::path& socket() const { return m_socket; }

  std::expected<void, std::string> add(const std::filesystem::path& key) {
    auto result = run_program({"ssh-add", "-q", key.string()}, m_dir, {"SSH_AUTH_SOCK=" + m_socket.string()});
    if (result.exit_code != 0) {
      return std::unexpected("ssh-add failed: " + result.output);
    }
    return {};
  }

private:
  TestSshAgent() = default;
  std::filesystem::path m_dir;
  std::filesystem::path m_socket;
  pid_t m_pid = -1;
};

} // namespace specctl::test
