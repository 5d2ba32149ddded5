// The jump-host topology of tests/support/jump_topology.hpp, proved with the
// system OpenSSH client: the target answers only through its jump hosts.

#include <doctest/doctest.h>

#include "../support/files.hpp"
#include "../support/jump_topology.hpp"
#include "../support/process.hpp"
#include "../support/skip.hpp"
#include "../support/temp_dir.hpp"
#include "../support/wait.hpp"

#include <algorithm>
#include <chrono>
#include <csignal>
#include <memory>
#include <string>
#include <vector>

namespace specctl::test {
namespace {

// One ssh command, jump hosts included, on a loaded two-core machine.
constexpr auto k_ssh_timeout = std::chrono::seconds{30};
// A direct attempt at an address this namespace has no route to gives up by then.
constexpr int k_direct_connect_timeout_s = 3;
constexpr auto k_direct_bound = std::chrono::seconds{15};
// ssh notices its jump connection died: EOF on the ProxyCommand's pipe at once.
constexpr auto k_cut_notice = std::chrono::seconds{10};
constexpr auto k_long_command_s = 60;

// Starts a topology, or says why this machine cannot have one (nullptr then).
std::unique_ptr<JumpTopology> start_or_skip(JumpTopologyOptions options = {}) {
  if (auto why = JumpTopology::unavailable()) {
    skip(*why);
    return nullptr;
  }
  if (find_program("ssh").find('/') == std::string::npos) {
    skip("no ssh client (openssh-client is not installed)");
    return nullptr;
  }
  auto started = JumpTopology::start(std::move(options));
  REQUIRE_MESSAGE(started, (started ? "" : started.error()));
  return std::move(*started);
}

// `ssh -F <the topology's config> [-J jump] -p PORT user@ADDRESS COMMAND`.
std::vector<std::string> ssh_argv(const JumpTopology& topology, const std::string& jump, Hop to,
                                  const std::string& command) {
  std::vector<std::string> argv{"ssh", "-F", topology.ssh_config().string()};
  if (!jump.empty()) {
    argv.insert(argv.end(), {"-J", jump});
  }
  argv.insert(argv.end(),
              {"-p", std::to_string(topology.port(to)), topology.user() + "@" + topology.address(to), command});
  return argv;
}

ProgramResult ssh(const JumpTopology& topology, const TempDir& scratch, const std::string& jump, Hop to,
                  const std::string& command) {
  return run_program(ssh_argv(topology, jump, to, command), scratch.path(), {}, k_ssh_timeout);
}

// Which hop a session ran on and in which namespace, as the session itself says.
std::string whereabouts_command() {
  return "echo hop=$SPECCTL_TEST_HOP; " + ip_program() + " netns identify; " + ip_program() + " -br addr";
}

std::size_t count_lines_with(const std::string& text, const std::string& needle) {
  auto lines = lines_of(text);
  return static_cast<std::size_t>(
      std::count_if(lines.begin(), lines.end(), [&](const std::string& line) { return line.contains(needle); }));
}

std::string bastion_only(const JumpTopology& topology) {
  return topology.user() + "@" + topology.address(Hop::bastion) + ":" + std::to_string(topology.port(Hop::bastion));
}

// Kills a process started for a test when the test leaves early.
struct KillOnExit {
  pid_t pid;
  ~KillOnExit() {
    if (pid > 0 && process_alive(pid)) {
      ::kill(pid, SIGKILL);
      wait_for(pid, std::chrono::seconds{2});
    }
  }
};

} // namespace

TEST_CASE("jump topology: the target answers through the bastion from a namespace of its own") {
  auto topology = start_or_skip();
  if (!topology) {
    return;
  }
  TempDir scratch("specctl-jump-test");

  auto through = ssh(*topology, scratch, topology->jump_spec(), Hop::target, whereabouts_command());
  INFO(through.output << topology->logs());
  CHECK(through.exit_code == 0);
  CHECK(through.output.find("hop=target\n") != std::string::npos);
  CHECK(through.output.find(topology->netns(Hop::target) + "\n") != std::string::npos);
  CHECK(through.output.find(topology->address(Hop::target) + "/24") != std::string::npos);

  // The bastion itself is on 127.0.0.1, and its sessions run in J1.
  auto bastion = ssh(*topology, scratch, "", Hop::bastion, whereabouts_command());
  INFO(bastion.output);
  CHECK(bastion.exit_code == 0);
  CHECK(bastion.output.find("hop=bastion\n") != std::string::npos);
  CHECK(bastion.output.find(topology->netns(Hop::bastion) + "\n") != std::string::npos);
  CHECK(bastion.output.find("198.51.100.1/24") != std::string::npos);
  CHECK(topology->bastion_connections() == 2);
}

TEST_CASE("jump topology: the target cannot be reached directly") {
  auto topology = start_or_skip();
  if (!topology) {
    return;
  }
  TempDir scratch("specctl-jump-test");
  // It is up, seen from the bastion's namespace...
  CHECK(port_accepts_in_netns(topology->netns(Hop::bastion), topology->port(Hop::target),
                              topology->address(Hop::target)));

  // ...and out of reach from this one: no route there but the default one, if any
  // (a sandbox's gateway may even accept the TCP connection; no banner comes).
  auto argv = ssh_argv(*topology, "", Hop::target, "echo reached");
  argv.insert(argv.begin() + 1, {"-o", "ConnectTimeout=" + std::to_string(k_direct_connect_timeout_s)});
  const auto began = Clock::now();
  auto direct = run_program(argv, scratch.path(), {}, k_direct_bound);
  const auto took = Clock::now() - began;
  INFO(direct.output << topology->logs());
  CHECK(direct.exit_code == 255);
  CHECK(direct.output.find("reached") == std::string::npos);
  CHECK(took < k_direct_bound);
  // Whatever reached the target came over the link from J1, none from out here.
  CHECK(count_lines_with(topology->target_sshd().log(), "Connection from") ==
        count_lines_with(topology->target_sshd().log(), "Connection from 198.51.100."));
}

TEST_CASE("jump topology: two hops reach the target and the bastion alone does not") {
  auto topology = start_or_skip({.hops = 2});
  if (!topology) {
    return;
  }
  TempDir scratch("specctl-jump-test");

  auto through = ssh(*topology, scratch, topology->jump_spec(), Hop::target, whereabouts_command());
  INFO(through.output << topology->logs());
  CHECK(through.exit_code == 0);
  CHECK(through.output.find("hop=target\n") != std::string::npos);
  CHECK(through.output.find(topology->netns(Hop::target) + "\n") != std::string::npos);
  CHECK(through.output.find("203.0.113.2/24") != std::string::npos);

  auto login2 = ssh(*topology, scratch, bastion_only(*topology), Hop::login2, whereabouts_command());
  INFO(login2.output);
  CHECK(login2.exit_code == 0);
  CHECK(login2.output.find("hop=login2\n") != std::string::npos);
  CHECK(login2.output.find(topology->netns(Hop::login2) + "\n") != std::string::npos);

  // J1 has no route to the second link: the bastion refuses the channel at once.
  auto one_hop = ssh(*topology, scratch, bastion_only(*topology), Hop::target, "echo reached");
  INFO(one_hop.output);
  CHECK(one_hop.exit_code == 255);
  CHECK(one_hop.output.find("reached") == std::string::npos);
  CHECK(one_hop.output.find("open failed") != std::string::npos);
  CHECK_FALSE(port_accepts_in_netns(topology->netns(Hop::bastion), topology->port(Hop::target),
                                    topology->address(Hop::target)));
  CHECK(
      port_accepts_in_netns(topology->netns(Hop::login2), topology->port(Hop::target), topology->address(Hop::target)));
}

TEST_CASE("jump topology: killing the bastion's sessions cuts an open ssh -J session") {
  auto topology = start_or_skip();
  if (!topology) {
    return;
  }
  TempDir scratch("specctl-jump-test");
  const auto log = scratch / "session.log";
  auto argv = ssh_argv(*topology, topology->jump_spec(), Hop::target,
                       "echo ready; exec sleep " + std::to_string(k_long_command_s));
  KillOnExit session{spawn(argv, log)};
  REQUIRE(session.pid > 0);
  bool ready = wait_until([&] { return read_file(log).find("ready") != std::string::npos; });
  INFO(read_file(log) << topology->logs());
  REQUIRE(ready);
  CHECK(topology->bastion_session_pids().size() >= 1);

  CHECK(topology->kill_bastion_sessions() >= 1);
  CHECK(topology->bastion_session_pids().empty());
  const auto code = wait_for(session.pid, k_cut_notice);
  session.pid = -1;
  INFO(read_file(log));
  CHECK(code == 255);

  // The bastion still accepts: a client that reconnects gets through again.
  auto again = ssh(*topology, scratch, topology->jump_spec(), Hop::target, "echo again");
  INFO(again.output);
  CHECK(again.exit_code == 0);
  CHECK(again.output.find("again") != std::string::npos);
}

TEST_CASE("jump topology: a hop whose host key changed is refused") {
  Hop hop = Hop::bastion;
  SUBCASE("bastion") {
    hop = Hop::bastion;
  }
  SUBCASE("login2") {
    hop = Hop::login2;
  }
  SUBCASE("target") {
    hop = Hop::target;
  }
  auto topology = start_or_skip({.hops = 2});
  if (!topology) {
    return;
  }
  TempDir scratch("specctl-jump-test");
  auto before = ssh(*topology, scratch, topology->jump_spec(), Hop::target, "echo reached");
  INFO(before.output << topology->logs());
  REQUIRE(before.exit_code == 0);

  const auto old_fingerprint = topology->host_key_fingerprint(hop);
  auto changed = topology->change_host_key(hop);
  REQUIRE_MESSAGE(changed, (changed ? "" : changed.error()));
  CHECK(topology->host_key_fingerprint(hop) != old_fingerprint);

  auto refused = ssh(*topology, scratch, topology->jump_spec(), Hop::target, "echo reached");
  INFO(refused.output);
  CHECK(refused.exit_code == 255);
  CHECK(refused.output.find("reached") == std::string::npos);
  CHECK(refused.output.find("REMOTE HOST IDENTIFICATION HAS CHANGED") != std::string::npos);
  CHECK(refused.output.find(topology->host_key_fingerprint(hop)) != std::string::npos);

  // Trusting the new key lets the client through: the hop changed its key, it did not break.
  write_file(topology->known_hosts(), topology->known_hosts_lines());
  auto trusted = ssh(*topology, scratch, topology->jump_spec(), Hop::target, "echo reached");
  INFO(trusted.output);
  CHECK(trusted.exit_code == 0);
  CHECK(trusted.output.find("reached") != std::string::npos);
}

} // namespace specctl::test
