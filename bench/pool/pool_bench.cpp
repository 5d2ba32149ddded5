// Host-pool speed-up benchmark (bench/README.md): the same four-variant specsim
// sweep run by the real specctl binary on one node, then on a pool of two nodes,
// and the ratio of their wall times. The nodes are test sshds on 127.0.0.2 and
// 127.0.0.3 of this machine, each with its own fake GPUs (tests/support/pool_nodes.hpp).
// A measurement, not a test: it is not part of ctest.

#include "../../tests/support/pool_nodes.hpp"
#include "../../tests/support/temp_dir.hpp"
#include "../sweep_bench.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;
namespace test = specctl::test;
using namespace specctl::bench_support;

// A sweep here takes well under a minute; past this something is wrong.
constexpr auto k_sweep_timeout = std::chrono::minutes{5};

// The experiment: four variants on `host` (a node or the pool "gpus" of both).
std::string experiment(const SweepOptions& options, const std::vector<std::unique_ptr<test::FakeGpuNode>>& nodes,
                       const std::string& host) {
  std::string hosts;
  std::vector<std::string> members;
  for (const auto& node : nodes) {
    hosts += node->host_entry();
    members.push_back(node->name());
  }
  std::string variants = four_variants();
  return fmt::format(R"(name: pool-bench
hosts:
{hosts}  gpus: {{pool: [{members}]}}
server:
  template: specsim
  host: {host}
  model: /models/Kimi-K2.5-INT4
  knobs: {{tp: 2, sim_load_time: {load}, sim_speed: {speed}}}
  health: {{timeout: 5m, interval: 200ms, stall: 2m}}
  cleanup: {{policy: kill, grace: 3s, timeout: 30s}}
variants:
{variants}benchmarks:
  - {{name: throughput, kind: concurrency, repeats: 1, levels: [4], requests: {requests}, max_tokens: {max_tokens}}}
)",
                     fmt::arg("hosts", hosts), fmt::arg("members", fmt::join(members, ", ")), fmt::arg("host", host),
                     fmt::arg("load", options.load), fmt::arg("speed", options.speed), fmt::arg("variants", variants),
                     fmt::arg("requests", options.requests), fmt::arg("max_tokens", options.max_tokens));
}

struct Timing {
  double seconds = 0;
  bool ok = false;
  // Phase -> seconds, summed over the variants (result.json "phases").
  std::map<std::string, double> phases;
};

// Adds up the phases every variant's result.json recorded under `out`.
std::map<std::string, double> phase_totals(const std::filesystem::path& out) {
  std::map<std::string, double> totals;
  std::error_code ec;
  for (std::filesystem::directory_iterator it(out / "variants", ec), end; !ec && it != end; it.increment(ec)) {
    auto result = nlohmann::json::parse(test::read_file(it->path() / "result.json"), nullptr, false);
    if (result.is_discarded() || !result.contains("phases")) {
      continue;
    }
    for (const auto& [phase, seconds] : result["phases"].items()) {
      // Benchmarks are phases "bench NAME"; one column for all of them.
      totals[phase.starts_with("bench") ? "bench" : phase] += seconds.is_number() ? seconds.get<double>() : 0;
    }
  }
  return totals;
}

// One `specctl run` of `host`'s sweep into a fresh folder; its wall time.
Timing sweep(const SweepOptions& options, const std::filesystem::path& dir,
             const std::vector<std::unique_ptr<test::FakeGpuNode>>& nodes, const std::string& host, int rep) {
  auto file = dir / fmt::format("{}-{}.yaml", host, rep);
  auto out = dir / fmt::format("{}-{}", host, rep);
  std::ofstream(file) << experiment(options, nodes, host);
  auto started = Clock::now();
  auto result = test::run_program({options.specctl, "run", file.string(), "--out", out.string(), "--quiet",
                                   "--state-dir", (dir / "unused-state").string()},
                                  dir, {}, k_sweep_timeout);
  Timing timing;
  timing.seconds = std::chrono::duration<double>(Clock::now() - started).count();
  timing.ok = result.exit_code == 0;
  timing.phases = phase_totals(out);
  if (!timing.ok) {
    std::fprintf(stderr, "specctl run on %s exited %d:\n%s\n", host.c_str(), result.exit_code, result.output.c_str());
  }
  for (const auto& node : nodes) {
    if (auto left = node->leftovers(); !left.empty()) {
      std::fprintf(stderr, "%s: left running after the sweep: %s\n", node->name().c_str(), left.c_str());
      node->kill_leftovers();
      timing.ok = false;
    }
  }
  return timing;
}

} // namespace

int main(int argc, char** argv) {
  SweepOptions options;
  if (!parse_options(argc, argv, options)) {
    return 2;
  }

  test::TempDir dir("specctl-pool-bench");
  std::vector<std::unique_ptr<test::FakeGpuNode>> nodes;
  for (const auto& [name, address] : {std::pair{"node-a", "127.0.0.2"}, std::pair{"node-b", "127.0.0.3"}}) {
    auto node = test::FakeGpuNode::start(name, address, dir.path(), options.fake_gpu_bin);
    if (!node) {
      std::fprintf(stderr, "cannot start the test sshd for %s: %s\n", name, node.error().c_str());
      return 2;
    }
    nodes.push_back(std::move(*node));
  }

  std::printf("specctl pool benchmark: 4 variants, specsim tp 2, load %s at speed %d, concurrency 4 x %d requests of "
              "%d tokens\n",
              options.load.c_str(), options.speed, options.requests, options.max_tokens);
  std::vector<double> single;
  std::vector<double> pooled;
  std::vector<double> ratios;
  bool all_ok = true;
  for (int rep = 1; rep <= options.reps; ++rep) {
    auto one = sweep(options, dir.path(), nodes, "node-a", rep);
    auto two = sweep(options, dir.path(), nodes, "gpus", rep);
    all_ok = all_ok && one.ok && two.ok;
    single.push_back(one.seconds);
    pooled.push_back(two.seconds);
    ratios.push_back(two.seconds / one.seconds);
    std::printf("run %d: one node %.1f s, pool of two %.1f s, ratio %.0f%%\n", rep, one.seconds, two.seconds,
                100 * ratios.back());
    // Where the time goes: the same work on each side, only spread differently.
    for (const auto* timing : {&one, &two}) {
      std::string line;
      double total = 0;
      for (const auto& [phase, seconds] : timing->phases) {
        line += fmt::format(" {} {:.1f},", phase, seconds);
        total += seconds;
      }
      std::printf("  %s phases summed over variants (s):%s total %.1f\n",
                  timing == &one ? "one node:" : "pool:    ", line.c_str(), total);
    }
    std::fflush(stdout);
  }
  double ratio = median(ratios);
  std::printf("median: one node %.1f s, pool of two %.1f s, ratio %.0f%% (target <= %.0f%%)%s\n", median(single),
              median(pooled), 100 * ratio, 100 * k_target_ratio, all_ok ? "" : "; some sweeps FAILED");
  return all_ok && ratio <= k_target_ratio ? 0 : 1;
}
