#include "child.hpp"

#include <specctl/http/get.hpp>

#include <arpa/inet.h>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <fcntl.h>
#include <fmt/format.h>
#include <fstream>
#include <netinet/in.h>
#include <random>
#include <spawn.h>
#include <sstream>
#include <stdexcept>
#include <sys/socket.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

extern char** environ;

namespace specctl::testing {

namespace {

constexpr std::chrono::milliseconds k_poll{20};
constexpr std::chrono::seconds k_kill_wait{10};

} // namespace

int free_port() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = 0;
  if (bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0) {
    close(fd);
    throw std::runtime_error("cannot bind a loopback port");
  }
  socklen_t length = sizeof(address);
  getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length);
  close(fd);
  return ntohs(address.sin_port);
}

TempDir::TempDir() {
  std::random_device random;
  m_path = std::filesystem::temp_directory_path() / fmt::format("specctl-bench-{}-{:x}", getpid(), random());
  std::filesystem::create_directories(m_path);
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(m_path, ec);
}

Child::Child(const std::vector<std::string>& argv, const std::filesystem::path& out, const std::filesystem::path& err) {
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addopen(&actions, 2, err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawnattr_t attributes;
  posix_spawnattr_init(&attributes);
  posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETPGROUP);
  posix_spawnattr_setpgroup(&attributes, 0);
  std::vector<char*> args;
  for (const auto& a : argv) {
    args.push_back(const_cast<char*>(a.c_str()));
  }
  args.push_back(nullptr);
  const int rc = posix_spawn(&m_pid, args[0], &actions, &attributes, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attributes);
  if (rc != 0) {
    throw std::runtime_error(fmt::format("cannot start {}: {}", argv[0], std::strerror(rc)));
  }
}

Child::~Child() {
  kill_group();
}

std::optional<int> Child::wait(std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!m_code) {
    int status = 0;
    const pid_t got = waitpid(m_pid, &status, WNOHANG);
    if (got == m_pid) {
      m_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      break;
    }
    if (std::chrono::steady_clock::now() > deadline) {
      return std::nullopt;
    }
    std::this_thread::sleep_for(k_poll);
  }
  return m_code;
}

void Child::kill_group() {
  if (m_pid <= 0 || m_code) {
    return;
  }
  ::kill(-m_pid, SIGKILL);
  wait(k_kill_wait);
}

std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

CommandResult run_command(const std::vector<std::string>& argv, std::chrono::milliseconds timeout) {
  TempDir dir;
  CommandResult result;
  {
    Child child(argv, dir.path() / "out", dir.path() / "err");
    auto code = child.wait(timeout);
    result.code = code.value_or(-1);
  }
  result.out = read_file(dir.path() / "out");
  result.err = read_file(dir.path() / "err");
  return result;
}

std::string specsim_binary() {
#ifdef SPECSIM_BINARY
  return SPECSIM_BINARY;
#else
  return {};
#endif
}

std::string specctl_binary() {
  return SPECCTL_BINARY;
}

Specsim::Specsim(const std::vector<std::string>& extra_args) {
  m_port = free_port();
  std::vector<std::string> argv = {specsim_binary(),
                                   "--model-path",
                                   "/models/sim-model",
                                   "--host",
                                   "127.0.0.1",
                                   "--port",
                                   std::to_string(m_port),
                                   "--sim-load-time",
                                   "0.2",
                                   "--sim-gpu-dir",
                                   (m_dir.path() / "gpus").string()};
  argv.insert(argv.end(), extra_args.begin(), extra_args.end());
  m_child.emplace(argv, m_dir.path() / "log", m_dir.path() / "log.err");
  const auto deadline = std::chrono::steady_clock::now() + k_ready_timeout;
  http::GetOptions options;
  options.connect_timeout = std::chrono::seconds{1};
  options.timeout = std::chrono::seconds{2};
  while (true) {
    auto response = http::get(url() + "/health", options);
    if (response && response->status == 200) {
      return;
    }
    if (m_child->wait(std::chrono::milliseconds{0}) || std::chrono::steady_clock::now() > deadline) {
      throw std::runtime_error("specsim did not become ready:\n" + log());
    }
    std::this_thread::sleep_for(k_poll);
  }
}

Specsim::~Specsim() = default;

std::string Specsim::url() const {
  return fmt::format("http://127.0.0.1:{}", m_port);
}

std::string Specsim::log() const {
  return read_file(m_dir.path() / "log") + read_file(m_dir.path() / "log.err");
}

} // namespace specctl::testing
