// `specctl run` on a node that only a bastion can reach (tests/support/jump_topology.hpp:
// real sshds, the node in a network namespace of its own): through `jump:`, through
// ProxyJump and ProxyCommand in the user's ssh config, over the system ssh, over two
// hops, and with the bastion dropped mid-benchmark.

#include "../support/jump_topology.hpp"
#include "sweep.hpp"

#include <specctl/util/shell.hpp>

using namespace run_test;
using specctl::test::Hop;
using specctl::test::JumpTopology;

namespace {

std::unique_ptr<JumpTopology> topology_or_skip(int hops) {
  if (auto why = JumpTopology::unavailable()) {
    st::skip(*why);
    return nullptr;
  }
  auto topology = JumpTopology::start({.hops = hops});
  if (!topology) {
    FAIL("cannot build the jump topology: " << topology.error());
  }
  return std::move(*topology);
}

// "{ssh: ..., identity: ..., known_hosts: ...": a hop as the hop before it sees it, braces left open.
std::string host_entry(const JumpTopology& topology, Hop hop) {
  return fmt::format(R"({{ssh: "{}@{}:{}", identity: "{}", known_hosts: "{}")", topology.user(), topology.address(hop),
                     topology.port(hop), topology.user_key().string(), topology.known_hosts().string());
}

// An ssh config that names every hop (bastion, login2, gpu-node), for ProxyJump and ProxyCommand.
std::string ssh_config(const JumpTopology& topology, const std::string& gpu_node_extra) {
  auto block = [&](const std::string& alias, Hop hop, const std::string& extra) {
    return fmt::format("Host {}\n  HostName {}\n  Port {}\n  User {}\n  IdentityFile {}\n  UserKnownHostsFile {}\n"
                       "  StrictHostKeyChecking yes\n  BatchMode yes\n{}",
                       alias, topology.address(hop), topology.port(hop), topology.user(), topology.user_key().string(),
                       topology.known_hosts().string(), extra);
  };
  std::string out = block("bastion", Hop::bastion, "");
  if (topology.hops() == 2) {
    out += block("login2", Hop::login2, "  ProxyJump bastion\n");
  }
  return out + block("gpu-node", Hop::target, gpu_node_extra);
}

// Runs a two-variant sweep on host "node" and checks every result came back.
void sweep_through(const std::string& hosts, const std::string& route) {
  Sweep sweep(hosts, "node");
  sweep.write("  - name: baseline\n  - name: eagle3\n    knobs: {speculative: eagle3, draft_model: /models/d, "
              "spec_steps: 2, spec_topk: 1, spec_draft_tokens: 3}",
              k_quick_benchmarks, "1s", 10);
  int code = sweep.run({"--out", sweep.out().string()});
  INFO(sweep.output());
  CHECK(code == 0);
  check_complete_variant(sweep.out(), "baseline");
  check_complete_variant(sweep.out(), "eagle3");
  auto provenance = read_json(sweep.out() / "provenance.json");
  CHECK(provenance["hosts"]["node"]["description"].get<std::string>().find(route) != std::string::npos);
  CHECK(stray_servers(sweep.state()) == "");
}

} // namespace

TEST_CASE("a sweep through a bastion: by jump, by ProxyJump, by ProxyCommand and over the system ssh") {
  auto topology = topology_or_skip(1);
  if (!topology) {
    return;
  }
  st::TempDir dir("specctl-jump-run");
  SUBCASE("directly, the node cannot be reached, and the sweep says so") {
    std::string hosts = "hosts:\n  node: " + host_entry(*topology, Hop::target) + "}\n";
    Sweep sweep(hosts, "node");
    sweep.write("  - name: only", "  - {name: single, kind: single_stream, runs: 1, max_tokens: 8}", "1s", 10);
    CHECK(sweep.run({"--out", sweep.out().string(), "--retries", "0"}) != 0);
    INFO(sweep.output());
    CHECK(sweep.output().find(fmt::format("node ({}@{}:{})", topology->user(), topology->address(Hop::target),
                                          topology->port(Hop::target))) != std::string::npos);
    // This sandbox's gateway answers any address, so the connection times out rather than being refused.
    CHECK(read_json(sweep.out() / "variants/only/result.json").value("status", "") != "ok");
  }
  SUBCASE("jump: a host of the experiment") {
    sweep_through(fmt::format("hosts:\n  bastion: {}}}\n  node: {}, jump: [bastion]{}}}\n",
                              host_entry(*topology, Hop::bastion), host_entry(*topology, Hop::target),
                              st::ssh_transport_yaml()),
                  "via bastion)");
  }
  SUBCASE("ProxyJump in the user's ssh config") {
    auto config = dir.write("config", ssh_config(*topology, "  ProxyJump bastion\n"));
    st::EnvGuard env("SPECCTL_SSH_CONFIG", config);
    sweep_through("hosts:\n  node: {ssh: gpu-node}\n", "via bastion)");
  }
  SUBCASE("ProxyCommand in the user's ssh config") {
    auto config_path = (dir.path() / "config").string();
    dir.write("config", ssh_config(*topology, fmt::format("  ProxyCommand ssh -F {} -W %h:%p bastion\n",
                                                          specctl::util::shell_quote(config_path))));
    st::EnvGuard env("SPECCTL_SSH_CONFIG", config_path);
    sweep_through("hosts:\n  node: {ssh: gpu-node}\n", "via ProxyCommand)");
  }
  SUBCASE("transport: openssh, with ProxyJump in the config the system ssh reads") {
    auto config = dir.write("config", ssh_config(*topology, "  ProxyJump bastion\n"));
    st::EnvGuard env("SPECCTL_SSH_CONFIG", config);
    sweep_through("hosts:\n  node: {ssh: gpu-node, transport: openssh}\n", "(openssh: gpu-node)");
  }
}

TEST_CASE("a sweep through two hops, by jump and by ProxyJump") {
  auto topology = topology_or_skip(2);
  if (!topology) {
    return;
  }
  st::TempDir dir("specctl-jump-run");
  SUBCASE("jump: [bastion, login2]") {
    sweep_through(fmt::format("hosts:\n  bastion: {}}}\n  login2: {}}}\n  node: {}, jump: [bastion, login2]{}}}\n",
                              host_entry(*topology, Hop::bastion), host_entry(*topology, Hop::login2),
                              host_entry(*topology, Hop::target), st::ssh_transport_yaml()),
                  "via bastion, login2)");
  }
  SUBCASE("ProxyJump bastion,login2") {
    auto config = dir.write("config", ssh_config(*topology, "  ProxyJump bastion,login2\n"));
    st::EnvGuard env("SPECCTL_SSH_CONFIG", config);
    sweep_through("hosts:\n  node: {ssh: gpu-node}\n", "via bastion, login2)");
  }
}

TEST_CASE("the bastion dropped mid-benchmark: the chain is rebuilt and the sweep completes with nothing lost") {
  auto topology = topology_or_skip(1);
  if (!topology) {
    return;
  }
  Sweep sweep(fmt::format("hosts:\n  bastion: {}}}\n  node: {}, jump: [bastion]{}}}\n",
                          host_entry(*topology, Hop::bastion), host_entry(*topology, Hop::target),
                          st::ssh_transport_yaml()),
              "node");
  // 512 tokens at about 460 tok/s: each request takes a second, so the drop lands mid-level.
  sweep.write("  - name: only", std::string(k_quick_benchmarks) + R"(
  - {name: long, kind: concurrency, repeats: 1, levels: [2], requests: 6, max_tokens: 512})",
              "1s", 5);
  auto specctl = sweep.start({"--out", sweep.out().string()});
  REQUIRE(
      st::wait_until([&] { return journal_has(sweep.out(), "phase_started", "only", "bench long"); }, k_sweep_timeout));
  std::size_t before = topology->bastion_connections();
  CHECK(topology->kill_bastion_sessions() >= 1);
  auto code = specctl->wait_exit_code(k_sweep_timeout);
  INFO(sweep.output());
  INFO(topology->logs());
  CHECK(code == 0);
  // A new connection through the bastion carried the rest.
  CHECK(topology->bastion_connections() > before);
  check_complete_variant(sweep.out(), "only");
  auto result = read_json(sweep.out() / "variants/only/result.json");
  auto levels = result["benchmarks"]["long"]["levels"];
  REQUIRE(levels.size() == 1);
  CHECK(levels[0]["metrics"]["output_tok_s"].get<double>() > 0);
  auto requests = st::read_file(sweep.out() / "variants/only/requests-long.jsonl");
  CHECK(std::count(requests.begin(), requests.end(), '\n') >= 6);
  CHECK(stray_servers(sweep.state()) == "");
}
