// experiment/hosts: the hosts block of an experiment file, and the one place that
// says which nodes a variant may use and what a GPU slot changes of its server
// (hosts_for, slot_of, machine_of, Slot::server_in_slot), which the plan and the run
// both call.
#include <doctest/doctest.h>

#include <specctl/experiment/experiment.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <unistd.h>

using namespace specctl::experiment;
using specctl::util::Diagnostics;
namespace fs = std::filesystem;

namespace {

// An experiment file in a folder of its own, loaded with no ~/.ssh/config in the way.
struct Loaded {
  Experiment experiment;
  Diagnostics diag;
  std::string errors;
};

Loaded load_text(const std::string& yaml) {
  static int counter = 0;
  const fs::path dir =
      fs::temp_directory_path() / ("specctl-hosts-" + std::to_string(getpid()) + "-" + std::to_string(++counter));
  fs::create_directories(dir);
  { std::ofstream(dir / "e.yaml") << yaml; }
  setenv("SPECCTL_SSH_CONFIG", "/nonexistent", 1);
  setenv("XDG_CONFIG_HOME", "/nonexistent", 1);
  Loaded out;
  out.experiment = load_experiment((dir / "e.yaml").string(), out.diag);
  for (const auto& d : out.diag.errors()) {
    out.errors += d.str() + "\n";
  }
  fs::remove_all(dir);
  return out;
}

std::string with_hosts(const std::string& hosts, const std::string& variants) {
  return "name: hosts\n" + hosts +
         "server:\n"
         "  template: sglang\n"
         "  model: /models/m\n"
         "  port: 30000\n"
         "variants:\n" +
         variants + "benchmarks:\n  - {name: s, kind: single_stream, runs: 1, max_tokens: 8}\n";
}

const Variant& variant(const Experiment& e, std::string_view name) {
  const Variant* v = e.find_variant(std::string(name));
  REQUIRE(v != nullptr);
  return *v;
}

} // namespace

TEST_CASE("hosts: no hosts block means this machine, and every variant runs there") {
  auto l = load_text(with_hosts("", "  - name: a\n"));
  INFO(l.errors);
  REQUIRE_FALSE(l.diag.has_errors());
  REQUIRE(l.experiment.hosts.size() == 1);
  CHECK(l.experiment.hosts.at("local").kind == HostKind::local);
  CHECK(hosts_for(l.experiment, variant(l.experiment, "a")) == std::vector<std::string>{"local"});
  CHECK_FALSE(slot_of(l.experiment, "local"));
  CHECK(machine_of(l.experiment, "local") == &l.experiment.hosts.at("local"));
  CHECK(machine_of(l.experiment, "elsewhere") == nullptr);
}

TEST_CASE("hosts: SSH targets, with user, port and IPv6 brackets") {
  auto l = load_text(with_hosts("hosts:\n"
                                "  a: {ssh: \"alice@gpu-1:2222\"}\n"
                                "  b: {ssh: \"[::1]:2200\", host_key: accept-new, identity: ~/.ssh/k}\n"
                                "  c: {ssh: gpu-3}\n",
                                "  - {name: v, host: a}\n"));
  INFO(l.errors);
  REQUIRE_FALSE(l.diag.has_errors());
  const auto& a = l.experiment.hosts.at("a");
  CHECK(a.kind == HostKind::ssh);
  CHECK(a.user == "alice");
  CHECK(a.hostname == "gpu-1");
  CHECK(a.port == 2222);
  CHECK(a.host_key == HostKeyPolicy::strict);
  const auto& b = l.experiment.hosts.at("b");
  CHECK(b.hostname == "::1");
  CHECK(b.port == 2200);
  CHECK(b.host_key == HostKeyPolicy::accept_new);
  CHECK(b.identities == std::vector<std::string>{"~/.ssh/k"});
  CHECK(l.experiment.hosts.at("c").port == 22);
  CHECK(hosts_for(l.experiment, variant(l.experiment, "v")) == std::vector<std::string>{"a"});
}

TEST_CASE("hosts: a pool stands for its members, a slotted member for its slots") {
  auto l = load_text(with_hosts("hosts:\n"
                                "  n1: {ssh: \"root@n1\", slots: [[0, 1], [2, 3]]}\n"
                                "  n2: {ssh: \"root@n2\"}\n"
                                "  gpus: {pool: [n1, n2]}\n",
                                "  - {name: pooled, host: gpus}\n"
                                "  - {name: pinned, host: n2}\n"));
  INFO(l.errors);
  REQUIRE_FALSE(l.diag.has_errors());
  const auto& e = l.experiment;
  CHECK(hosts_for(e, variant(e, "pooled")) == std::vector<std::string>{"n1#0", "n1#1", "n2"});
  CHECK(hosts_for(e, variant(e, "pinned")) == std::vector<std::string>{"n2"});
  CHECK(slot_name("n1", 1) == "n1#1");

  auto slot = slot_of(e, "n1#1");
  REQUIRE(slot);
  CHECK(slot->host == "n1");
  CHECK(slot->index == 1);
  CHECK(slot->count == 2);
  CHECK(slot->gpus == std::vector<int>{2, 3});
  CHECK(machine_of(e, "n1#1") == &e.hosts.at("n1"));
  // Not slots: a plain host, a slot past the end, a host with no slots, garbage after '#'.
  CHECK_FALSE(slot_of(e, "n2"));
  CHECK_FALSE(slot_of(e, "n1#2"));
  CHECK_FALSE(slot_of(e, "n2#0"));
  CHECK_FALSE(slot_of(e, "n1#x"));
  CHECK(machine_of(e, "n1#2") == nullptr);

  // The slot's server: its GPUs, and the variant's port moved by the slot's index.
  const auto& server = variant(e, "pooled").server;
  auto in_slot = slot->server_in_slot(server);
  CHECK(in_slot.port == server.port + 1);
  CHECK(in_slot.gpus == std::optional<std::vector<int>>(std::vector<int>{2, 3}));
  CHECK(slot_of(e, "n1#0")->server_in_slot(server).port == server.port);
  CHECK(in_slot.model == server.model);
}

TEST_CASE("hosts: mistakes name the key and say what is wrong") {
  struct Case {
    const char* hosts;
    const char* message;
  };
  const Case cases[] = {
      {"hosts:\n  a: {ssh: \"not a target!\"}\n", "is not an SSH target"},
      {"hosts:\n  a: {ssh: \"root@x:70000\"}\n", "is not an SSH target"},
      {"hosts:\n  a: {local: true, ssh: root@x}\n", "a host is either {local: true} or {ssh: user@host[:port]}"},
      {"hosts:\n  a: {local: true, identity: ~/.ssh/k}\n", "only SSH hosts take this key"},
      {"hosts:\n  a: {local: true, slots: [[0, 1], [1, 2]]}\n", "GPU 1 is in two slots"},
      {"hosts:\n  a: {local: true, slots: [[0, 1]]}\n", "one slot is the whole host"},
      {"hosts:\n  a: {local: true, slots: [[0], []]}\n", "an empty slot"},
      {"hosts:\n  a: {local: true}\n  p: {pool: [a, b]}\n", "unknown host \"b\""},
      {"hosts:\n  a: {local: true}\n  p: {pool: [a, a]}\n", "\"a\" is listed twice"},
      {"hosts:\n  a: {local: true}\n  p: {pool: [a]}\n  q: {pool: [p]}\n", "\"p\" is a pool; a pool holds hosts"},
      {"hosts:\n  a: {local: true}\n  p: {pool: []}\n", "an empty pool"},
      {"hosts:\n  p: {pool: [a], ssh: root@x}\n  a: {local: true}\n", "a pool takes only"},
      {"hosts: {}\n", "no hosts"},
  };
  for (const auto& c : cases) {
    CAPTURE(c.hosts);
    auto l = load_text(with_hosts(c.hosts, "  - {name: v}\n"));
    CHECK(l.diag.has_errors());
    CHECK(l.errors.find(c.message) != std::string::npos);
    // Every error names the file and a line.
    CHECK(l.errors.find("e.yaml:") != std::string::npos);
  }
}
