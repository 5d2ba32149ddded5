// Host pools end to end: `specctl run` spreads a sweep of specsim servers over
// two test sshd nodes (127.0.0.2 and 127.0.0.3, both this machine), one variant
// per node at a time; a member that cannot be reached is taken out of the pool;
// Ctrl-C stops the servers on every node.

#include "../support/gpu_watcher.hpp"
#include "../support/pool_nodes.hpp"
#include "../support/result_folder.hpp"
#include "../support/specsim.hpp"
#include "../support/ssh_transport.hpp"

#include <doctest/doctest.h>

#include <csignal>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <fstream>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

namespace st = specctl::test;
using nlohmann::json;
using specctl::test::FakeGpuNode;

namespace {

// Generous for a loaded two-core machine: the quick sweep takes about 20 s there.
constexpr std::chrono::seconds k_sweep_timeout{180};
constexpr std::chrono::seconds k_phase_timeout{90};
constexpr std::chrono::seconds k_signal_exit_timeout{60};

constexpr const char* k_four_variants = "a,b,c,d";

constexpr const char* k_quick_benchmarks = R"(  - {name: single, kind: single_stream, runs: 2, max_tokens: 32}
  - {name: parallel, kind: concurrency, repeats: 1, levels: [1, 4], max_tokens: 32})";

using specctl::test::GpuWatcher;
using specctl::test::journal;
using specctl::test::read_json;

std::vector<std::string> split(const std::string& text) {
  std::vector<std::string> parts;
  std::istringstream in(text);
  for (std::string part; std::getline(in, part, ',');) {
    parts.push_back(part);
  }
  return parts;
}

// One pool sweep's world: the nodes, an experiment over them, its result folder
// and the specctl processes the test starts. Destroyed, the nodes kill what a
// failed test left.
class PoolSweep {
public:
  // Starts a node per address; false (with the reason in `why`) when sshd cannot run.
  bool start_nodes(const std::vector<std::string>& addresses, std::string& why) {
    char name = 'a';
    for (const auto& address : addresses) {
      auto node = FakeGpuNode::start(fmt::format("node-{}", name++), address, m_dir.path(), SPECSIM_FAKE_GPU_BIN);
      if (!node) {
        why = node.error();
        return false;
      }
      m_nodes.push_back(std::move(*node));
    }
    return true;
  }

  const std::vector<std::unique_ptr<FakeGpuNode>>& nodes() const { return m_nodes; }
  // Node name -> its fake GPUs, for a GpuWatcher.
  std::map<std::string, std::filesystem::path> gpu_dirs() const {
    std::map<std::string, std::filesystem::path> dirs;
    for (const auto& node : m_nodes) {
      dirs[node->name()] = node->gpu_dir();
    }
    return dirs;
  }
  std::filesystem::path file() const { return m_dir.path() / "sweep.yaml"; }
  std::filesystem::path out() const { return m_dir.path() / "out"; }
  std::filesystem::path log() const { return m_dir.path() / fmt::format("specctl-{}.log", m_runs); }
  std::string output() const { return st::read_file(log()); }
  // The run's --state-dir: every host names its own, so nothing should land here.
  std::filesystem::path run_state_dir() const { return m_dir.path() / "unused-state"; }

  // Variants `names` (comma-separated), each on a port of its own, on the pool
  // "gpus" of every node plus `extra_members` (more hosts lines, already named in
  // `extra_hosts`). `load` is specsim's simulated load time, divided by `speed`.
  void write(const std::string& names, const std::string& benchmarks, const std::string& load, int speed,
             const std::string& extra_hosts = "", const std::vector<std::string>& extra_members = {}) {
    std::string hosts;
    std::vector<std::string> members;
    for (const auto& node : m_nodes) {
      hosts += node->host_entry();
      members.push_back(node->name());
    }
    hosts += extra_hosts;
    members.insert(members.end(), extra_members.begin(), extra_members.end());
    auto list = split(names);
    auto ports = st::distinct_free_ports(list.size());
    std::string variants;
    for (std::size_t i = 0; i < list.size(); ++i) {
      variants += fmt::format("  - {{name: {}, port: {}}}\n", list[i], ports[i]);
    }
    std::ofstream(file()) << fmt::format(R"(name: pool
hosts:
{hosts}  gpus: {{pool: [{members}]}}
server:
  template: specsim
  host: gpus
  model: /models/Kimi-K2.5-INT4
  knobs: {{tp: 2, sim_load_time: {load}, sim_speed: {speed}}}
  health: {{timeout: 2m, interval: 200ms, stall: 1m}}
  cleanup: {{policy: kill, grace: 3s, timeout: 30s}}
variants:
{variants}benchmarks:
{benchmarks}
)",
                                         fmt::arg("hosts", hosts), fmt::arg("members", fmt::join(members, ", ")),
                                         fmt::arg("load", load), fmt::arg("speed", speed),
                                         fmt::arg("variants", variants), fmt::arg("benchmarks", benchmarks));
  }

  std::unique_ptr<st::Process> start(std::vector<std::string> args) {
    std::vector<std::string> argv = {SPECCTL_BINARY, "run",         file().string(),         "--out",
                                     out().string(), "--state-dir", run_state_dir().string()};
    argv.insert(argv.end(), args.begin(), args.end());
    ++m_runs;
    return std::make_unique<st::Process>(argv, log(),
                                         std::map<std::string, std::string>{{"HOME", m_dir.home().string()}});
  }

  int run(std::vector<std::string> args = {}) {
    auto process = start(std::move(args));
    return process->wait_exit_code(k_sweep_timeout).value_or(-1);
  }

  // Everything still running of what the sweep started, on any node; empty when clean.
  std::string leftovers() const {
    std::string out;
    for (const auto& node : m_nodes) {
      if (auto left = node->leftovers(); !left.empty()) {
        out += node->name() + ": " + left;
      }
    }
    return out;
  }

private:
  st::TempDir m_dir;
  std::vector<std::unique_ptr<FakeGpuNode>> m_nodes;
  int m_runs = 0;
};

// Starts the nodes; false when this machine has no sshd, after saying so (ctest
// reports the case skipped). Only a missing sshd skips: one that is installed and
// cannot start on its address fails.
bool start_nodes_or_skip(PoolSweep& sweep, const std::vector<std::string>& addresses) {
  if (auto why = specctl::test::TestSshd::unavailable()) {
    specctl::test::skip(*why);
    return false;
  }
  std::string why;
  if (!sweep.start_nodes(addresses, why)) {
    FAIL("cannot start a test sshd node: " << why);
  }
  return true;
}

// Tag -> host, from the journal's `launched` entries.
std::map<std::string, std::string> launched_on(const std::filesystem::path& out) {
  std::map<std::string, std::string> hosts;
  for (const auto& e : st::journal_events(out, "launched")) {
    hosts[e.value("tag", "")] = e.value("host", "");
  }
  return hosts;
}

// Journal line numbers of a variant's last load start and last teardown end: its
// server's life. Line order is the order things happened (appends under a lock).
struct Span {
  std::size_t from = 0;
  std::size_t to = 0;
};

std::map<std::string, Span> server_spans(const std::filesystem::path& out) {
  std::map<std::string, Span> spans;
  auto entries = journal(out);
  for (std::size_t i = 0; i < entries.size(); ++i) {
    const auto& e = entries[i];
    std::string variant = e.value("variant", "");
    if (e.value("event", "") == "phase_started" && e.value("phase", "") == "load") {
      spans[variant].from = i;
    } else if (e.value("event", "") == "phase_finished" && e.value("phase", "") == "teardown") {
      spans[variant].to = i;
    }
  }
  return spans;
}

void check_ok_variant(const std::filesystem::path& out, const std::string& name) {
  INFO("variant " << name);
  auto result = read_json(out / "variants" / name / "result.json");
  CHECK(result.value("status", "") == "ok");
  CHECK(result["benchmarks"]["single"]["status"] == "ok");
  CHECK(result["benchmarks"]["single"]["metrics"]["output_tok_s"].get<double>() > 0);
  CHECK(result["benchmarks"]["parallel"]["levels"].size() == 2);
  CHECK(std::filesystem::file_size(out / "variants" / name / "server.log") > 0);
}

// The report's table row of a variant: "| name  | ok ...".
bool report_lists(const std::string& report, const std::string& name, const std::string& status) {
  std::istringstream lines(report);
  for (std::string line; std::getline(lines, line);) {
    if (line.starts_with("| " + name + " ") && line.find("| " + status) != std::string::npos) {
      return true;
    }
  }
  return false;
}

} // namespace

TEST_CASE("a sweep over a pool of two nodes runs a variant on each at once, each node on its own GPUs") {
  PoolSweep sweep;
  if (!start_nodes_or_skip(sweep, {"127.0.0.2", "127.0.0.3"})) {
    return;
  }
  sweep.write(k_four_variants, k_quick_benchmarks, "2s", 10);
  GpuWatcher watcher(sweep.gpu_dirs());
  int code = sweep.run();
  watcher.stop();
  auto out = sweep.out();
  INFO(sweep.output());
  CHECK(code == 0);

  std::map<std::string, std::string> host_of;
  for (const auto& name : split(k_four_variants)) {
    check_ok_variant(out, name);
    host_of[name] = read_json(out / "variants" / name / "result.json").value("host", "");
  }
  std::set<std::string> used;
  for (const auto& [name, host] : host_of) {
    used.insert(host);
  }
  CHECK(used == std::set<std::string>{"node-a", "node-b"});
  // The second pass ("pool openssh: ...") went through the system ssh.
  auto hosts = read_json(out / "provenance.json")["hosts"];
  for (const auto& node : {"node-a", "node-b"}) {
    INFO(node);
    CHECK((hosts[node]["description"].get<std::string>().find("(openssh: ") != std::string::npos) ==
          !specctl::test::ssh_transport_yaml().empty());
  }

  // Two servers were up at the same time: some pair's lives overlap.
  auto spans = server_spans(out);
  REQUIRE(spans.size() == 4);
  bool overlap = false;
  for (const auto& [first, a] : spans) {
    for (const auto& [second, b] : spans) {
      overlap = overlap || (first < second && a.from < b.to && b.from < a.to && host_of[first] != host_of[second]);
    }
  }
  CHECK_MESSAGE(overlap, "no two variants ran at the same time on different nodes");

  // Each node's GPUs only ever held its own servers, and its state folder lists only those.
  auto launched = launched_on(out);
  CHECK(launched.size() == 4);
  for (const auto& node : sweep.nodes()) {
    INFO("node " << node->name());
    auto seen =
        watcher.tags_seen().contains(node->name()) ? watcher.tags_seen().at(node->name()) : std::set<std::string>{};
    CHECK_FALSE(seen.empty());
    for (const auto& tag : seen) {
      CHECK_MESSAGE(launched[tag] == node->name(), tag << " was launched on " << launched[tag]);
    }
    for (const auto& tag : node->tags()) {
      CHECK_MESSAGE(launched[tag] == node->name(), tag << " was launched on " << launched[tag]);
    }
  }
  CHECK_FALSE(std::filesystem::exists(sweep.run_state_dir()));
  // No cleanup stopped or even saw a server of the other node.
  for (const auto& [name, host] : host_of) {
    auto cleanup = read_json(out / "variants" / name / "result.json")["cleanup"].dump();
    for (const auto& [tag, on] : launched) {
      CHECK_MESSAGE((on == host || cleanup.find(tag) == std::string::npos),
                    "the cleanup of " << name << " on " << host << " mentions " << tag << " of " << on << ": "
                                      << cleanup);
    }
  }

  CHECK(sweep.leftovers() == "");
  auto report = st::read_file(out / "report.md");
  for (const auto& name : split(k_four_variants)) {
    CHECK_MESSAGE(report_lists(report, name, "ok"), name << " in\n" << report);
  }
}

TEST_CASE("an unreachable pool member is taken out and its variants finish on the others") {
  PoolSweep sweep;
  if (!start_nodes_or_skip(sweep, {"127.0.0.2", "127.0.0.3"})) {
    return;
  }
  // A third "machine" where nothing listens: every connection is refused.
  int closed = st::free_port("127.0.0.4");
  const auto& key_of = sweep.nodes().front()->sshd();
  sweep.write(k_four_variants, k_quick_benchmarks, "2s", 10,
              fmt::format("  node-c: {{ssh: \"{}@127.0.0.4:{}\", identity: \"{}\", known_hosts: \"{}\"}}\n",
                          key_of.user(), closed, key_of.user_key().string(), key_of.known_hosts().string()),
              {"node-c"});
  int code = sweep.run();
  auto out = sweep.out();
  INFO(sweep.output());
  CHECK(code == 0);

  auto removed = st::journal_events(out, "host_removed");
  REQUIRE(removed.size() == 1);
  CHECK(removed[0]["host"] == "node-c");
  CHECK(removed[0]["reason"].get<std::string>().find("refused") != std::string::npos);
  CHECK(sweep.output().find("taking node-c out of the pool") != std::string::npos);

  // Each variant node-c failed went at once to another node and ended there, on attempt 2.
  auto retries = st::journal_events(out, "variant_retry");
  CHECK(retries.size() == 2);
  std::set<std::string> retried;
  for (const auto& r : retries) {
    CHECK(r["host"] == "node-c");
    retried.insert(r.value("variant", ""));
  }
  for (const auto& name : split(k_four_variants)) {
    check_ok_variant(out, name);
    auto result = read_json(out / "variants" / name / "result.json");
    CHECK(result["host"] != "node-c");
    CHECK(result["attempt"] == (retried.contains(name) ? 2 : 1));
  }
  CHECK(sweep.leftovers() == "");
}

TEST_CASE("SIGINT while both nodes load stops the servers on both and exits 130") {
  PoolSweep sweep;
  if (!start_nodes_or_skip(sweep, {"127.0.0.2", "127.0.0.3"})) {
    return;
  }
  // Loads that never end by themselves.
  sweep.write(k_four_variants, k_quick_benchmarks, "10m", 1);
  auto specctl = sweep.start({});
  // Both nodes are loading a server and its processes run.
  auto loading = [&] {
    std::set<std::string> hosts;
    for (const auto& e : st::journal_events(sweep.out(), "launched")) {
      if (!specctl::test::live_tagged_processes(e.value("tag", "")).empty()) {
        hosts.insert(e.value("host", ""));
      }
    }
    return hosts.size() == 2;
  };
  bool both = st::wait_until(loading, k_phase_timeout);
  INFO(sweep.output());
  REQUIRE_MESSAGE(both, "the two nodes did not both start loading");
  REQUIRE(st::journal_events(sweep.out(), "phase_started").size() >= 2);
  for (const auto& node : sweep.nodes()) {
    CHECK_MESSAGE(node->tags().size() == 1, node->name());
  }
  specctl->signal(SIGINT);
  auto code = specctl->wait_exit_code(k_signal_exit_timeout);
  INFO(sweep.output());
  CHECK(code == 130);
  CHECK(sweep.leftovers() == "");
  int interrupted = 0;
  for (const auto& e : st::journal_events(sweep.out(), "variant_finished")) {
    interrupted += e.value("status", "") == "interrupted" ? 1 : 0;
  }
  CHECK(interrupted == 2);
  CHECK(st::journal_events(sweep.out(), "torn_down").size() == 2);
  CHECK(sweep.output().find("--resume") != std::string::npos);
}

// GPU slots: one node split in two halves runs two tp-2 variants at once, each on
// its own GPUs and port, and the report says their figures may interfere.
TEST_CASE("a node split into two GPU slots runs two variants at once on disjoint GPUs and ports") {
  PoolSweep sweep;
  if (!start_nodes_or_skip(sweep, {"127.0.0.2"})) {
    return;
  }
  const auto& node = *sweep.nodes().front();
  // Every variant asks for the same port, as experiments do: the slots keep them apart.
  int port = 0;
  for (int tries = 0; tries < 50 && port == 0; ++tries) {
    int candidate = st::free_port();
    if (st::connection_refused(candidate + 1)) {
      port = candidate;
    }
  }
  REQUIRE(port > 0);
  std::string entry = node.host_entry();
  entry.replace(entry.rfind('}'), 1, ", slots: [[0, 1], [2, 3]]}");
  std::ofstream(sweep.file()) << fmt::format(R"(name: slots
hosts:
{entry}server:
  template: specsim
  host: {node}
  model: /models/Kimi-K2.5-INT4
  port: {port}
  knobs: {{tp: 2, sim_load_time: 2s, sim_speed: 10}}
  health: {{timeout: 2m, interval: 200ms, stall: 1m}}
  cleanup: {{policy: kill, grace: 3s, timeout: 30s}}
variants:
  - name: a
  - name: b
  - name: c
  - name: d
benchmarks:
{benchmarks}
)",
                                             fmt::arg("entry", entry), fmt::arg("node", node.name()),
                                             fmt::arg("port", port), fmt::arg("benchmarks", k_quick_benchmarks));
  GpuWatcher watcher(sweep.gpu_dirs());
  int code = sweep.run();
  watcher.stop();
  INFO(sweep.output());
  REQUIRE(code == 0);
  CHECK(watcher.most_servers_at_once() == 2);
  // Tag -> GPUs its processes held.
  auto gpus_of = watcher.gpus_by_tag();
  std::set<int> slots_used;
  for (const auto& name : {"a", "b", "c", "d"}) {
    check_ok_variant(sweep.out(), name);
    auto result = read_json(sweep.out() / "variants" / name / "result.json");
    INFO("variant " << name << ": " << result["slot"].dump());
    int index = result["slot"]["index"].get<int>();
    slots_used.insert(index);
    std::set<int> slot_gpus = index == 0 ? std::set<int>{0, 1} : std::set<int>{2, 3};
    CHECK(result.value("host", "") == fmt::format("{}#{}", node.name(), index));
    CHECK(result["slot"]["port"] == port + index);
    // The server was launched with the slot's port and GPUs.
    auto launched = read_json(sweep.out() / "provenance.json")["variants"][name];
    CHECK(launched["command"].get<std::string>().find(fmt::format("--port {}", port + index)) != std::string::npos);
    CHECK(launched["env"]["CUDA_VISIBLE_DEVICES"] == (index == 0 ? "0,1" : "2,3"));
    // The server's workers held exactly its slot's GPUs.
    CHECK(gpus_of[result.value("tag", "")] == slot_gpus);
    CHECK(result["flags"].dump().find("GPU slot") != std::string::npos);
  }
  CHECK(slots_used == std::set<int>{0, 1});
  auto report = st::read_file(sweep.out() / "report.md");
  CHECK(report.find("## Flags") != std::string::npos);
  CHECK(report.find("may include their interference") != std::string::npos);
  CHECK(sweep.leftovers() == "");
}
