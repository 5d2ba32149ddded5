#include <doctest/doctest.h>

#include "../../src/remote/shell_pool.hpp"
#include "../support/files.hpp"
#include "../support/temp_dir.hpp"

#include <specctl/util/shell.hpp>
#include <specctl/util/spawn.hpp>

#include <fmt/format.h>

#include <chrono>
#include <filesystem>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <fcntl.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

// The shells of shell_pool.hpp, each a real /bin/sh on this machine reached over
// a socket pair, as a channel would reach it on a node: the framing, the
// start-up, timeouts, and shells that die idle or mid-command. Over SSH the
// same pool is in test_remote_ssh_host.cpp and test_remote_openssh_host.cpp.

namespace {

using namespace std::chrono_literals;
using specctl::remote::CommandResult;
using specctl::remote::ShellPool;
using specctl::remote::ShellStream;
using Clock = std::chrono::steady_clock;
namespace fs = std::filesystem;

constexpr auto k_pool_timeout = std::chrono::seconds{20};
constexpr auto k_pool_answer = std::chrono::seconds{5};

// A local shell process in a session of its own, killed with everything it
// started when the pool lets it go.
struct LocalShell {
  pid_t pid = -1;
  ~LocalShell() {
    if (pid > 0) {
      ::kill(-pid, SIGKILL);
      ::waitpid(pid, nullptr, 0);
    }
  }
};

// Opens shells as `/bin/sh -c "RC\nCOMMAND"`: RC stands for the user's start-up.
class LocalShells {
public:
  explicit LocalShells(std::string rc = {}) : m_rc(std::move(rc)) {}

  specctl::remote::ShellOpener opener() {
    return
        [this](const std::string& command_line, specctl::util::Duration) -> std::expected<ShellStream, specctl::Error> {
          int pair[2] = {-1, -1};
          REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) == 0);
          specctl::util::UniqueFd ours(pair[0]);
          specctl::util::UniqueFd theirs(pair[1]);
          ::fcntl(ours.get(), F_SETFL, ::fcntl(ours.get(), F_GETFL) | O_NONBLOCK);
          specctl::util::SpawnSetup setup;
          setup.add_dup2(theirs.get(), STDIN_FILENO);
          setup.add_dup2(theirs.get(), STDOUT_FILENO);
          setup.add_open(STDERR_FILENO, "/dev/null", O_WRONLY);
          setup.detach();
          auto pid = setup.spawn("/bin/sh", {"/bin/sh", "-c", m_rc + "\n" + command_line});
          REQUIRE(pid.has_value());
          auto shell = std::make_shared<LocalShell>();
          shell->pid = *pid;
          std::lock_guard lock(m_mutex);
          m_pids.push_back(*pid);
          return ShellStream{std::move(ours), shell};
        };
  }
  int opened() {
    std::lock_guard lock(m_mutex);
    return static_cast<int>(m_pids.size());
  }
  pid_t last_pid() {
    std::lock_guard lock(m_mutex);
    return m_pids.back();
  }

private:
  std::string m_rc;
  std::mutex m_mutex;
  std::vector<pid_t> m_pids;
};

CommandResult ran(ShellPool& pool, const std::string& command, specctl::util::Duration timeout = k_pool_timeout) {
  auto outcome = pool.run(command, timeout);
  REQUIRE(outcome.has_value());
  REQUIRE_MESSAGE(outcome->has_value(), outcome->error().what());
  return **outcome;
}

} // namespace

TEST_CASE("shell pool runs commands in one shell as a channel of their own would") {
  // A start-up that prints, as conda's and pyenv's do.
  LocalShells shells("echo 'rc says hello'; echo 'rc warns' >&2; cd /");
  ShellPool pool("local shells", shells.opener(), k_pool_answer);

  SUBCASE("stdout, stderr and the exit code come back separately, the start-up's words in neither") {
    auto result = ran(pool, "printf out; printf err >&2; exit 3");
    CHECK(result.out == "out");
    CHECK(result.err == "err");
    CHECK(result.exit_code == 3);
    CHECK_FALSE(result.timed_out);
  }
  SUBCASE("trailing newlines, or none, survive on both streams") {
    auto result = ran(pool, "printf 'a\\n\\n'; printf 'b\\n\\n' >&2");
    CHECK(result.out == "a\n\n");
    CHECK(result.err == "b\n\n");
    result = ran(pool, "printf 'x y z'; printf ' 7' >&2; exit 4");
    CHECK(result.out == "x y z");
    CHECK(result.err == " 7");
    CHECK(result.exit_code == 4);
  }
  SUBCASE("a command killed by a signal reports 128 + the signal; stdin is empty") {
    CHECK(ran(pool, "kill -TERM $$").exit_code == 128 + SIGTERM);
    auto result = ran(pool, "cat; echo done");
    CHECK(result.out == "done\n");
  }
  SUBCASE("nasty strings reach the command intact through shell_quote") {
    const std::string nasty = "it's \"$HOME\" `id` $(id) ; | & \\ \n\ttab %s %d";
    CHECK(ran(pool, "printf '%s' " + specctl::util::shell_quote(nasty)).out == nasty);
  }
  SUBCASE("MiBs of stdout and stderr arrive intact") {
    auto result = ran(pool, "head -c 3000000 /dev/zero | tr '\\0' o; head -c 1000000 /dev/zero | tr '\\0' e >&2");
    CHECK(result.out == std::string(3'000'000, 'o'));
    CHECK(result.err == std::string(1'000'000, 'e'));
  }
  SUBCASE("what a command changes stays in it, and one shell serves them all") {
    ran(pool, "cd /tmp; export SPECCTL_POOL_TEST=1; exit 9");
    auto result = ran(pool, "pwd; echo \"${SPECCTL_POOL_TEST-unset}\"");
    CHECK(result.out == "/\nunset\n");
    for (int i = 0; i < 20; ++i) {
      CHECK(ran(pool, "echo " + std::to_string(i)).out == std::to_string(i) + "\n");
    }
    CHECK(shells.opened() == 1);
    CHECK(pool.counts().started == 1);
    CHECK(pool.counts().commands == 22);
  }
}

TEST_CASE("shell pool: a command past its timeout comes back timed out and takes its shell with it") {
  LocalShells shells;
  ShellPool pool("local shells", shells.opener(), k_pool_answer);
  ran(pool, "true");
  const auto before = Clock::now();
  auto result = ran(pool, "echo early; sleep 30", 300ms);
  CHECK(result.timed_out);
  CHECK(result.out == "early\n");
  CHECK(Clock::now() - before < 10s);
  CHECK(ran(pool, "echo next").out == "next\n");
  CHECK(shells.opened() == 2);
}

TEST_CASE("shell pool: an idle shell that hangs or died is passed over, and a new one takes the next command") {
  LocalShells shells;
  ShellPool pool("local shells", shells.opener(), 2s);
  ran(pool, "true");
  SUBCASE("hung: it does not answer the ping, so the command is given back unsent") {
    ::kill(-shells.last_pid(), SIGSTOP);
    const auto before = Clock::now();
    CHECK_FALSE(pool.run("echo lost", k_pool_timeout).has_value());
    CHECK(Clock::now() - before < 10s);
  }
  SUBCASE("dead: seen idle or at the ping, never run there") {
    ::kill(-shells.last_pid(), SIGKILL);
    auto outcome = pool.run("echo lost", k_pool_timeout);
    if (outcome) {
      // The pool saw it gone while idle and started a new shell at once.
      REQUIRE(outcome->has_value());
      CHECK((*outcome)->out == "lost\n");
    }
  }
  CHECK(ran(pool, "echo found").out == "found\n");
  CHECK(shells.opened() == 2);
}

TEST_CASE("shell pool: a shell that dies under a command is an error, and the command is not run again") {
  specctl::test::TempDir dir("specctl-shell-pool");
  const auto log = dir / "ran";
  LocalShells shells;
  ShellPool pool("local shells", shells.opener(), k_pool_answer);
  ran(pool, "true");
  const auto shell = shells.last_pid();
  auto outcome = pool.run(fmt::format("echo ran >> {}; kill -KILL {}", specctl::util::shell_quote(log.string()), shell),
                          k_pool_timeout);
  REQUIRE(outcome.has_value());
  REQUIRE_FALSE(outcome->has_value());
  CHECK(std::string(outcome->error().what()).find("connection lost while running") != std::string::npos);
  CHECK(specctl::test::read_file(log) == "ran\n");
  CHECK(ran(pool, "echo again").out == "again\n");
}

TEST_CASE("shell pool: a shell leaves no file behind, however it ends") {
  specctl::test::TempDir tmp("specctl-shell-pool-tmp");
  // The shells' mktemp makes its file here.
  LocalShells shells(fmt::format("TMPDIR={}; export TMPDIR", specctl::util::shell_quote(tmp.path().string())));
  ShellPool pool("local shells", shells.opener(), k_pool_answer);
  auto result = ran(pool, "echo to stderr >&2; echo to stdout");
  CHECK(result.err == "to stderr\n");
  CHECK(fs::is_empty(tmp.path()));
  ::kill(-shells.last_pid(), SIGKILL);
  CHECK(fs::is_empty(tmp.path()));
}

TEST_CASE("shell pool: a host where shells do not start is given up after three tries") {
  LocalShells shells("exit 1");
  ShellPool pool("local shells", shells.opener(), k_pool_answer);
  for (int i = 0; i < 5; ++i) {
    CHECK_FALSE(pool.run("echo hi", k_pool_timeout).has_value());
  }
  CHECK(shells.opened() == specctl::remote::k_max_shell_failures);
  CHECK(pool.counts().failed == specctl::remote::k_max_shell_failures);
  CHECK(pool.counts().passed_over == 5);
}

TEST_CASE("shell pool: a start-up slower than the answer bound gives the command back and counts against shells") {
  LocalShells shells("sleep 3");
  ShellPool pool("local shells", shells.opener(), 500ms);
  const auto before = Clock::now();
  CHECK_FALSE(pool.run("echo hi", k_pool_timeout).has_value());
  CHECK(Clock::now() - before < 2500ms);
  CHECK(pool.counts().failed == 1);
  CHECK(pool.counts().started == 0);
}

TEST_CASE("shell pool: commands from several threads use at most the pool's shells") {
  LocalShells shells;
  ShellPool pool("local shells", shells.opener(), k_pool_answer);
  constexpr int k_threads = 8;
  std::vector<std::future<std::optional<std::expected<CommandResult, specctl::Error>>>> runs;
  for (int i = 0; i < k_threads; ++i) {
    runs.push_back(std::async(std::launch::async,
                              [&pool, i] { return pool.run(fmt::format("sleep 0.3; echo {}", i), k_pool_timeout); }));
  }
  int given_back = 0;
  for (int i = 0; i < k_threads; ++i) {
    auto outcome = runs[static_cast<std::size_t>(i)].get();
    if (!outcome) {
      ++given_back;
      continue;
    }
    REQUIRE(outcome->has_value());
    CHECK((*outcome)->out == fmt::format("{}\n", i));
  }
  CHECK(shells.opened() <= specctl::remote::k_default_shells);
  CHECK(pool.counts().passed_over == given_back);
}
