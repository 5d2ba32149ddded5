#include "process.hpp"

#include "files.hpp"
#include "wait.hpp"

#include <specctl/sim/gpu_state.hpp>
#include <specctl/util/unique_fd.hpp>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <sstream>
#include <string_view>
#include <thread>
#include <utility>

#include <fcntl.h>
#include <pwd.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

extern char** environ;

namespace specctl::test {

namespace {

bool all_digits(const std::string& name) {
  return !name.empty() && std::all_of(name.begin(), name.end(), [](char c) { return c >= '0' && c <= '9'; });
}

} // namespace

std::string find_program(const std::string& name) {
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

void prepare_forked_child(pid_t parent) {
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
}

pid_t spawn(const std::vector<std::string>& argv, const std::filesystem::path& log,
            const std::vector<std::string>& env) {
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
  // Close-on-exec: the child keeps only its copies as 0, 1 and 2.
  util::UniqueFd input(::open("/dev/null", O_RDONLY | O_CLOEXEC));
  util::UniqueFd output(::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600));
  if (!input || !output) {
    return -1;
  }
  pid_t parent = ::getpid();
  pid_t pid = ::fork();
  if (pid == 0) {
    prepare_forked_child(parent);
    ::dup2(input.get(), 0);
    ::dup2(output.get(), 1);
    ::dup2(output.get(), 2);
    ::execve(program.c_str(), args.data(), envp.data());
    ::_exit(127);
  }
  return pid;
}

int wait_for(pid_t pid, std::chrono::steady_clock::duration timeout) {
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

ProgramResult run_program(const std::vector<std::string>& argv, const std::filesystem::path& scratch_dir,
                          const std::vector<std::string>& env, std::chrono::steady_clock::duration timeout) {
  static int counter = 0;
  auto log = scratch_dir / ("program-" + std::to_string(::getpid()) + "-" + std::to_string(++counter) + ".log");
  ProgramResult result;
  pid_t pid = spawn(argv, log, env);
  if (pid > 0) {
    result.exit_code = wait_for(pid, timeout);
  }
  result.output = read_file(log);
  std::error_code ec;
  std::filesystem::remove(log, ec);
  return result;
}

std::vector<pid_t> descendants(pid_t root) {
  std::vector<std::pair<pid_t, pid_t>> parent_of; // (pid, ppid)
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator("/proc", ec)) {
    auto name = entry.path().filename().string();
    if (!all_digits(name)) {
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

std::string comm_of(pid_t pid) {
  auto comm = read_file(std::filesystem::path("/proc") / std::to_string(pid) / "comm");
  while (!comm.empty() && comm.back() == '\n') {
    comm.pop_back();
  }
  return comm;
}

std::string current_user() {
  const passwd* entry = ::getpwuid(::getuid());
  return entry != nullptr ? entry->pw_name : "root";
}

bool process_alive(pid_t pid) {
  if (pid <= 0 || (::kill(pid, 0) != 0 && errno == ESRCH)) {
    return false;
  }
  auto stat = read_file(std::filesystem::path("/proc") / std::to_string(pid) / "stat");
  auto close = stat.rfind(')');
  if (close == std::string::npos || close + 2 >= stat.size()) {
    return false;
  }
  return stat[close + 2] != 'Z';
}

std::vector<pid_t> live_tagged_processes(const std::string& tag) {
  std::vector<pid_t> pids;
  const std::string needle = "SPECCTL_TAG=" + tag;
  std::error_code ec;
  for (std::filesystem::directory_iterator it("/proc", ec), end; !ec && it != end; it.increment(ec)) {
    std::string name = it->path().filename().string();
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) {
      continue;
    }
    auto pid = static_cast<pid_t>(std::stol(name));
    if (!sim::process_start_time(pid)) {
      continue;
    }
    std::istringstream vars(read_file(it->path() / "environ"));
    std::string var;
    while (std::getline(vars, var, '\0')) {
      if (var == needle) {
        pids.push_back(pid);
        break;
      }
    }
  }
  return pids;
}

std::string tag_of(pid_t pid) {
  std::istringstream vars(read_file(std::filesystem::path("/proc") / std::to_string(pid) / "environ"));
  std::string var;
  while (std::getline(vars, var, '\0')) {
    if (var.starts_with("SPECCTL_TAG=")) {
      return var.substr(std::string_view("SPECCTL_TAG=").size());
    }
  }
  return {};
}

} // namespace specctl::test
