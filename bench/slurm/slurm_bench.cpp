// Slurm speed-up benchmark (bench/README.md): the same four-variant specsim sweep
// run by the real specctl binary as Slurm jobs on a one-node cluster, then on a
// two-node cluster (tests/support/slurm_cluster.hpp, every node this machine),
// and the ratio of their wall times. Each job asks for 3 of a node's 4 GPUs, so a
// node runs one variant at a time, as a tp-8 job on an 8-GPU node would.
// A measurement, not a test: it is not part of ctest.

#include "../../tests/support/slurm_cluster.hpp"
#include "../../tests/support/temp_dir.hpp"
#include "../sweep_bench.hpp"

#include <specctl/sim/gpu_state.hpp>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <fmt/format.h>
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

constexpr auto k_sweep_timeout = std::chrono::minutes{5};

std::string experiment(const SweepOptions& options, const std::filesystem::path& gpus_root) {
  std::string variants = four_variants();
  return fmt::format(R"(name: slurm-bench
hosts:
  cluster:
    slurm:
      gpus: 3
      poll: 500ms
      setup:
        - "export SPECSIM_GPU_DIR={root}/gpus-$SLURMD_NODENAME"
        - "export PATH={fake_gpu}:$PATH"
server:
  template: specsim
  host: cluster
  model: /models/Kimi-K2.5-INT4
  knobs: {{tp: 2, sim_load_time: {load}, sim_speed: {speed}}}
  health: {{timeout: 5m, interval: 200ms, stall: 2m}}
  cleanup: {{policy: kill, grace: 3s, timeout: 30s}}
variants:
{variants}benchmarks:
  - {{name: throughput, kind: concurrency, repeats: 1, levels: [4], requests: {requests}, max_tokens: {max_tokens}}}
)",
                     fmt::arg("root", gpus_root.string()), fmt::arg("fake_gpu", options.fake_gpu_bin),
                     fmt::arg("load", options.load), fmt::arg("speed", options.speed), fmt::arg("variants", variants),
                     fmt::arg("requests", options.requests), fmt::arg("max_tokens", options.max_tokens));
}

struct Timing {
  double seconds = 0;
  bool ok = false;
  // From submission to the job's start, summed over the variants.
  double queued = 0;
};

// Seconds from each variant's slurm_submitted to its slurm_running, summed.
double queue_time(const std::filesystem::path& out) {
  std::map<std::string, double> submitted;
  double total = 0;
  std::ifstream in(out / "journal.jsonl");
  auto seconds = [](const std::string& t) {
    // "2026-12-01T18:04:07.123Z": the time of day is enough within one sweep.
    return std::stod(t.substr(11, 2)) * 3600 + std::stod(t.substr(14, 2)) * 60 + std::stod(t.substr(17, 6));
  };
  for (std::string line; std::getline(in, line);) {
    auto e = nlohmann::json::parse(line, nullptr, false);
    if (!e.is_object() || !e.contains("t")) {
      continue;
    }
    std::string event = e.value("event", "");
    if (event == "slurm_submitted") {
      submitted[e.value("variant", "")] = seconds(e.value("t", ""));
    } else if (event == "slurm_running" && submitted.contains(e.value("variant", ""))) {
      total += seconds(e.value("t", "")) - submitted[e.value("variant", "")];
    }
  }
  return total;
}

// A cluster of `nodes`, one sweep on it, the cluster stopped; the sweep's wall time.
Timing sweep(const SweepOptions& options, const std::filesystem::path& dir, int nodes, int rep) {
  auto root = dir / fmt::format("{}-nodes-{}", nodes, rep);
  std::filesystem::create_directories(root / "cluster");
  for (int n = 1; n <= nodes; ++n) {
    std::filesystem::create_directories(root / fmt::format("gpus-n{}", n));
  }
  Timing timing;
  try {
    test::SlurmCluster cluster(root / "cluster", {.nodes = nodes});
    std::ofstream(root / "sweep.yaml") << experiment(options, root);
    auto started = Clock::now();
    auto result = test::run_program(
        {options.specctl, "run", (root / "sweep.yaml").string(), "--out", (root / "out").string(), "--quiet"}, root,
        cluster.env(), k_sweep_timeout);
    timing.seconds = std::chrono::duration<double>(Clock::now() - started).count();
    timing.ok = result.exit_code == 0;
    timing.queued = queue_time(root / "out");
    if (!timing.ok) {
      std::fprintf(stderr, "specctl run on %d node(s) exited %d:\n%s\n", nodes, result.exit_code,
                   result.output.c_str());
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "the %d-node cluster did not start: %s\n", nodes, e.what());
  }
  // Whatever a failed sweep left holding the fake GPUs.
  for (int n = 1; n <= nodes; ++n) {
    for (const auto& app : specctl::sim::live_app_entries(root / fmt::format("gpus-n{}", n))) {
      ::kill(app.pid, SIGKILL);
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
  if (auto why = test::SlurmCluster::unavailable()) {
    std::fprintf(stderr, "%s\n", why->c_str());
    return 2;
  }
  test::TempDir dir("specctl-slurm-bench");
  std::printf("specctl Slurm benchmark: 4 variants as jobs of 3 GPUs, specsim tp 2, load %s at speed %d, "
              "concurrency 4 x %d requests of %d tokens\n",
              options.load.c_str(), options.speed, options.requests, options.max_tokens);
  std::vector<double> one_node;
  std::vector<double> two_nodes;
  std::vector<double> ratios;
  bool all_ok = true;
  for (int rep = 1; rep <= options.reps; ++rep) {
    auto one = sweep(options, dir.path(), 1, rep);
    auto two = sweep(options, dir.path(), 2, rep);
    all_ok = all_ok && one.ok && two.ok;
    one_node.push_back(one.seconds);
    two_nodes.push_back(two.seconds);
    ratios.push_back(two.seconds / one.seconds);
    std::printf("run %d: one node %.1f s (jobs queued %.1f s in all), two nodes %.1f s (queued %.1f s), ratio %.0f%%\n",
                rep, one.seconds, one.queued, two.seconds, two.queued, 100 * ratios.back());
    std::fflush(stdout);
  }
  double ratio = median(ratios);
  std::printf("median: one node %.1f s, two nodes %.1f s, ratio %.0f%% (target <= %.0f%%)%s\n", median(one_node),
              median(two_nodes), 100 * ratio, 100 * k_target_ratio, all_ok ? "" : "; some sweeps FAILED");
  return all_ok && ratio <= k_target_ratio ? 0 : 1;
}
