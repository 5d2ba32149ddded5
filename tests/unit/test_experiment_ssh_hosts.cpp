// experiment/ssh_hosts: an SSH host's connection as the experiment and the
// user's ~/.ssh/config say: jump hosts (`jump:`, ProxyJump), ProxyCommand, the
// transport, and what each transport is handed (experiment/connect).
#include <doctest/doctest.h>

#include "../support/ssh_testing.hpp"
#include "../support/temp_dir.hpp"

#include <specctl/experiment/connect.hpp>
#include <specctl/experiment/experiment.hpp>
#include <specctl/experiment/plan.hpp>

#include <filesystem>
#include <fstream>
#include <string>

using namespace specctl;
using namespace specctl::experiment;
namespace fs = std::filesystem;

namespace {

struct LoadedHosts {
  Experiment experiment;
  std::string errors;
  std::string warnings;
};

// The experiment `hosts` (a hosts: block) with `config` as the user's ~/.ssh/config.
LoadedHosts load_hosts(const std::string& hosts, const std::string& config = "") {
  test::TempDir dir("specctl-ssh-hosts");
  {
    std::ofstream(dir.path() / "ssh_config") << config;
    std::ofstream(dir.path() / "e.yaml") << "name: hosts\n"
                                         << hosts
                                         << "server:\n  template: sglang\n  model: /models/m\n  port: 30000\n"
                                            "variants:\n  - name: a\n    host: node\n"
                                            "benchmarks:\n  - {name: s, kind: single_stream, runs: 1, max_tokens: 8}\n";
  }
  test::EnvGuard config_path("SPECCTL_SSH_CONFIG", (dir.path() / "ssh_config").string());
  util::Diagnostics diag;
  LoadedHosts out;
  out.experiment = load_experiment((dir.path() / "e.yaml").string(), diag);
  for (const auto& d : diag.errors()) {
    out.errors += d.str() + "\n";
  }
  for (const auto& d : diag.warnings()) {
    out.warnings += d.str() + "\n";
  }
  return out;
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

} // namespace

TEST_CASE("ssh hosts: jump lists hosts of the experiment or targets, in order, and the route shows them") {
  auto loaded = load_hosts(R"(hosts:
  bastion: {ssh: "me@bastion.example.org:2200", identity: ~/.ssh/bastion_key, known_hosts: /kh/bastion}
  node: {ssh: "root@10.1.2.3", jump: [bastion, "ops@login2.example.org:2222"], known_hosts: /kh/node}
)");
  INFO(loaded.errors);
  REQUIRE(loaded.errors.empty());
  const auto& node = loaded.experiment.hosts.at("node");
  REQUIRE(node.jumps.size() == 2);
  CHECK(node.jumps[0].hostname == "bastion.example.org");
  CHECK(node.jumps[0].port == 2200);
  CHECK(node.jumps[0].identities == std::vector<std::string>{"~/.ssh/bastion_key"});
  CHECK(node.jumps[0].known_hosts == "/kh/bastion");
  // A hop that is not a host of the experiment checks its key where the host does.
  CHECK(node.jumps[1].user == "ops");
  CHECK(node.jumps[1].port == 2222);
  CHECK(node.jumps[1].known_hosts == "/kh/node");
  CHECK(node.route() == "laptop → bastion → ops@login2.example.org:2222 → node");
  CHECK(contains(node.describe(), "route laptop → bastion → ops@login2.example.org:2222 → node"));

  auto target = ssh_target(node);
  REQUIRE(target.jumps.size() == 2);
  CHECK(target.jumps[0].hostname == "bastion.example.org");
  CHECK(target.route() == "laptop → bastion → ops@login2.example.org:2222 → node");
  // The system ssh is handed each hop with its own settings.
  auto openssh = openssh_target(node);
  REQUIRE(openssh.jumps.size() == 2);
  CHECK(openssh.jumps[0].destination == "bastion.example.org");
  CHECK(openssh.jumps[0].user == "me");
  CHECK(openssh.jumps[0].port == 2200);
  CHECK(openssh.jumps[0].identities == std::vector<std::string>{"~/.ssh/bastion_key"});
  CHECK(openssh.jumps[0].known_hosts == "/kh/bastion");
  CHECK(openssh.jumps[1].destination == "login2.example.org");
  CHECK(openssh.jumps[1].user == "ops");
  CHECK(openssh.jumps[1].known_hosts == "/kh/node");
  CHECK(openssh.jumps[1].control_dir.empty());
  CHECK(openssh.destination == "10.1.2.3");
  CHECK(openssh.user == "root");
  CHECK_FALSE(openssh.port);

  // `specctl plan --json` carries the route.
  auto plan = plan_to_json(make_plan(loaded.experiment, server::RenderOptions{}));
  CHECK(plan["hosts"]["node"]["route"] == "laptop → bastion → ops@login2.example.org:2222 → node");
  CHECK(plan["hosts"]["node"]["transport"] == "libssh2");
}

TEST_CASE("ssh hosts: ProxyJump and ProxyCommand from the ssh config, and jump none") {
  const std::string config = R"(Host gpu-*
  User root
  ProxyJump jump1,ops@jump2:2022
  IdentityFile ~/.ssh/gpu_key
  IdentityFile ~/.ssh/other_key
  ConnectTimeout 7
  ServerAliveInterval 11
  ServerAliveCountMax 4
Host jump1
  HostName 192.0.2.10
  User hop
  ProxyCommand nc -X connect -x proxy.example:3128 %h %p
Host tunnelled
  ProxyCommand ssh -W %h:%p gateway
  HostKeyAlias tunnelled-key
)";
  SUBCASE("ProxyJump: each hop resolved through the config, the first hop's own ProxyCommand kept") {
    auto loaded = load_hosts("hosts:\n  node: {ssh: gpu-7}\n", config);
    INFO(loaded.errors);
    REQUIRE(loaded.errors.empty());
    const auto& node = loaded.experiment.hosts.at("node");
    CHECK(node.user == "root");
    CHECK(node.identities == std::vector<std::string>{"~/.ssh/gpu_key", "~/.ssh/other_key"});
    CHECK(node.connect_timeout == std::chrono::seconds{7});
    CHECK(node.keepalive == std::chrono::seconds{11});
    CHECK(node.keepalive_count == 4);
    REQUIRE(node.jumps.size() == 2);
    CHECK(node.jumps[0].hostname == "192.0.2.10");
    CHECK(node.jumps[0].user == "hop");
    CHECK(node.jumps[0].proxy_command == "nc -X connect -x proxy.example:3128 192.0.2.10 22");
    CHECK(node.jumps[1].hostname == "jump2");
    CHECK(node.jumps[1].port == 2022);
    CHECK(node.route() == "laptop → (ProxyCommand) → jump1 → ops@jump2:2022 → node");
    auto target = ssh_target(node);
    CHECK(target.keepalive_count == 4);
    CHECK(target.connect_timeout == std::chrono::seconds{7});
    // The system ssh follows the config's ProxyJump itself.
    CHECK(openssh_target(node).jumps.empty());
  }
  SUBCASE("ProxyCommand with its tokens expanded, and HostKeyAlias") {
    auto loaded = load_hosts("hosts:\n  node: {ssh: \"me@tunnelled:2200\"}\n", config);
    INFO(loaded.errors);
    REQUIRE(loaded.errors.empty());
    const auto& node = loaded.experiment.hosts.at("node");
    CHECK(node.proxy_command == "ssh -W tunnelled:2200 gateway");
    CHECK(node.host_key_alias == "tunnelled-key");
    CHECK(node.route() == "laptop → (ProxyCommand) → node");
  }
  SUBCASE("the experiment's jump replaces the config's, and none removes it") {
    auto loaded =
        load_hosts("hosts:\n  node: {ssh: gpu-7, jump: none}\n  other: {ssh: tunnelled, jump: [jump1]}\n", config);
    INFO(loaded.errors);
    REQUIRE(loaded.errors.empty());
    CHECK(loaded.experiment.hosts.at("node").jumps.empty());
    CHECK_FALSE(loaded.experiment.hosts.at("node").proxy_command);
    const auto& other = loaded.experiment.hosts.at("other");
    CHECK_FALSE(other.proxy_command);
    REQUIRE(other.jumps.size() == 1);
    CHECK(other.jumps[0].hostname == "192.0.2.10");
  }
}

TEST_CASE("ssh hosts: transport openssh, and keywords only OpenSSH implements are named") {
  const std::string config = "Host kerberized\n  GSSAPIAuthentication yes\n  User me\n";
  SUBCASE("libssh2 warns, naming the keyword and the way out") {
    auto loaded = load_hosts("hosts:\n  node: {ssh: kerberized}\n", config);
    INFO(loaded.errors);
    REQUIRE(loaded.errors.empty());
    CHECK(contains(loaded.warnings, "GSSAPIAuthentication yes"));
    CHECK(contains(loaded.warnings, "transport: openssh"));
    CHECK(loaded.experiment.hosts.at("node").transport == SshTransport::libssh2);
  }
  SUBCASE("openssh takes it without a word, and ssh gets the alias so the whole config applies") {
    auto loaded = load_hosts("hosts:\n  node: {ssh: kerberized, transport: openssh}\n", config);
    INFO(loaded.errors);
    REQUIRE(loaded.errors.empty());
    CHECK(loaded.warnings.empty());
    const auto& node = loaded.experiment.hosts.at("node");
    CHECK(node.transport == SshTransport::openssh);
    CHECK(contains(node.describe(), "through the system ssh"));
    auto openssh = openssh_target(node);
    CHECK(openssh.destination == "kerberized");
    CHECK_FALSE(openssh.user);
  }
}

TEST_CASE("ssh hosts: mistakes in jump and transport name the key") {
  auto errors = [](const std::string& hosts, const std::string& config = "") {
    return load_hosts(hosts, config).errors;
  };
  CHECK(contains(errors("hosts:\n  node: {ssh: a@b, jump: [node]}\n"),
                 "hosts.node.jump: \"node\" cannot jump through itself"));
  CHECK(contains(errors("hosts:\n  here: {local: true}\n  node: {ssh: a@b, jump: [here]}\n"),
                 "\"here\" is not an SSH host"));
  CHECK(contains(errors("hosts:\n  x: {ssh: a@x, jump: [node]}\n  node: {ssh: a@b, jump: [x]}\n"),
                 "a loop of jump hosts"));
  CHECK(contains(errors("hosts:\n  node: {ssh: a@b, jump: [\"bad host!\"]}\n"), "is not an SSH target"));
  CHECK(contains(errors("hosts:\n  node: {ssh: a@b, transport: putty}\n"), "hosts.node.transport"));
  CHECK(contains(errors("hosts:\n  node: {local: true, jump: [x]}\n"), "only SSH hosts take this key"));
  CHECK(contains(
      errors("hosts:\n  node: {ssh: loop1}\n", "Host loop1\n  ProxyJump loop2\nHost loop2\n  ProxyJump loop1\n"),
      "a ProxyJump loop"));
  // A broken config names its file and line.
  CHECK(contains(errors("hosts:\n  node: {ssh: gpu}\n", "Host gpu\n  Port nine\n"), "ssh_config:2"));
}
