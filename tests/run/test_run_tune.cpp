// `specctl tune` end to end: the real specctl tunes real specsim servers on this
// machine; each trial is an ordinary variant of one result folder. What could break:
// a trial launched twice (after kill -9 and --resume, or one an earlier run measured),
// an answer or tuned.yaml not written, a winner that contradicts a 2x difference.

#include "../support/gpu_watcher.hpp"
#include "sweep.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <regex>

using namespace run_test;

namespace {

// EAGLE-3 on or off and its steps 1..4 (start 2): 5 configurations. SGLang wants
// steps, topk and draft tokens together (the template derives the draft tokens).
constexpr const char* k_tune_block = R"(tune:
  space:
    speculative: [none, eagle3]
    draft_model: {{values: [/models/Kimi-K2.5-EAGLE3], where: {{speculative: eagle3}}}}
    spec_topk: {{values: [1], where: {{speculative: eagle3}}}}
    spec_steps: {{range: [1, 4], start: 2, where: {{speculative: eagle3}}}}
  load: {load}
  budget: {{loads: 5}})";

constexpr const char* k_load_levels = "{concurrency: [1, 30], repeats: 2, max_tokens: 32}";

std::string tune_block(const std::string& load) {
  return fmt::format(k_tune_block, fmt::arg("load", load));
}

// Each variant's launches in a result folder's journal.
std::map<std::string, int> launches(const std::filesystem::path& out) {
  std::map<std::string, int> count;
  for (const auto& e : journal(out)) {
    if (e.value("event", "") == "launched") {
      ++count[e.value("variant", "")];
    }
  }
  return count;
}

int finished_trials(const std::filesystem::path& out) {
  int n = 0;
  for (const auto& e : journal(out)) {
    n += e.value("event", "") == "variant_finished" && e.value("status", "") == "ok" ? 1 : 0;
  }
  return n;
}

// "specctl: 3 trials launched, 2 reused from earlier runs, 0 kept; ..."
std::array<int, 3> counts_said(const std::string& output) {
  std::smatch m;
  static const std::regex said(R"((\d+) trials? launched, (\d+) reused from earlier runs, (\d+) kept)");
  if (!std::regex_search(output, m, said)) {
    return {-1, -1, -1};
  }
  return {std::stoi(m[1]), std::stoi(m[2]), std::stoi(m[3])};
}

} // namespace

TEST_CASE("tune on specsim: each trial launched once, the answer, and tuned.yaml an experiment that validates") {
  Sweep sweep;
  sweep.subcommand("tune");
  // A report setting of the file's own, which tuned.yaml keeps.
  sweep.write("", "", "1s", 10, tune_block(k_load_levels) + "\nreport: {max_failed: 20%}");
  int code = sweep.run({"--out", sweep.out().string()});
  INFO(sweep.output());
  REQUIRE(code == 0);
  auto launched = launches(sweep.out());
  auto answer = read_json(sweep.out() / "tune.json");
  // The start and EAGLE-3 at its start at least; never the whole grid twice over.
  CHECK(launched.size() >= 2);
  CHECK(launched.size() <= 5);
  for (const auto& [variant, n] : launched) {
    CAPTURE(variant);
    CHECK(n == 1);
  }
  CHECK(answer["trials"] == launched.size());
  CHECK(answer["grid"] == 5);
  CHECK(counts_said(sweep.output()) == std::array<int, 3>{static_cast<int>(launched.size()), 0, 0});
  // At 30 streams no speculation is about twice EAGLE-3 in specsim's model.
  REQUIRE(answer["points"].size() == 2);
  CHECK(answer["points"][1]["point"] == "c30");
  CHECK(answer["points"][1]["best"]["variant"] == "spec-none");
  CHECK(answer["points"][1]["ratio"].get<double>() > 1.5);
  // A tie is the rule applied to the figures the answer shows, not a verdict fixed in advance:
  // with two repeats on a loaded machine a 95% interval can be wider than a 2x gap.
  for (const auto& point : answer["points"]) {
    CAPTURE(point.dump());
    REQUIRE(point["runner_up"].is_object());
    const auto& best = point["best"];
    const auto& second = point["runner_up"];
    const double gap = std::abs(second["mean"].get<double>() - best["mean"].get<double>());
    const double margin = std::max(second["half_width"].get<double>() + best["half_width"].get<double>(),
                                   0.02 * std::abs(best["mean"].get<double>()));
    CHECK(point["tie"] == (gap <= margin));
  }
  auto md = st::read_file(sweep.out() / "tune.md");
  CHECK(md.find("**Recommendation:**") != std::string::npos);
  // c30 is named with its winner: alone ("c ≥ 30") or with c1 ("every load").
  CHECK(std::regex_search(md, std::regex("(every load|c ≥ 30): no speculation")));
  // The report of the trials is the ordinary one.
  auto run = read_json(sweep.out() / "run.json");
  CHECK(run["variants"].size() == launched.size());
  // The report, written again after the answer, opens with the tuning and its Pareto front.
  auto report = st::read_file(sweep.out() / "report.md");
  CHECK(report.find("## Tuning") != std::string::npos);
  CHECK(report.find("| spec-none | c30 |") != std::string::npos);
  CHECK(st::read_file(sweep.out() / "report.html").find("data-plot=\"pareto\"") != std::string::npos);
  // tuned.yaml: the start, the winners and the runners-up of ties, an experiment specctl validates.
  Sweep confirm;
  std::filesystem::copy_file(sweep.out() / "tuned.yaml", confirm.file());
  auto validate = st::Process({SPECCTL_BINARY, "validate", confirm.file().string()}, confirm.log());
  CHECK(validate.wait_exit_code(k_sweep_timeout) == 0);
  auto tuned = st::read_file(confirm.file());
  INFO(tuned);
  CHECK(tuned.find("name: spec-none") != std::string::npos);
  CHECK(tuned.find("max_failed: 20%") != std::string::npos);
  CHECK(tuned.find("baseline: spec-none") != std::string::npos);
  for (const auto& point : answer["points"]) {
    if (point["tie"] == true && point["runner_up"].is_object()) {
      CAPTURE(point.dump());
      // One comment names every point where the variant is a runner-up ("# runner-up at c1, …; runner-up at c30, …").
      auto why = fmt::format("runner-up at {}, within the noise of {}", point["point"].get<std::string>(),
                             point["best"]["variant"].get<std::string>());
      CHECK(tuned.find(why) != std::string::npos);
      CHECK(tuned.find("name: " + point["runner_up"]["variant"].get<std::string>()) != std::string::npos);
    }
  }
  // The plan of the tuning file now has the trials' durations to go on.
  auto plan_log = sweep.file().parent_path() / "plan.log";
  auto plan = st::Process(
      {SPECCTL_BINARY, "plan", sweep.file().string(), "--history", sweep.out().parent_path().string()}, plan_log);
  CHECK(plan.wait_exit_code(k_sweep_timeout) == 0);
  CHECK(st::read_file(plan_log).find(
            fmt::format("from history ({} configurations measured before in {}:", launched.size(),
                        sweep.out().parent_path().string())) != std::string::npos);
}

TEST_CASE("kill -9 of a tuning, then --resume: the search goes on and no finished trial is launched again") {
  Sweep sweep;
  sweep.subcommand("tune");
  sweep.write("", "", "1s", 10, tune_block(k_load_levels));
  auto specctl = sweep.start({"--out", sweep.out().string()});
  // Killed after the first trial: the search has at least EAGLE-3 at its start to go.
  REQUIRE(st::wait_until([&] { return finished_trials(sweep.out()) >= 1; }, k_sweep_timeout));
  specctl->signal(SIGKILL);
  REQUIRE(specctl->wait_exit_code(k_signal_exit_timeout) == 128 + SIGKILL);
  // What was finished when it died, and when each was measured.
  std::map<std::string, std::string> finished;
  for (const auto& entry : std::filesystem::directory_iterator(sweep.out() / "variants")) {
    auto path = entry.path() / "result.json";
    if (std::filesystem::exists(path)) {
      auto result = read_json(path);
      if (result.value("status", "") == "ok") {
        finished[entry.path().filename().string()] = result.value("started", "");
      }
    }
  }
  REQUIRE(finished.size() >= 1);

  int code = sweep.run({"--resume", sweep.out().string()});
  INFO(sweep.output());
  CHECK(code == 0);
  CHECK(stray_servers(sweep.state()) == "");
  for (const auto& [variant, started] : finished) {
    CAPTURE(variant);
    CHECK(read_json(sweep.out() / "variants" / variant / "result.json").value("started", "") == started);
    CHECK(launches(sweep.out())[variant] == 1);
  }
  auto said = counts_said(sweep.output());
  CHECK(said[2] == static_cast<int>(finished.size()));
  auto answer = read_json(sweep.out() / "tune.json");
  // The resumed tuning launched what the search still asked for.
  CHECK(said[0] >= 1);
  CHECK(answer["trials"] == static_cast<int>(finished.size()) + said[0]);
  CHECK(answer["points"][1]["best"]["variant"] == "spec-none");
}

TEST_CASE("tune --from reuses the trials an earlier run measured with the same command and benchmarks") {
  // The earlier run: the quickstart's baseline and EAGLE-3 at 2 steps, on the same port,
  // fake GPUs and benchmark as the tuning, so their launch commands are the tuning's.
  Sweep earlier;
  earlier.write(R"(  - name: baseline
  - name: eagle3
    knobs: {speculative: eagle3, draft_model: /models/Kimi-K2.5-EAGLE3, spec_steps: 2, spec_topk: 1})",
                fmt::format("  - {{name: load, kind: concurrency, levels: [1, 30], repeats: 2, max_tokens: 32}}"), "1s",
                10);
  REQUIRE(earlier.run({"--out", earlier.out().string()}) == 0);
  Sweep tuning;
  tuning.subcommand("tune");
  tuning.share_host_with(earlier);
  tuning.use_port(earlier.port());
  tuning.write("", "  - {name: load, kind: concurrency, levels: [1, 30], repeats: 2, max_tokens: 32}", "1s", 10,
               tune_block("load"));
  int code = tuning.run({"--out", tuning.out().string(), "--from", earlier.out().string()});
  INFO(tuning.output());
  REQUIRE(code == 0);
  auto launched = launches(tuning.out());
  // The start (no speculation) and EAGLE-3 at its start of 2 steps were measured before: copied, not launched.
  CHECK(launched.count("spec-none") == 0);
  CHECK(launched.count("spec-eagle3-steps2") == 0);
  for (const auto& name : {"spec-none", "spec-eagle3-steps2"}) {
    CAPTURE(name);
    auto result = read_json(tuning.out() / "variants" / name / "result.json");
    CHECK(result["variant"] == name);
    CHECK(result.value("reused_from", "").find(earlier.out().filename().string()) != std::string::npos);
  }
  auto said = counts_said(tuning.output());
  CHECK(said[1] == 2);
  CHECK(said[0] == static_cast<int>(launched.size()));
  auto answer = read_json(tuning.out() / "tune.json");
  CHECK(answer["trials"] == launched.size() + 2);
}

TEST_CASE("a tuning whose start configuration cannot be served stops after it, says why and exits 1") {
  Sweep sweep;
  sweep.subcommand("tune");
  // Every configuration crashes while loading: the setup is broken, not a configuration.
  sweep.personality("specsim", "tp: 8, sim_fault: [crash-load], ");
  sweep.write("", "", "1s", 10, tune_block(k_load_levels));
  int code = sweep.run({"--out", sweep.out().string()});
  INFO(sweep.output());
  CHECK(code == 1);
  CHECK(launches(sweep.out()) == std::map<std::string, int>{{"spec-none", 1}});
  auto answer = read_json(sweep.out() / "tune.json");
  CHECK(answer["stopped"].get<std::string>().starts_with("the start configuration spec-none failed"));
  CHECK(answer["points"][0]["best"].is_null());
}

TEST_CASE("tune over SSH: the trials run on the node, and the answer is written here") {
  auto sshd = specctl::test::require_sshd();
  Sweep sweep(ssh_hosts(*sshd), "node");
  sweep.subcommand("tune");
  sweep.write("", "", "1s", 10, R"(tune:
  space:
    speculative: [none, eagle3]
    draft_model: {values: [/models/Kimi-K2.5-EAGLE3], where: {speculative: eagle3}}
    spec_topk: {values: [1], where: {speculative: eagle3}}
    spec_steps: {values: [2], where: {speculative: eagle3}}
  load: {concurrency: [1, 30], repeats: 2, max_tokens: 32})");
  int code = sweep.run({"--out", sweep.out().string()});
  INFO(sweep.output());
  REQUIRE(code == 0);
  CHECK(launches(sweep.out()) == std::map<std::string, int>{{"spec-eagle3", 1}, {"spec-none", 1}});
  for (const auto& name : {"spec-none", "spec-eagle3"}) {
    CAPTURE(name);
    CHECK(read_json(sweep.out() / "variants" / name / "result.json")["host"] == "node");
  }
  auto answer = read_json(sweep.out() / "tune.json");
  CHECK(answer["points"][1]["best"]["variant"] == "spec-none");
  CHECK(stray_servers(sweep.state()) == "");
}

// Two GPU slots on this machine: the search's next trial and what it would ask if
// that one lost run side by side. The budget still counts every model load, and
// no configuration is launched twice.
TEST_CASE("tune on a host split into two GPU slots runs two trials at once within its budget") {
  Sweep sweep(R"(hosts:
  gpu: {local: true, slots: [[0, 1, 2, 3], [4, 5, 6, 7]]})",
              "gpu");
  sweep.personality("specsim", "tp: 4, ");
  // Slot 1 serves on the port after the server's: both must be free.
  int port = 0;
  for (int tries = 0; tries < 50 && port == 0; ++tries) {
    int candidate = st::free_port();
    if (st::connection_refused(candidate + 1)) {
      port = candidate;
    }
  }
  REQUIRE(port > 0);
  sweep.use_port(port);
  sweep.subcommand("tune");
  sweep.write("", "", "1s", 10, tune_block(k_load_levels));
  specctl::test::GpuWatcher watcher({{"gpu", sweep.gpus()}});
  int code = sweep.run({"--out", sweep.out().string()});
  watcher.stop();
  INFO(sweep.output());
  REQUIRE(code == 0);
  auto launched = launches(sweep.out());
  CHECK(launched.size() >= 2);
  CHECK(launched.size() <= 5);
  for (const auto& [variant, n] : launched) {
    CAPTURE(variant);
    CHECK(n == 1);
  }
  CHECK(watcher.most_servers_at_once() == 2);
  auto answer = read_json(sweep.out() / "tune.json");
  CHECK(answer["trials"] == launched.size());
  REQUIRE(answer["points"].size() == 2);
  CHECK(answer["points"][1]["best"]["variant"] == "spec-none");
}

// A rate load with the tuning's SLO: the load benchmark is given the SLO, so each level
// carries goodput_rps and each launch bisects for its highest rate within the SLO, which
// is one more load point ("max rate"). At specsim's real speed a 32-token request takes
// about 0.4 s alone: 1 req/s meets an E2E p99 of 1.5 s and 40 req/s queues far past it
// (test_run_slo.cpp). What could break: the SLO not reaching the load benchmark, a goodput
// point judged on the percentile the goodput already counted per request, a max rate
// point that is not the trial's own bisection, a tuned.yaml whose bisection has no SLO.
TEST_CASE("tune for goodput with a rate load: the highest rate within the SLO is a load point of each trial") {
  Sweep sweep;
  sweep.subcommand("tune");
  auto block = fmt::format(k_tune_block,
                           fmt::arg("load", "{rates: [1, 40], duration: 2s, max_tokens: 32, repeats: 1, bisect: 2}"));
  block.replace(block.find("budget: {loads: 5}"), std::string("budget: {loads: 5}").size(),
                "budget: {loads: 2}\n  slo: {e2e_p99_ms: 1500}\n  objective: goodput");
  sweep.write("", "", "1s", 1, block);
  int code = sweep.run({"--out", sweep.out().string()});
  INFO(sweep.output());
  REQUIRE(code == 0);
  auto answer = read_json(sweep.out() / "tune.json");
  CHECK(answer["objective"] == "goodput");
  REQUIRE(answer["points"].size() == 3);
  CHECK(answer["points"][0]["point"] == "r1");
  CHECK(answer["points"][1]["point"] == "r40");
  CHECK(answer["points"][2]["point"] == "max rate");
  auto launched = launches(sweep.out());
  CHECK(launched.size() == 2);
  std::map<std::string, json> results;
  for (const auto& [variant, n] : launched) {
    results[variant] = read_json(sweep.out() / "variants" / variant / "result.json");
    const auto& load = results[variant]["benchmarks"]["load"];
    CAPTURE(variant);
    REQUIRE(load["slo_search"].is_object());
    CHECK(load["slo_search"]["max_rate"].is_number());
    for (const auto& level : load["levels"]) {
      CHECK(level["metrics"]["goodput_rps"].is_number());
    }
  }
  // Each point's best figure is its trial's own: the goodput of the level, or its bisection.
  for (std::size_t p = 0; p < 2; ++p) {
    const auto& best = answer["points"][p]["best"];
    CAPTURE(p);
    // At 40 req/s every E2E p99 is far over 1.5 s, yet the requests within it still count.
    REQUIRE(best.is_object());
    const auto& levels = results.at(best["variant"].get<std::string>())["benchmarks"]["load"]["levels"];
    CHECK(best["mean"].get<double>() == doctest::Approx(levels[p]["metrics"]["goodput_rps"].get<double>()));
    CHECK(levels[p]["metrics"]["slo_met"] == (p == 0));
  }
  const auto& top = answer["points"][2]["best"];
  REQUIRE(top.is_object());
  const auto& search = results.at(top["variant"].get<std::string>())["benchmarks"]["load"]["slo_search"];
  // Its figure is the bracket [met, missed]: the search compares brackets, not the ends.
  CHECK(top["samples"] == json::array({search["max_rate"]}));
  CHECK(top["missed_at"] == search["missed_at"]);
  CHECK(top["mean"].get<double>() - top["half_width"].get<double>() ==
        doctest::Approx(search["max_rate"].get<double>()));
  CHECK(top["mean"].get<double>() + top["half_width"].get<double>() ==
        doctest::Approx(search["missed_at"].get<double>()));
  for (const auto& [variant, result] : results) {
    CAPTURE(variant);
    CHECK(result["benchmarks"]["load"]["slo_search"]["max_rate"].get<double>() <=
          top["mean"].get<double>() + top["half_width"].get<double>());
  }
  auto md = st::read_file(sweep.out() / "tune.md");
  CHECK(md.find("highest rate within the SLO: ") != std::string::npos);
  // tuned.yaml's load keeps the SLO its bisection needs: it validates.
  Sweep confirm;
  std::filesystem::copy_file(sweep.out() / "tuned.yaml", confirm.file());
  auto validate = st::Process({SPECCTL_BINARY, "validate", confirm.file().string()}, confirm.log());
  CHECK(validate.wait_exit_code(k_sweep_timeout) == 0);
  CHECK(st::read_file(confirm.file()).find("e2e_p99_ms: 1500") != std::string::npos);
}
