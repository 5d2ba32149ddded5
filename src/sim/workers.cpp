#include <specctl/sim/gpu_state.hpp>
#include <specctl/sim/workers.hpp>

#include <specctl/util/parse.hpp>
#include <specctl/util/spawn.hpp>

#include <fmt/format.h>

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <thread>

extern char** environ;

namespace specctl::sim {
namespace {

constexpr const char* k_env_rank = "SPECSIM_WORKER_RANK";
constexpr const char* k_env_dir = "SPECSIM_WORKER_DIR";
constexpr const char* k_env_parent = "SPECSIM_WORKER_PARENT";
constexpr const char* k_env_detach = "SPECSIM_WORKER_DETACH";
constexpr const char* k_env_name = "SPECSIM_WORKER_NAME";

// The worker reads the server's pipe on this descriptor.
constexpr int k_worker_pipe_fd = 3;
// Pipe ends are moved above the low descriptors so dup2 onto fd 3 never aliases.
constexpr int k_min_pipe_fd = 10;
// A tied worker gets this long to exit after its pipe closes before SIGKILL.
constexpr std::chrono::seconds k_worker_exit_timeout{2};
constexpr std::chrono::milliseconds k_reap_poll_interval{10};
// Linux keeps 15 characters of a process name (comm).
constexpr std::size_t k_comm_length = 15;

std::vector<int> visible_devices(int gpu_count) {
  std::vector<int> devices;
  const char* env = std::getenv("CUDA_VISIBLE_DEVICES");
  if (env == nullptr || *env == '\0') {
    return devices;
  }
  std::string_view rest = env;
  while (!rest.empty()) {
    const auto comma = rest.find(',');
    const auto item = rest.substr(0, comma);
    if (const auto index = util::parse_number<int>(item); index && *index >= 0 && *index < gpu_count) {
      devices.push_back(*index);
    }
    rest = comma == std::string_view::npos ? std::string_view{} : rest.substr(comma + 1);
  }
  return devices;
}

std::expected<std::string, std::string> self_executable() {
  std::array<char, 4096> buffer{};
  const ssize_t length = ::readlink("/proc/self/exe", buffer.data(), buffer.size() - 1);
  if (length <= 0) {
    return std::unexpected(fmt::format("cannot resolve /proc/self/exe: {}", std::strerror(errno)));
  }
  return std::string(buffer.data(), static_cast<std::size_t>(length));
}

std::string_view env_or_empty(const char* name) {
  const char* value = std::getenv(name);
  return value == nullptr ? std::string_view{} : std::string_view(value);
}

template <typename T> T env_number(const char* name) {
  return util::parse_number<T>(env_or_empty(name)).value_or(T{});
}

} // namespace

WorkerPool::~WorkerPool() {
  for (auto& worker : m_workers) {
    worker.pipe.reset();
  }
  if (m_detach == Detach::yes) {
    return;
  }
  const auto deadline = std::chrono::steady_clock::now() + k_worker_exit_timeout;
  for (auto& worker : m_workers) {
    while (!worker.reaped) {
      const pid_t done = ::waitpid(worker.pid, nullptr, WNOHANG);
      if (done == worker.pid || (done < 0 && errno != EINTR)) {
        worker.reaped = true;
      } else if (std::chrono::steady_clock::now() > deadline) {
        ::kill(worker.pid, SIGKILL);
        ::waitpid(worker.pid, nullptr, 0);
        worker.reaped = true;
      } else {
        std::this_thread::sleep_for(k_reap_poll_interval);
      }
    }
  }
}

std::expected<WorkerPool, std::string> WorkerPool::spawn(const std::vector<std::string>& names, int gpu_count,
                                                         const std::filesystem::path& state_dir, Detach detach) {
  const int tp_size = static_cast<int>(names.size());
  auto executable = self_executable();
  if (!executable) {
    return std::unexpected(executable.error());
  }
  std::error_code ec;
  std::filesystem::create_directories(state_dir, ec);
  if (ec) {
    return std::unexpected(fmt::format("cannot create GPU state directory {}: {}", state_dir.string(), ec.message()));
  }
  const auto devices = visible_devices(gpu_count);
  WorkerPool pool;
  pool.m_detach = detach;
  for (int rank = 0; rank < tp_size; ++rank) {
    const int gpu = devices.empty() ? rank % gpu_count : devices[static_cast<std::size_t>(rank) % devices.size()];
    int ends[2];
    if (::pipe2(ends, O_CLOEXEC) != 0) {
      return std::unexpected(fmt::format("pipe: {}", std::strerror(errno)));
    }
    util::UniqueFd raw_read(ends[0]);
    util::UniqueFd raw_write(ends[1]);
    util::UniqueFd read_end(::fcntl(raw_read.get(), F_DUPFD_CLOEXEC, k_min_pipe_fd));
    util::UniqueFd write_end(::fcntl(raw_write.get(), F_DUPFD_CLOEXEC, k_min_pipe_fd));
    if (!read_end || !write_end) {
      return std::unexpected(fmt::format("fcntl: {}", std::strerror(errno)));
    }
    // A worker that stops reading must never block the server.
    ::fcntl(write_end.get(), F_SETFL, O_NONBLOCK);

    util::SpawnSetup setup;
    setup.add_dup2(read_end.get(), k_worker_pipe_fd);
    setup.add_open(0, "/dev/null", O_RDONLY);
    setup.unblock_signals();
    sigset_t defaults;
    sigemptyset(&defaults);
    for (int sig : {SIGPIPE, SIGTERM, SIGINT, SIGHUP, SIGCHLD}) {
      sigaddset(&defaults, sig);
    }
    setup.default_signals(defaults);
    if (detach == Detach::yes) {
      setup.set_group(util::ProcessGroup::own_session);
    }

    std::vector<std::string> env;
    for (char** entry = environ; *entry != nullptr; ++entry) {
      if (!std::string_view(*entry).starts_with("SPECSIM_WORKER_")) {
        env.emplace_back(*entry);
      }
    }
    env.push_back(fmt::format("{}={}", k_env_rank, rank));
    env.push_back(fmt::format("{}={}", k_env_dir, state_dir.string()));
    env.push_back(fmt::format("{}={}", k_env_parent, ::getpid()));
    env.push_back(fmt::format("{}={}", k_env_detach, detach == Detach::yes ? 1 : 0));
    env.push_back(fmt::format("{}={}", k_env_name, names[static_cast<std::size_t>(rank)]));
    // argv is just the name, so /proc/PID/cmdline reads like SGLang's setproctitle.
    const std::string& name = names[static_cast<std::size_t>(rank)];
    const auto spawned = setup.spawn(*executable, {name}, env);
    if (!spawned) {
      return std::unexpected(fmt::format("cannot start {}: {}", name, std::strerror(spawned.error())));
    }
    const pid_t pid = *spawned;
    // posix_spawn returns after the exec, so the worker's start time is final.
    pool.m_workers.push_back(Worker{.pid = pid,
                                    .rank = rank,
                                    .gpu = gpu,
                                    .start_time = process_start_time(pid).value_or(0),
                                    .name = name,
                                    .pipe = std::move(write_end)});
  }
  pool.m_state_dir = state_dir;
  pool.set_used_mib(0);
  return pool;
}

std::vector<int> WorkerPool::gpus() const {
  std::vector<int> out;
  for (const auto& worker : m_workers) {
    out.push_back(worker.gpu);
  }
  return out;
}

void WorkerPool::set_used_mib(long mib) {
  for (const auto& worker : m_workers) {
    if (worker.reaped) {
      continue;
    }
    const AppEntry entry{
        .pid = worker.pid, .name = worker.name, .gpu = worker.gpu, .used_mib = mib, .start_time = worker.start_time};
    // A state directory that vanished only makes nvidia-smi show less; serving goes on.
    (void)write_app_entry(m_state_dir, entry);
  }
}

std::optional<int> WorkerPool::reap_dead() {
  std::optional<int> dead;
  for (auto& worker : m_workers) {
    if (!worker.reaped && ::waitpid(worker.pid, nullptr, WNOHANG) == worker.pid) {
      worker.reaped = true;
      worker.pipe.reset();
      dead = worker.rank;
    }
  }
  return dead;
}

bool is_worker_process() {
  return std::getenv(k_env_rank) != nullptr;
}

int run_worker() {
  const std::string name = env_or_empty(k_env_name).empty() ? "specsim::worker" : std::string(env_or_empty(k_env_name));
  const pid_t parent = env_number<pid_t>(k_env_parent);
  const bool detached = env_or_empty(k_env_detach) == "1";
  const std::filesystem::path dir(std::string(env_or_empty(k_env_dir)));
  for (const char* variable : {k_env_rank, k_env_parent, k_env_detach, k_env_dir, k_env_name}) {
    ::unsetenv(variable);
  }
  ::prctl(PR_SET_NAME, name.substr(0, k_comm_length).c_str(), 0, 0, 0);

  sigset_t mask;
  sigemptyset(&mask);
  for (int sig : {SIGTERM, SIGINT, SIGHUP}) {
    sigaddset(&mask, sig);
  }
  ::sigprocmask(SIG_BLOCK, &mask, nullptr);
  util::UniqueFd signals(::signalfd(-1, &mask, SFD_CLOEXEC));
  if (!detached) {
    ::prctl(PR_SET_PDEATHSIG, SIGTERM, 0, 0, 0);
    // The server may have died before the line above.
    if (::getppid() != parent) {
      return 0;
    }
  }
  util::UniqueFd pipe(k_worker_pipe_fd);
  for (;;) {
    std::array<pollfd, 2> fds{pollfd{signals.get(), POLLIN, 0}, pollfd{pipe ? pipe.get() : -1, POLLIN, 0}};
    if (::poll(fds.data(), fds.size(), -1) < 0) {
      if (errno == EINTR) {
        continue;
      }
      break;
    }
    if (fds[0].revents != 0) {
      break;
    }
    if (fds[1].revents == 0) {
      continue;
    }
    std::array<char, 64> buffer{};
    const ssize_t got = ::read(pipe.get(), buffer.data(), buffer.size());
    if (got < 0 && errno == EINTR) {
      continue;
    }
    if (got <= 0) {
      // The server is gone: a tied worker follows it, an orphan lives on.
      if (!detached) {
        break;
      }
      pipe.reset();
    }
  }
  remove_app_entry(dir, ::getpid());
  return 0;
}

} // namespace specctl::sim
