// What a command on an SSH node costs when the user's ~/.bashrc is slow
// (bench/README.md): the same polls through the shells kept open per
// connection (the default) and with a session per command (`shells: 0` of the
// SSH target, as before #38). The node is a test sshd on 127.0.0.1 whose
// sessions get a home of their own with a ~/.bashrc that costs about 0.15 s
// of CPU, as a `pyenv init` did on this machine. A measurement, not a test.
//
//   specctl_exec_bench [POLLS]        (default 20)

#include "../../tests/support/files.hpp"
#include "../../tests/support/sshd.hpp"

#include <specctl/remote/ssh_host.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fmt/format.h>
#include <string>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

// A start-up that burns CPU as pyenv's rehash does, and counts the shells that read it.
constexpr const char* k_bashrc = "echo x >> \"$HOME/rc-count\"\n"
                                 "i=0; while [ $i -lt 60000 ]; do i=$((i+1)); done\n";
// A poll as the coordinator's of a host-side benchmark: read a small file and a process state.
constexpr const char* k_poll = "cat /proc/loadavg; ps -o stat= -p 1";
constexpr auto k_poll_timeout = std::chrono::seconds{60};

double percentile(std::vector<double> values, double p) {
  std::sort(values.begin(), values.end());
  auto at = static_cast<std::size_t>(p * static_cast<double>(values.size() - 1) + 0.5);
  return values[at];
}

} // namespace

int main(int argc, char** argv) {
  const int polls = argc > 1 ? std::atoi(argv[1]) : 20;
  if (polls < 1) {
    std::fprintf(stderr, "usage: specctl_exec_bench [POLLS]\n");
    return 2;
  }
  if (auto why = specctl::test::TestSshd::unavailable()) {
    std::fprintf(stderr, "specctl_exec_bench: no sshd here: %s\n", why->c_str());
    return 2;
  }
  auto sshd = specctl::test::TestSshd::start();
  if (!sshd) {
    std::fprintf(stderr, "specctl_exec_bench: %s\n", sshd.error().c_str());
    return 1;
  }
  const auto home = (*sshd)->session_home();
  specctl::test::write_file(home / ".bashrc", k_bashrc);
  std::printf("%d polls (\"%s\") over libssh2, ~/.bashrc costing about 0.15 s of CPU\n", polls, k_poll);
  for (int shells : {0, specctl::remote::k_default_shells}) {
    std::filesystem::remove(home / "rc-count");
    auto target = (*sshd)->target("node");
    target.shells = shells;
    auto host = specctl::remote::connect_ssh(target);
    if (!host) {
      std::fprintf(stderr, "specctl_exec_bench: %s\n", host.error().what());
      return 1;
    }
    std::vector<double> ms;
    const auto began = Clock::now();
    for (int i = 0; i < polls; ++i) {
      const auto asked = Clock::now();
      auto ran = (*host)->exec(k_poll, k_poll_timeout);
      if (!ran || ran->exit_code != 0) {
        std::fprintf(stderr, "specctl_exec_bench: the poll failed: %s\n", ran ? ran->err.c_str() : ran.error().what());
        return 1;
      }
      ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - asked).count());
    }
    const double total = std::chrono::duration<double>(Clock::now() - began).count();
    const auto logins = std::ranges::count(specctl::test::read_file(home / "rc-count"), '\n');
    std::printf("shells %d: %ld login shells, poll latency median %.1f ms, p90 %.1f ms, max %.1f ms; %.2f s in all\n",
                shells, static_cast<long>(logins), percentile(ms, 0.5), percentile(ms, 0.9),
                *std::max_element(ms.begin(), ms.end()), total);
  }
  return 0;
}
