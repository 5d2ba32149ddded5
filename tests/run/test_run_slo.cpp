// A rate benchmark's SLO end to end against specsim: each level's goodput and
// verdict, and the search for the highest rate that meets the SLO by bisection in
// the same server launch. What could break: a search that contradicts its levels,
// a goodput above the completed requests' rate, SLO fields on a benchmark without one,
// a server death during the search losing what was measured.

#include "sweep.hpp"

#include <specctl/bench/bench.hpp>

#include <doctest/doctest.h>

using namespace run_test;

namespace {

// At specsim's real speed (sim_speed 1) a 32-token request takes about 0.4 s alone:
// at 1 req/s the E2E p99 is about 0.5 s, a third of the 1.5 s bound. At 40 req/s the
// simulated server takes requests faster than it serves them (its model tops out near
// 26 req/s of 32 tokens), so they queue and the E2E p99 is about 4 s. The bisection's
// rates in between (20.5, then 10.75 or 30.25) may go either way: only consistency is checked.
constexpr const char* k_slo_benchmarks = R"(  - name: open
    kind: rate
    rates: [1, 40]
    duration: 2s
    max_tokens: 32
    repeats: 1
    slo: {e2e_p99_ms: 1500}
    bisect: 2
  - {name: plain, kind: rate, rates: [1], duration: 1s, max_tokens: 32, repeats: 1})";

} // namespace

TEST_CASE("an SLO on a rate benchmark: goodput per level, and bisection to the highest rate that meets it") {
  Sweep sweep;
  sweep.write("  - name: only", k_slo_benchmarks, "1s", 1);
  int code = sweep.run({"--out", sweep.out().string()});
  INFO(sweep.output());
  REQUIRE(code == 0);
  auto result = read_json(sweep.out() / "variants/only/result.json");
  const auto& open = result["benchmarks"]["open"];
  INFO(open["slo_search"].dump());
  REQUIRE(open["slo_search"].is_object());
  const auto& search = open["slo_search"];

  // The listed rates first: the low one met, the high one missed; then up to 2 bisected.
  const auto& steps = search["steps"];
  REQUIRE(steps.size() >= 3);
  REQUIRE(steps.size() <= 4);
  CHECK(steps[0]["rate"] == 1.0);
  CHECK(steps[0]["met"] == true);
  CHECK(steps[1]["rate"] == 40.0);
  CHECK(steps[1]["met"] == false);
  CHECK(steps[2]["rate"] == 20.5);
  REQUIRE(search["max_rate"].is_number());
  REQUIRE(search["missed_at"].is_number());
  CHECK(search["max_rate"].get<double>() >= 1.0);
  CHECK(search["max_rate"].get<double>() < search["missed_at"].get<double>());
  CHECK(search["missed_at"].get<double>() <= 40.0);
  CHECK(search["why"].get<std::string>().find("between") != std::string::npos);

  // Every step is a level of its own (one repeat each), and says what the level's slo_met says.
  const auto& levels = open["levels"];
  REQUIRE(levels.size() == steps.size());
  int searched = 0;
  for (std::size_t i = 0; i < levels.size(); ++i) {
    CAPTURE(i);
    const auto& level = levels[i];
    const auto& m = level["metrics"];
    CHECK(level["rate"] == steps[i]["rate"]);
    CHECK(level.value("search", false) == steps[i]["search"].get<bool>());
    searched += level.value("search", false) ? 1 : 0;
    CHECK(m["slo_met"] == steps[i]["met"]);
    CHECK(m["slo_missed"].empty() == m["slo_met"].get<bool>());
    CHECK(m["goodput_rps"].get<double>() >= 0);
    CHECK(m["goodput_rps"].get<double>() <= m["request_s"].get<double>() + 1e-9);
    if (m["slo_met"] == true) {
      CHECK(m["e2e_p99_ms"].get<double>() <= 1500);
      CHECK(search["max_rate"].get<double>() >= level["rate"].get<double>());
    } else {
      CHECK(search["missed_at"].get<double>() <= level["rate"].get<double>());
      CHECK(m["slo_missed"][0].get<std::string>().starts_with("e2e_p99_ms "));
    }
  }
  CHECK(searched == static_cast<int>(steps.size()) - 2);
  // The low rate's requests all finish far inside the bound: its goodput is its request rate.
  CHECK(levels[0]["metrics"]["goodput_rps"].get<double>() ==
        doctest::Approx(levels[0]["metrics"]["request_s"].get<double>()));
  // vLLM's file of the level counts the same goodput.
  auto vllm = read_json(sweep.out() / "variants/only/vllm-open-r1.json");
  CHECK(vllm["request_goodput"].get<double>() == doctest::Approx(levels[0]["metrics"]["goodput_rps"].get<double>()));

  // Without an SLO: none of its fields.
  const auto& plain = result["benchmarks"]["plain"];
  CHECK_FALSE(plain.contains("slo_search"));
  REQUIRE(plain["levels"].size() == 1);
  CHECK_FALSE(plain["levels"][0]["metrics"].contains("goodput_rps"));
  CHECK_FALSE(plain["levels"][0]["metrics"].contains("slo_met"));
  CHECK(read_json(sweep.out() / "variants/only/vllm-plain-r1.json")["request_goodput"].is_null());

  // The report: goodput per listed rate, and the search's answer; bisected rates are not columns.
  auto report = st::read_file(sweep.out() / "report.md");
  CHECK(report.find("Goodput req/s: requests meeting the SLO (e2e_p99_ms ≤ 1500) per second") != std::string::npos);
  CHECK(report.find(fmt::format("- only: highest rate meeting the SLO: {:g} req/s (missed at {:g})",
                                search["max_rate"].get<double>(), search["missed_at"].get<double>())) !=
        std::string::npos);
  CHECK(report.find("| 20.5/s") == std::string::npos);
  // The plan says what the benchmark will do.
  CHECK(open["spec"].get<std::string>().find("SLO e2e_p99_ms <= 1500, then up to 2 rates bisected") !=
        std::string::npos);
}

TEST_CASE("a server that dies during the SLO search ends it with what was measured") {
  // The variant's warmup, the benchmark's, and the listed rates' requests (their
  // schedules are seeded by their place: 0 and 1), then 10 more: the server dies
  // early in the first bisected rate.
  const auto listed =
      specctl::bench::arrival_times(1, 1, 2, 0).size() + specctl::bench::arrival_times(40, 1, 2, 1).size();
  Sweep sweep;
  sweep.write(fmt::format("  - name: only\n    knobs: {{sim_fault: [die-after:{}]}}", 2 + listed + 10),
              R"(  - {name: open, kind: rate, rates: [1, 40], duration: 2s, max_tokens: 32, repeats: 1,
     slo: {e2e_p99_ms: 1500}, bisect: 2})",
              "1s", 1);
  int code = sweep.run({"--out", sweep.out().string()});
  INFO(sweep.output());
  CHECK(code == 1);
  auto result = read_json(sweep.out() / "variants/only/result.json");
  CHECK(result["status"] == "failed");
  CHECK(result["reason"].get<std::string>().find("the server died during bench open at rate 20.5 (SLO search)") !=
        std::string::npos);
  const auto& open = result["benchmarks"]["open"];
  INFO(open.dump());
  // The listed rates are kept and judged; the bisected one that was cut short is kept and not judged.
  REQUIRE(open["levels"].size() == 3);
  CHECK(open["levels"][2]["rate"] == 20.5);
  CHECK(open["levels"][2]["search"] == true);
  const auto& search = open["slo_search"];
  CHECK(search["steps"].size() == 2);
  CHECK(search["max_rate"] == 1.0);
  CHECK(search["missed_at"] == 40.0);
  CHECK(search["why"] == "the search ended early (the server died): the highest rate that meets the SLO is between 1 "
                         "and 40 req/s");
}

TEST_CASE("Ctrl-C during the SLO search keeps what was measured, and --resume measures the benchmark again") {
  Sweep sweep;
  sweep.write("  - name: only",
              R"(  - {name: open, kind: rate, rates: [1, 40], duration: 2s, max_tokens: 32, repeats: 1,
     slo: {e2e_p99_ms: 1500}, bisect: 2})",
              "1s", 1);
  auto specctl = sweep.start({"--out", sweep.out().string()});
  // Each level's vLLM file is written when it ends: the high rate's means the search has begun.
  REQUIRE(st::wait_until([&] { return std::filesystem::exists(sweep.out() / "variants/only/vllm-open-r40.json"); },
                         k_sweep_timeout));
  specctl->signal(SIGINT);
  CHECK(specctl->wait_exit_code(k_signal_exit_timeout) == 130);
  INFO(sweep.output());
  auto result = read_json(sweep.out() / "variants/only/result.json");
  CHECK(result["status"] == "interrupted");
  const auto& open = result["benchmarks"]["open"];
  INFO(open.dump());
  CHECK(open["status"] == "interrupted");
  REQUIRE(open["levels"].size() >= 2);
  CHECK(open["levels"][1]["rate"] == 40.0);
  const auto& search = open["slo_search"];
  CHECK(search["steps"].size() == 2);
  CHECK(search["max_rate"] == 1.0);
  CHECK(search["missed_at"] == 40.0);
  CHECK(search["why"].get<std::string>().starts_with("the search ended early (interrupted)"));
  // Not complete: the resumed run measures it again, search and all.
  CHECK(sweep.run({"--resume", sweep.out().string()}) == 0);
  result = read_json(sweep.out() / "variants/only/result.json");
  CHECK(result["benchmarks"]["open"]["status"] == "ok");
  CHECK(result["benchmarks"]["open"]["slo_search"]["steps"].size() == 4);
  CHECK_FALSE(journal_has(sweep.out(), "benchmark_kept", "only"));
}
