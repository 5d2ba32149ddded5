#include <doctest/doctest.h>

#include <specctl/report/report.hpp>
#include <specctl/report/slo.hpp>

#include <cmath>

using namespace specctl::report;
using nlohmann::json;

namespace {

specctl::bench::RequestRecord record(double ttft_ms, double e2e_ms, int tokens, bool ok = true) {
  specctl::bench::RequestRecord r;
  r.ttft_ms = ttft_ms;
  r.e2e_ms = e2e_ms;
  r.output_tokens = tokens;
  if (!ok) {
    r.failure = specctl::bench::FailureKind::stalled;
  }
  return r;
}

std::vector<std::string> missed(const std::vector<json>& levels, const Slo& slo, double max_failed_pct = 5) {
  std::vector<const json*> ptrs;
  for (const auto& l : levels) {
    ptrs.push_back(&l);
  }
  return slo_missed(ptrs, slo, max_failed_pct);
}

} // namespace

TEST_CASE("slo: the per-request bounds are the tightest of each latency, and itl bounds are the level's only") {
  auto b = request_bounds(
      {{"ttft_p99_ms", 2000}, {"ttft_p50_ms", 500}, {"tpot_p90_ms", 40}, {"itl_p99_ms", 30}, {"e2e_p99_ms", 9000}});
  CHECK(b.ttft_ms == 500);
  CHECK(b.tpot_ms == 40);
  CHECK(b.e2e_ms == 9000);
  auto only_itl = request_bounds({{"itl_p99_ms", 30}});
  CHECK_FALSE(only_itl.any());
}

TEST_CASE("slo: a level is judged on the mean of each bounded metric over its repeats") {
  const Slo slo = {{"ttft_p99_ms", 2000}, {"tpot_p99_ms", 50}};
  json a = {{"requests", 20}, {"failed", 0}, {"ttft_p99_ms", 1800.0}, {"tpot_p99_ms", 40.0}};
  json b = {{"requests", 20}, {"failed", 0}, {"ttft_p99_ms", 2820.4}, {"tpot_p99_ms", 52.44}};
  CHECK(missed({a}, slo).empty());
  CHECK(missed({b}, slo) == std::vector<std::string>{"ttft_p99_ms 2820 > 2000", "tpot_p99_ms 52.4 > 50"});
  // Means: TTFT 2310.2 misses, TPOT 46.2 meets.
  CHECK(missed({a, b}, slo) == std::vector<std::string>{"ttft_p99_ms 2310 > 2000"});
  SUBCASE("a metric nobody measured misses") {
    json none = {{"requests", 20}, {"failed", 0}, {"ttft_p99_ms", nullptr}};
    CHECK(missed({none}, {{"ttft_p99_ms", 2000}}) == std::vector<std::string>{"ttft_p99_ms not measured"});
  }
  SUBCASE("too many failed requests miss, whatever the latencies of the others") {
    json failing = {{"requests", 20}, {"failed", 4}, {"ttft_p99_ms", 10.0}, {"tpot_p99_ms", 1.0}};
    CHECK(missed({failing}, slo) == std::vector<std::string>{"4 of 20 requests failed (20%, more than 5%)"});
    CHECK(missed({failing}, slo, 50).empty());
  }
}

TEST_CASE("slo: a level's goodput, slo_met and slo_missed") {
  specctl::bench::LevelResult level;
  level.duration_s = 4.0;
  level.records = {record(100, 1000, 10), record(900, 1500, 10), record(100, 3000, 10), record(5, 10, 10, false),
                   record(1000, 1000, 1)};
  json metrics = {{"requests", 5}, {"failed", 1}, {"ttft_p99_ms", 990.0}, {"e2e_p99_ms", 2900.0}};
  // TTFT within 1000 and E2E within 2000: the first two and the one-token one; the failed one never.
  add_slo_metrics(metrics, level, {{"ttft_p99_ms", 1000}, {"e2e_p99_ms", 2000}}, 50);
  CHECK(metrics["goodput_rps"].get<double>() == doctest::Approx(3.0 / 4.0));
  CHECK(metrics["slo_met"] == false);
  CHECK(metrics["slo_missed"] == json::array({"e2e_p99_ms 2900 > 2000"}));
  SUBCASE("met") {
    json ok = {{"requests", 5}, {"failed", 1}, {"ttft_p99_ms", 990.0}};
    add_slo_metrics(ok, level, {{"ttft_p99_ms", 1000}}, 50);
    CHECK(ok["goodput_rps"].get<double>() == doctest::Approx(4.0 / 4.0));
    CHECK(ok["slo_met"] == true);
    CHECK(ok["slo_missed"] == json::array());
  }
  SUBCASE("no duration: no goodput rate") {
    level.duration_s = 0;
    add_slo_metrics(metrics, level, {{"ttft_p99_ms", 1000}}, 50);
    CHECK(metrics["goodput_rps"].get<double>() == 0.0);
  }
}

TEST_CASE("slo search: the next rate is the midpoint between the highest met and the lowest higher missed") {
  SUBCASE("bisects while steps are left") {
    auto s = search_slo({{1, true}, {8, false}}, 2);
    REQUIRE(s.next);
    CHECK(*s.next == 4.5);
    CHECK(s.max_rate == 1);
    CHECK(s.missed_at == 8);
    CHECK(s.why == "bisecting between 1 and 8 req/s");
    // 4.5 met: between 4.5 and 8 next.
    s = search_slo({{1, true}, {8, false}, {4.5, true}}, 1);
    CHECK(s.next == 6.25);
    // 4.5 missed: between 1 and 4.5.
    s = search_slo({{1, true}, {8, false}, {4.5, false}}, 1);
    CHECK(s.next == 2.75);
    CHECK(s.missed_at == 4.5);
    // To 4 significant digits: 4.4, not (1.2 + 7.6) / 2 = 4.3999999999999995.
    CHECK(search_slo({{1.2, true}, {7.6, false}}, 1).next == 4.4);
    CHECK(search_slo({{1, true}, {1.3, false}}, 1).next == 1.15);
    CHECK(search_slo({{100, true}, {133.33, false}}, 1).next == 116.7);
  }
  SUBCASE("no steps left: the interval it ended in") {
    auto s = search_slo({{1, true}, {8, false}, {4.5, true}, {6.25, false}}, 0);
    CHECK_FALSE(s.next);
    CHECK(s.max_rate == 4.5);
    CHECK(s.missed_at == 6.25);
    CHECK(s.why ==
          "the highest rate that meets the SLO is between 4.5 and 6.25 req/s; the bisection's steps are spent");
  }
  SUBCASE("stops when the gap is below 5% of the lower rate") {
    auto s = search_slo({{10, true}, {10.49, false}}, 5);
    CHECK_FALSE(s.next);
    CHECK(s.why == "the highest rate that meets the SLO is between 10 and 10.49 req/s, less than 5% apart");
    // At 5% exactly, one more step.
    CHECK(search_slo({{10, true}, {10.5, false}}, 5).next == 10.25);
  }
  SUBCASE("every rate met: the highest is a lower bound, nothing to bisect") {
    auto s = search_slo({{1, true}, {2, true}, {4, true}}, 3);
    CHECK_FALSE(s.next);
    CHECK(s.max_rate == 4);
    CHECK_FALSE(s.missed_at);
    CHECK(s.why == "every rate measured, up to 4 req/s, met the SLO: a lower bound on the highest rate that does");
  }
  SUBCASE("none met: no maximum, missed at the lowest") {
    auto s = search_slo({{2, false}, {1, false}}, 3);
    CHECK_FALSE(s.next);
    CHECK_FALSE(s.max_rate);
    CHECK(s.missed_at == 1);
    CHECK(s.why == "no rate met the SLO, not even the lowest measured, 1 req/s");
    CHECK(search_slo({}, 3).why == "no rate was measured");
  }
  SUBCASE("not monotonic: the highest that met counts, and only a miss above it bounds the search") {
    auto s = search_slo({{1, true}, {2, false}, {4, true}}, 3);
    CHECK_FALSE(s.next);
    CHECK(s.max_rate == 4);
    CHECK_FALSE(s.missed_at);
    CHECK(s.why == "the highest rate measured (a lower one missed), 4 req/s, met the SLO: a lower bound on the highest "
                   "rate that does");
    s = search_slo({{1, true}, {2, false}, {4, true}, {8, false}}, 3);
    CHECK(s.next == 6);
    CHECK(s.missed_at == 8);
  }
}

namespace {

json level(double rate, int repeat, double goodput, double e2e_p99, bool search = false) {
  json l = {{"rate", rate},
            {"concurrency", 4},
            {"repeat", repeat},
            {"metrics",
             {{"output_tok_s", 100.0 * rate},
              {"request_s", rate},
              {"requests", 10},
              {"completed", 10},
              {"failed", 0},
              {"e2e_p99_ms", e2e_p99},
              {"goodput_rps", goodput},
              {"slo_met", e2e_p99 <= 1500}}}};
  if (search) {
    l["search"] = true;
  }
  return l;
}

} // namespace

TEST_CASE("report: a rate benchmark with an SLO shows goodput per level and each variant's search") {
  RunData data;
  data.run = {{"format", "specctl-run"}, {"experiment", "slo"}, {"variants", {"fast", "slow"}}};
  data.experiment = {{"baseline", "fast"},
                     {"benchmarks",
                      {{{"name", "open"},
                        {"kind", "rate"},
                        {"description", "rate 1,8 req/s"},
                        {"rates", {1, 8}},
                        {"repeats", 2},
                        {"slo", {{"e2e_p99_ms", 1500}}},
                        {"bisect", 2}}}}};
  json fast = {{"status", "ok"}};
  fast["benchmarks"]["open"] = {
      {"kind", "rate"},
      {"status", "ok"},
      {"levels",
       {level(1, 1, 0.9, 500), level(8, 1, 7.0, 1400), level(1, 2, 1.1, 520), level(8, 2, 5.0, 1700),
        level(16, 1, 2.0, 2600, true), level(16, 2, 2.0, 2800, true)}},
      {"slo_search",
       {{"max_rate", 8}, {"missed_at", 16}, {"steps", json::array({{}, {}, {}})}, {"why", "the steps are spent"}}}};
  json slow = {{"status", "ok"}};
  slow["benchmarks"]["open"] = {
      {"kind", "rate"},
      {"status", "ok"},
      {"levels",
       {level(1, 1, 1.0, 900), level(8, 1, 0.0, 9000), level(1, 2, 1.0, 950), level(8, 2, 0.0, 9100),
        level(4.5, 1, 4.5, 1200, true), level(4.5, 2, 4.5, 1300, true)}},
      {"slo_search", {{"max_rate", 4.5}, {"missed_at", 8}, {"steps", json::array({{}, {}, {}})}, {"why", "..."}}}};
  data.results = {{"fast", fast}, {"slow", slow}};

  auto r = build_report(data);
  REQUIRE(r.levels.size() == 1);
  const auto& t = r.levels[0];
  // The bisected rates are each variant's own: not columns.
  CHECK(t.levels == std::vector<double>{1, 8});
  CHECK(t.slo == Slo{{"e2e_p99_ms", 1500}});
  CHECK(t.bisect == 2);
  const auto& f = t.rows[0];
  CHECK(*f.levels[0].goodput_rps == doctest::Approx(1.0));
  CHECK(f.levels[0].slo_met == true);
  // 1400 and 1700: one repeat met, but their mean (1550) misses, as the search judges it.
  CHECK(*f.levels[1].goodput_rps == doctest::Approx(6.0));
  CHECK(f.levels[1].slo_met == false);
  CHECK(f.levels[1].counts.requests == 20);
  REQUIRE(f.search);
  CHECK(f.search->max_rate == 8);
  CHECK(f.search->missed_at == 16);
  CHECK(f.search->steps == 3);

  const auto md = to_markdown(r);
  CHECK(md.find("Goodput req/s: requests meeting the SLO (e2e_p99_ms ≤ 1500) per second:\n\n"
                "| variant |  1/s |           8/s |\n"
                "| ------- | ---: | ------------: |\n"
                "| fast    | 1.00 | 6.00 (missed) |\n"
                "| slow    | 1.00 | 0.00 (missed) |\n"
                "\n"
                "- fast: highest rate meeting the SLO: 8 req/s (missed at 16)\n"
                "- slow: highest rate meeting the SLO: 4.5 req/s (missed at 8)\n") != std::string::npos);
  CHECK(md.find("16/s") == std::string::npos);
  CHECK(md.find("4.5/s") == std::string::npos);
  const auto j = json::parse(to_json(r));
  CHECK(j["levels"][0]["slo"]["e2e_p99_ms"] == 1500);
  CHECK(j["levels"][0]["rows"][1]["levels"][1]["goodput_rps"] == 0.0);
  CHECK(j["levels"][0]["rows"][1]["slo_search"]["max_rate"] == 4.5);
  CHECK(to_csv(r).find("rate,fast,ok,open,8/s,goodput_rps,6,") != std::string::npos);
}
