#include "child.hpp"

#include <specctl/http/get.hpp>
#include <specctl/util/spawn.hpp>

#include <csignal>
#include <cstring>
#include <fcntl.h>
#include <fmt/format.h>
#include <stdexcept>
#include <sys/wait.h>
#include <thread>

namespace specctl::test {

namespace {

constexpr std::chrono::seconds k_kill_wait{10};
constexpr std::chrono::seconds k_health_connect_timeout{1};
constexpr std::chrono::seconds k_health_timeout{2};

} // namespace

Child::Child(const std::vector<std::string>& argv, const std::filesystem::path& out, const std::filesystem::path& err) {
  util::SpawnSetup setup;
  setup.add_open(1, out, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  setup.add_open(2, err, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  setup.set_group(util::ProcessGroup::own_group);
  auto pid = setup.spawn(argv.at(0), argv);
  if (!pid) {
    throw std::runtime_error(fmt::format("cannot start {}: {}", argv[0], std::strerror(pid.error())));
  }
  m_pid = *pid;
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
    std::this_thread::sleep_for(k_poll_interval);
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

ChildResult run_child(const std::vector<std::string>& argv, std::chrono::milliseconds timeout) {
  TempDir dir("specctl-bench");
  ChildResult result;
  {
    Child child(argv, dir.path() / "out", dir.path() / "err");
    auto code = child.wait(timeout);
    result.code = code.value_or(-1);
  }
  result.out = read_file(dir.path() / "out");
  result.err = read_file(dir.path() / "err");
  return result;
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
  options.connect_timeout = k_health_connect_timeout;
  options.timeout = k_health_timeout;
  while (true) {
    auto response = http::get(url() + "/health", options);
    if (response && response->status == 200) {
      return;
    }
    if (m_child->wait(std::chrono::milliseconds{0}) || std::chrono::steady_clock::now() > deadline) {
      throw std::runtime_error("specsim did not become ready:\n" + log());
    }
    std::this_thread::sleep_for(k_poll_interval);
  }
}

Specsim::~Specsim() = default;

std::string Specsim::url() const {
  return fmt::format("http://127.0.0.1:{}", m_port);
}

std::string Specsim::log() const {
  return read_file(m_dir.path() / "log") + read_file(m_dir.path() / "log.err");
}

} // namespace specctl::test
