// The OpenSSH transport through jump hosts (tests/support/jump_topology.hpp):
// the target cannot be reached but through the bastion and login2, and every
// hop's settings come from its own target, none from an ssh config.

#include <doctest/doctest.h>

#include "../support/files.hpp"
#include "../support/jump_topology.hpp"
#include "../support/net.hpp"
#include "../support/skip.hpp"
#include "../support/ssh_testing.hpp"
#include "../support/temp_dir.hpp"

#include <specctl/remote/openssh_host.hpp>
#include <specctl/util/unique_fd.hpp>

#include <fmt/format.h>

#include <filesystem>
#include <string>

#include <sys/socket.h>
#include <sys/stat.h>

using namespace specctl;
using test::Hop;
using test::JumpTopology;
namespace fs = std::filesystem;

namespace {

// What a TCP server on 127.0.0.1:`port` says first (8 bytes at most).
std::string greeting(int port) {
  util::UniqueFd fd(test::connect_local(port));
  if (!fd) {
    return "cannot connect";
  }
  test::set_socket_timeouts(fd.get());
  char buffer[8];
  ssize_t n = specctl::test::recv_retrying(fd.get(), buffer, sizeof buffer, MSG_WAITALL);
  return n > 0 ? std::string(buffer, static_cast<std::size_t>(n)) : std::string();
}

// `hop` as the hop before it sees it, with its own key and a known_hosts file
// that trusts it alone. Paths with a space and a '%' go through every level of
// ProxyCommand (shell quoting, token escaping) intact.
remote::OpenSshTarget hop(const JumpTopology& topology, Hop which, const fs::path& dir) {
  const auto own = dir / ("hop %h " + std::string(test::hop_name(which)));
  fs::create_directories(own);
  fs::copy_file(topology.user_key(), own / "key", fs::copy_options::overwrite_existing);
  ::chmod((own / "key").c_str(), 0600);
  test::write_file(own / "known_hosts", topology.known_hosts_line(which));
  remote::OpenSshTarget t;
  t.name = std::string(test::hop_name(which));
  t.destination = topology.address(which);
  t.user = topology.user();
  t.port = topology.port(which);
  t.identities = {(own / "key").string()};
  t.known_hosts = (own / "known_hosts").string();
  t.strict_host_key_checking = "yes";
  t.connect_timeout = std::chrono::seconds{10};
  return t;
}

} // namespace

TEST_CASE("openssh jump: two hops, each with only its own key and known_hosts, commands and a tunnel through them") {
  if (auto why = JumpTopology::unavailable()) {
    test::skip(*why);
    return;
  }
  auto topology = JumpTopology::start({.hops = 2});
  REQUIRE_MESSAGE(topology, (topology ? "" : topology.error()));
  test::TempDir dir("specctl-openssh-jump");
  // No ssh config but this one: nothing in it names a host, a key or a known_hosts file.
  test::write_file(dir.path() / "ssh_config",
                   "IdentitiesOnly yes\nIdentityAgent none\nGlobalKnownHostsFile /dev/null\nUpdateHostKeys no\n");
  auto target = hop(**topology, Hop::target, dir.path());
  target.name = "gpu-node";
  target.config_file = (dir.path() / "ssh_config").string();
  target.jumps = {hop(**topology, Hop::bastion, dir.path()), hop(**topology, Hop::login2, dir.path())};

  {
    target.control_dir = (dir.path() / "cm1").string();
    auto host = remote::connect_openssh(target);
    if (!host) {
      MESSAGE((*topology)->logs());
      FAIL("connect_openssh failed: " << std::string(host.error().what()));
    }
    auto where = (*host)->exec("echo $SPECCTL_TEST_HOP", std::chrono::seconds{20});
    REQUIRE_MESSAGE(where, (where ? "" : where.error().what()));
    CHECK(where->out == "target\n");
    // The tunnel rides the chain: the node's own sshd answers.
    auto port = (*host)->open_tunnel((*topology)->address(Hop::target), (*topology)->port(Hop::target));
    REQUIRE(port);
    CHECK(greeting(*port) == "SSH-2.0-");
  }

  // login2 gets a new key: the chain is refused, naming login2 (its ssh's stderr would
  // be /dev/null under a ControlPersist master; specctl keeps it).
  auto changed = (*topology)->change_host_key(Hop::login2);
  REQUIRE_MESSAGE(changed, (changed ? "" : changed.error()));
  target.control_dir = (dir.path() / "cm2").string();
  auto refused = remote::connect_openssh(target);
  REQUIRE_FALSE(refused);
  std::string message = refused.error().what();
  INFO(message);
  CHECK(message.starts_with("gpu-node (openssh: "));
  CHECK(message.find("cannot reach jump host login2 (openssh: ") != std::string::npos);
  CHECK(message.find(fmt::format("[{}]:{}", (*topology)->address(Hop::login2), (*topology)->port(Hop::login2))) !=
        std::string::npos);
  CHECK(message.find((*topology)->host_key_fingerprint(Hop::login2)) != std::string::npos);
  CHECK(message.find('\n') == std::string::npos);
  // The hops' error files go with the control folder.
  CHECK_FALSE(fs::exists(target.control_dir));
}
