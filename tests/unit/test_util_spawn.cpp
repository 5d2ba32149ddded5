#include <doctest/doctest.h>

#include "../support/files.hpp"
#include "../support/temp_dir.hpp"

#include <specctl/util/spawn.hpp>
#include <specctl/util/unique_fd.hpp>

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>

using specctl::test::read_file;
using specctl::test::TempDir;
using specctl::util::ProcessGroup;
using specctl::util::SpawnSetup;
using specctl::util::UniqueFd;

namespace {

// /bin/sh exits at once, so a blocking wait is bounded.
int wait_exit_code(pid_t pid) {
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

} // namespace

TEST_CASE("util::SpawnSetup") {
  TempDir dir;
  const auto output = dir.path() / "out.txt";

  SUBCASE("file actions run in order; the environment is the one given") {
    SpawnSetup setup;
    setup.add_open(STDIN_FILENO, "/dev/null", O_RDONLY);
    setup.add_open(STDOUT_FILENO, output, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    setup.add_dup2(STDOUT_FILENO, STDERR_FILENO);
    auto pid =
        setup.spawn("/bin/sh", {"sh", "-c", "printf '%s,' \"$GREETING\"; printf err >&2; exit 3"}, {"GREETING=hello"});
    REQUIRE(pid);
    CHECK(wait_exit_code(*pid) == 3);
    CHECK(read_file(output) == "hello,err");
  }

  SUBCASE("without an environment the child gets this process's") {
    REQUIRE(::setenv("SPECCTL_SPAWN_TEST", "inherited", 1) == 0);
    SpawnSetup setup;
    setup.add_open(STDOUT_FILENO, output, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    auto pid = setup.spawn("/bin/sh", {"sh", "-c", "printf %s \"$SPECCTL_SPAWN_TEST\""});
    ::unsetenv("SPECCTL_SPAWN_TEST");
    REQUIRE(pid);
    CHECK(wait_exit_code(*pid) == 0);
    CHECK(read_file(output) == "inherited");
  }

  SUBCASE("descriptors closed in the child stay open here") {
    std::array<int, 2> ends{};
    REQUIRE(::pipe(ends.data()) == 0);
    UniqueFd read_end(ends[0]);
    UniqueFd write_end(ends[1]);
    SpawnSetup setup;
    setup.add_dup2(write_end.get(), STDOUT_FILENO);
    setup.add_close(read_end.get());
    setup.add_close_from(STDERR_FILENO + 1);
    // The pipe is not O_CLOEXEC: had it leaked into the child, writing to its number would work.
    const std::string script =
        "printf ok; if printf x 2>/dev/null >&" + std::to_string(write_end.get()) + "; then exit 1; fi; exit 0";
    auto pid = setup.spawn("/bin/sh", {"sh", "-c", script});
    REQUIRE(pid);
    write_end.reset();
    std::array<char, 16> buffer{};
    const ssize_t got = ::read(read_end.get(), buffer.data(), buffer.size());
    CHECK(std::string(buffer.data(), static_cast<std::size_t>(std::max<ssize_t>(got, 0))) == "ok");
    CHECK(wait_exit_code(*pid) == 0);
  }

  SUBCASE("process groups and sessions") {
    for (const auto group : {ProcessGroup::inherit, ProcessGroup::own_group, ProcessGroup::own_session}) {
      CAPTURE(static_cast<int>(group));
      SpawnSetup setup;
      setup.set_group(group);
      // The child waits for its stdin to close, so it can be inspected alive.
      std::array<int, 2> ends{};
      REQUIRE(::pipe2(ends.data(), O_CLOEXEC) == 0);
      UniqueFd read_end(ends[0]);
      UniqueFd write_end(ends[1]);
      setup.add_dup2(read_end.get(), STDIN_FILENO);
      auto pid = setup.spawn("/bin/sh", {"sh", "-c", "read line; exit 0"});
      REQUIRE(pid);
      const bool own_group = ::getpgid(*pid) == *pid;
      const bool own_session = ::getsid(*pid) == *pid;
      write_end.reset();
      CHECK(wait_exit_code(*pid) == 0);
      CHECK(own_group == (group != ProcessGroup::inherit));
      CHECK(own_session == (group == ProcessGroup::own_session));
    }
  }

  SUBCASE("signals blocked or ignored here are not in the child") {
    sigset_t block;
    sigemptyset(&block);
    sigaddset(&block, SIGUSR1);
    sigset_t before;
    REQUIRE(::pthread_sigmask(SIG_BLOCK, &block, &before) == 0);
    struct sigaction ignore {};
    ignore.sa_handler = SIG_IGN;
    struct sigaction previous {};
    REQUIRE(::sigaction(SIGUSR1, &ignore, &previous) == 0);
    SpawnSetup setup;
    setup.unblock_signals();
    sigset_t defaults;
    sigemptyset(&defaults);
    sigaddset(&defaults, SIGUSR1);
    setup.default_signals(defaults);
    // Killed by its own SIGUSR1 only if the signal is neither blocked nor ignored.
    auto pid = setup.spawn("/bin/sh", {"sh", "-c", "kill -USR1 $$; exit 0"});
    ::sigaction(SIGUSR1, &previous, nullptr);
    ::pthread_sigmask(SIG_SETMASK, &before, nullptr);
    REQUIRE(pid);
    CHECK(wait_exit_code(*pid) == 128 + SIGUSR1);
  }

  SUBCASE("detach: no descriptor of ours, its own session, and no signal blocked or ignored") {
    // A descriptor without O_CLOEXEC, and SIGUSR1 blocked and ignored here: detach() must undo all three.
    UniqueFd leak(::open("/dev/null", O_WRONLY));
    REQUIRE(leak);
    sigset_t block;
    sigemptyset(&block);
    sigaddset(&block, SIGUSR1);
    sigset_t before;
    REQUIRE(::pthread_sigmask(SIG_BLOCK, &block, &before) == 0);
    struct sigaction ignore {};
    ignore.sa_handler = SIG_IGN;
    struct sigaction previous {};
    REQUIRE(::sigaction(SIGUSR1, &ignore, &previous) == 0);
    // The child waits for its stdin to close, so its session can be read while it lives.
    std::array<int, 2> ends{};
    REQUIRE(::pipe2(ends.data(), O_CLOEXEC) == 0);
    UniqueFd read_end(ends[0]);
    UniqueFd write_end(ends[1]);
    SpawnSetup setup;
    setup.add_dup2(read_end.get(), STDIN_FILENO);
    setup.detach();
    // Exit 1 if the descriptor leaked; killed by SIGUSR1 only if it is neither blocked nor ignored.
    const std::string script = "read line; if printf x 2>/dev/null >&" + std::to_string(leak.get()) +
                               "; then exit 1; fi; kill -USR1 $$; exit 0";
    auto pid = setup.spawn("/bin/sh", {"sh", "-c", script});
    ::sigaction(SIGUSR1, &previous, nullptr);
    ::pthread_sigmask(SIG_SETMASK, &before, nullptr);
    REQUIRE(pid);
    const bool own_session = ::getsid(*pid) == *pid;
    write_end.reset();
    CHECK(wait_exit_code(*pid) == 128 + SIGUSR1);
    CHECK(own_session);
  }

  SUBCASE("a program that cannot start is its errno") {
    SpawnSetup setup;
    auto pid = setup.spawn(dir.path() / "missing", {"missing"});
    REQUIRE_FALSE(pid);
    CHECK(pid.error() == ENOENT);
  }

  SUBCASE("a setting that cannot be recorded fails the spawn") {
    SpawnSetup setup;
    setup.add_dup2(-1, STDOUT_FILENO);
    auto pid = setup.spawn("/bin/sh", {"sh", "-c", "exit 0"});
    REQUIRE_FALSE(pid);
    CHECK(pid.error() == EBADF);
  }
}
