// ProxyJump and ProxyCommand on specctl's own SSH client, against real sshds in
// network namespaces (tests/support/jump_topology.hpp): the target cannot be
// reached but through the bastion (and login2).

#include <doctest/doctest.h>

#include "../support/files.hpp"
#include "../support/jump_topology.hpp"
#include "../support/net.hpp"
#include "../support/process.hpp"
#include "../support/skip.hpp"
#include "../support/ssh_testing.hpp"
#include "../support/wait.hpp"

#include <specctl/remote/ssh_host.hpp>
#include <specctl/util/shell.hpp>
#include <specctl/util/unique_fd.hpp>

#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

using namespace specctl;
using test::Hop;
using test::JumpTopology;

namespace {

std::unique_ptr<JumpTopology> topology_or_skip(int hops) {
  if (auto why = JumpTopology::unavailable()) {
    test::skip(*why);
    return nullptr;
  }
  auto topology = JumpTopology::start({.hops = hops});
  if (!topology) {
    FAIL("cannot build the jump topology: " << topology.error());
  }
  return std::move(*topology);
}

// The target, as reached through every hop before it.
remote::SshTarget through_jumps(const JumpTopology& topology) {
  auto target = topology.hop_target(Hop::target, "gpu-node");
  target.jumps.push_back(topology.hop_target(Hop::bastion, "bastion"));
  if (topology.hops() == 2) {
    target.jumps.push_back(topology.hop_target(Hop::login2, "login2"));
  }
  return target;
}

std::unique_ptr<remote::SshHost> connect_or_fail(const remote::SshTarget& target, const JumpTopology& topology) {
  auto host = remote::connect_ssh(target);
  if (!host) {
    MESSAGE(topology.logs());
    FAIL("connect_ssh failed: " << std::string(host.error().what()));
  }
  return std::move(*host);
}

// What a command prints on the host, or the error.
std::string run(remote::Host& host, const std::string& command) {
  auto result = host.exec(command, std::chrono::seconds{20});
  if (!result) {
    return std::string("error: ") + result.error().what();
  }
  return result->out;
}

// The first 8 bytes a TCP server on 127.0.0.1:`port` says, within 10 s.
std::string read_banner(int port) {
  util::UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  timeval limit{10, 0};
  ::setsockopt(fd.get(), SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof limit);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = htons(static_cast<std::uint16_t>(port));
  if (::connect(fd.get(), reinterpret_cast<sockaddr*>(&address), sizeof address) != 0) {
    return "cannot connect";
  }
  std::string out;
  char buffer[8];
  while (out.size() < 8) {
    ssize_t n = specctl::test::recv_retrying(fd.get(), buffer, 8 - out.size());
    if (n <= 0) {
      break;
    }
    out.append(buffer, static_cast<std::size_t>(n));
  }
  return out;
}

// Processes whose command line holds `marker`.
std::size_t processes_with(const std::string& marker) {
  std::size_t count = 0;
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    std::ifstream in(entry.path() / "cmdline");
    std::string line;
    std::getline(in, line, '\0');
    std::string rest((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if ((line + " " + rest).find(marker) != std::string::npos) {
      ++count;
    }
  }
  return count;
}

} // namespace

TEST_CASE("ssh jump: a node behind a bastion runs commands and tunnels through it, and survives a dropped bastion") {
  auto topology = topology_or_skip(1);
  if (!topology) {
    return;
  }
  SUBCASE("directly, the node cannot be reached") {
    auto direct = topology->hop_target(Hop::target, "gpu-node");
    direct.connect_timeout = std::chrono::seconds{3};
    auto host = remote::connect_ssh(direct);
    REQUIRE_FALSE(host);
    CHECK(std::string(host.error().what()).find("gpu-node") != std::string::npos);
  }
  SUBCASE("through the bastion") {
    auto target = through_jumps(*topology);
    CHECK(target.route() == "laptop → bastion → gpu-node");
    auto host = connect_or_fail(target, *topology);
    CHECK(run(*host, "echo $SPECCTL_TEST_HOP") == "target\n");
    CHECK(topology->bastion_connections() == 1);

    // The tunnel to a port of the node rides the last hop: the node's own sshd answers.
    auto port = host->open_tunnel(topology->address(Hop::target), topology->port(Hop::target));
    REQUIRE(port);
    CHECK(read_banner(*port) == "SSH-2.0-");

    // The bastion drops (its sshd child killed): the chain is rebuilt for the next command.
    CHECK(topology->kill_bastion_sessions() >= 1);
    CHECK(run(*host, "echo again") == "again\n");
    CHECK(host->reconnect_count() >= 1);
    CHECK(topology->bastion_connections() >= 2);
  }
}

TEST_CASE("ssh jump: two hops pass, and a changed host key on the second hop is refused naming that hop") {
  auto topology = topology_or_skip(2);
  if (!topology) {
    return;
  }
  auto target = through_jumps(*topology);
  CHECK(target.route() == "laptop → bastion → login2 → gpu-node");
  {
    auto host = connect_or_fail(target, *topology);
    CHECK(run(*host, "echo $SPECCTL_TEST_HOP") == "target\n");
  }
  auto changed = topology->change_host_key(Hop::login2);
  REQUIRE_MESSAGE(changed, (changed ? "" : changed.error()));
  auto host = remote::connect_ssh(target);
  REQUIRE_FALSE(host);
  std::string message = host.error().what();
  INFO(message);
  CHECK(message.find("jump host login2") != std::string::npos);
  CHECK(message.find("HOST KEY CHANGED") != std::string::npos);
  CHECK(message.find("bastion (") == std::string::npos);
  CHECK(message.find('\n') == std::string::npos);
}

TEST_CASE("ssh jump: a ProxyCommand carries the connection, and ends with it") {
  auto topology = topology_or_skip(1);
  if (!topology) {
    return;
  }
  auto target = topology->hop_target(Hop::target, "gpu-node");
  auto bastion = topology->hop_target(Hop::bastion, "bastion");
  // A marker in the command line finds the proxy's processes afterwards.
  std::string marker = fmt::format("specctl-proxy-{}", ::getpid());
  SUBCASE("ssh -W through the bastion") {
    target.proxy_command =
        fmt::format("exec ssh -F {} -o SetEnv=M={} -W {}:{} -p {} {}@{}",
                    util::shell_quote(topology->ssh_config().string()), marker, topology->address(Hop::target),
                    topology->port(Hop::target), bastion.port, bastion.user, bastion.hostname);
    CHECK(target.route() == "laptop → (ProxyCommand) → gpu-node");
    {
      auto host = connect_or_fail(target, *topology);
      CHECK(run(*host, "echo $SPECCTL_TEST_HOP") == "target\n");
      CHECK(processes_with(marker) == 1);
      // A dropped proxy is run again.
      CHECK(topology->kill_bastion_sessions() >= 1);
      CHECK(run(*host, "echo again") == "again\n");
      CHECK(host->reconnect_count() >= 1);
    }
    CHECK(test::wait_until([&] { return processes_with(marker) == 0; }, std::chrono::seconds{5}));
  }
  SUBCASE("a ProxyCommand that fails says why, in one line") {
    target.proxy_command = "echo 'bastion.example: Name or service not known' >&2; exit 255";
    target.connect_timeout = std::chrono::seconds{5};
    auto host = remote::connect_ssh(target);
    REQUIRE_FALSE(host);
    std::string message = host.error().what();
    INFO(message);
    CHECK(message.find("gpu-node") != std::string::npos);
    CHECK(message.find("Name or service not known") != std::string::npos);
    CHECK(message.find('\n') == std::string::npos);
  }
}

TEST_CASE("ssh jump: bad setups fail in one line naming the hop") {
  auto topology = topology_or_skip(1);
  if (!topology) {
    return;
  }
  auto target = through_jumps(*topology);
  target.connect_timeout = std::chrono::seconds{5};
  SUBCASE("the bastion unreachable") {
    target.jumps.front().port = test::free_port();
    auto host = remote::connect_ssh(target);
    REQUIRE_FALSE(host);
    std::string message = host.error().what();
    INFO(message);
    CHECK(message.find("cannot reach jump host bastion") != std::string::npos);
    CHECK(message.find("onnection refused") != std::string::npos);
  }
  SUBCASE("the target refused by the bastion") {
    // Nothing listens there: the bastion's sshd cannot connect and says so.
    target.port = topology->port(Hop::target) + 1;
    auto host = remote::connect_ssh(target);
    REQUIRE_FALSE(host);
    std::string message = host.error().what();
    INFO(message);
    CHECK(message.find("through bastion") != std::string::npos);
    CHECK(message.find("cannot forward to") != std::string::npos);
  }
  SUBCASE("a passphrase-protected key and no agent: no prompt, the hop named") {
    auto key = std::filesystem::path(topology->ssh_config()).parent_path() / "locked_key";
    auto made =
        test::run_program({"ssh-keygen", "-q", "-t", "ed25519", "-N", "secret", "-f", key.string()}, key.parent_path());
    REQUIRE_MESSAGE(made.exit_code == 0, made.output);
    // Authorized on the bastion: only the passphrase stands in the way.
    std::ofstream(key.parent_path() / "authorized_keys", std::ios::app) << test::read_file(key.string() + ".pub");
    target.jumps.front().identities = {key.string()};
    test::EnvGuard no_agent("SSH_AUTH_SOCK", std::nullopt);
    auto host = remote::connect_ssh(target);
    REQUIRE_FALSE(host);
    std::string message = host.error().what();
    INFO(message);
    CHECK(message.find("cannot reach jump host bastion") != std::string::npos);
    CHECK(message.find("passphrase") != std::string::npos);
  }
}
