#include <doctest/doctest.h>

#include "../../src/run/bench_client.hpp"

#include <specctl/bench/report.hpp>
#include <specctl/bench/wire.hpp>
#include <specctl/run/bench_job.hpp>

#include <cmath>
#include <limits>

using namespace specctl::bench;
using nlohmann::json;

namespace {

RequestRecord record_of(int index, bool ok) {
  RequestRecord r;
  r.index = index;
  r.prompt = index % 3;
  r.start_s = 0.125 * index + 1e-9;
  r.send_lag_ms = 0.333333333333;
  if (!ok) {
    r.failure = FailureKind::cut_stream;
    r.error = "the stream ended before data: [DONE] (\"quoted\")";
    r.ttft_ms = std::numeric_limits<double>::quiet_NaN();
    r.tpot_ms = std::numeric_limits<double>::quiet_NaN();
  } else {
    r.ttft_ms = 41.000000000001;
    r.tpot_ms = 10.1;
  }
  r.http_status = 200;
  r.response_id = "cmpl-" + std::to_string(index);
  r.finish_reason = "length";
  r.output_tokens = 32;
  r.token_source = index == 2 ? TokenSource::chunks : TokenSource::usage;
  r.prompt_tokens = index == 1 ? -1 : 17;
  r.e2e_ms = 350.25;
  r.chunks = {{1000, 1}, {11'000, 2}, {4'000'000'000u, 3}};
  r.chunk_tokens_exact = index % 2 == 0;
  r.resends = index == 3 ? 1 : 0;
  r.cached_tokens = 5;
  r.server_predicted_n = -1;
  r.server_tok_s = 97.5;
  r.draft_tokens = 12;
  r.draft_accepted = 9;
  return r;
}

LevelResult wire_level(int concurrency) {
  LevelResult level;
  level.concurrency = concurrency;
  for (int i = 0; i < 5; ++i) {
    level.records.push_back(record_of(i, i != 4));
  }
  level.duration_s = 1.75;
  level.client_cpu_s = 0.01;
  level.events = 77;
  aggregate(level);
  level.warnings.push_back("a warning of the engine's own");
  level.interrupted = true;
  level.tunnel_rtt_ms = 12.5;
  level.remeasured = {"the control connection stalled"};
  return level;
}

// Every field, compared through the lossless form: equal wires are equal structs.
void check_same(const LevelResult& a, const LevelResult& b) {
  CHECK(to_wire(a).dump() == to_wire(b).dump());
  // And the report form, which the result files hold, is the same too.
  CHECK(to_json(a).dump() == to_json(b).dump());
}

} // namespace

TEST_CASE("bench results survive the trip through JSON text unchanged") {
  SUBCASE("a closed-loop level with failures, NaN latencies and every record") {
    LevelResult level = wire_level(4);
    json wire = json::parse(to_wire(level).dump());
    LevelResult back = level_from_wire(wire);
    check_same(level, back);
    REQUIRE(back.records.size() == 5);
    CHECK(std::isnan(back.records[4].ttft_ms));
    CHECK(back.records[4].failure == FailureKind::cut_stream);
    CHECK(back.records[0].chunks[2].at_us == 4'000'000'000u);
    CHECK(back.records[0].ttft_ms == level.records[0].ttft_ms);
    CHECK(back.failures_of(FailureKind::cut_stream) == 1);
    CHECK(back.tunnel_rtt_ms == 12.5);
    CHECK(back.remeasured == level.remeasured);
    CHECK(back.warnings == level.warnings);
    // Four completed requests, three of which said their prompt had 17 tokens.
    CHECK(level.prompt_tokens == 51);
    CHECK(back.prompt_tokens == 51);
    CHECK(back.cached_prompt_tokens == 20);
    CHECK(to_json(back)["server_reported"]["prompt_tokens"] == 51);
    CHECK(request_to_json(back.records[1], "c4").dump() == request_to_json(level.records[1], "c4").dump());
  }
  SUBCASE("an open-loop level at an infinite rate keeps its infinity") {
    RateResult rates;
    LevelResult level = wire_level(8);
    level.rate = std::numeric_limits<double>::infinity();
    level.max_concurrency = 8;
    level.burstiness = 0.5;
    rates.levels.push_back(level);
    rates.ended = Ended::timed_out;
    RateResult back = rate_from_wire(json::parse(to_wire(rates).dump()));
    REQUIRE(back.levels.size() == 1);
    CHECK(std::isinf(*back.levels[0].rate));
    CHECK(back.levels[0].max_concurrency == 8);
    CHECK(back.ended == Ended::timed_out);
    check_same(level, back.levels[0]);
  }
  SUBCASE("single stream runs and concurrency levels") {
    SingleStreamResult single;
    single.level = wire_level(1);
    single.runs = {{1, true, 91.5, 95.25, 32, 41, 350}, {2, false, 0, 0, 0, NAN, NAN}};
    single.mean = 91.5;
    single.median = 91.5;
    single.stdev = 0;
    single.ended = Ended::interrupted;
    SingleStreamResult back = single_stream_from_wire(json::parse(to_wire(single).dump()));
    CHECK(to_json(back).dump() == to_json(single).dump());
    CHECK(back.ended == Ended::interrupted);
    CHECK(std::isnan(back.runs[1].ttft_ms));

    ConcurrencyResult levels;
    levels.levels = {wire_level(1), wire_level(10)};
    ConcurrencyResult again = concurrency_from_wire(json::parse(to_wire(levels).dump()));
    REQUIRE(again.levels.size() == 2);
    check_same(levels.levels[1], again.levels[1]);
  }
  SUBCASE("a broken document names the field") {
    json wire = to_wire(wire_level(2));
    wire.erase("completed");
    CHECK_THROWS_WITH_AS(level_from_wire(wire), doctest::Contains("\"completed\" is missing"), specctl::Error);
    wire = to_wire(wire_level(2));
    wire["records"][0]["ttft_ms"] = "fast";
    CHECK_THROWS_WITH_AS(level_from_wire(wire), doctest::Contains("\"ttft_ms\" is not a number"), specctl::Error);
  }
  SUBCASE("progress lines") {
    Progress p{"concurrency 10", 12, 20, 1, 4096, 2.5, 1638.4, false};
    Progress back = progress_from_wire(json::parse(to_wire(p).dump()));
    CHECK(back.phase == p.phase);
    CHECK(back.done == 12);
    CHECK(back.tok_s == p.tok_s);
  }
}

TEST_CASE("a bench job file carries everything the host needs") {
  specctl::run::BenchJob job;
  job.mode = specctl::run::BenchJob::Mode::rate;
  job.url = "http://127.0.0.1:30000";
  job.model = "kimi";
  job.request.endpoint = Endpoint::chat;
  job.request.max_tokens = 64;
  job.request.idle_timeout = std::chrono::seconds{7};
  job.prompts = plain_requests({"a", "b \"quoted\"\n"});
  job.prompts.push_back(WorkloadRequest{.id = "c7",
                                        .category = "code",
                                        .messages = {{"system", "be brief"}, {"user", "sort a list"}},
                                        .output_tokens = 33,
                                        .group = 2,
                                        .shared_bytes = 8});
  job.unique_prompts = false;
  job.prompt_tag = "decode r2";
  job.warmup = 2;
  job.deadline_s = 12.5;
  job.rates = {1.5, 4};
  job.duration = std::chrono::seconds{3};
  job.max_concurrency = 6;
  job.burstiness = 0.7;
  job.seed = 3;
  job.server_dir = "/state/tag";
  job.server_pid = 4242;
  job.server_log = "/state/tag/server.log";
  job.metrics_path = "/metrics";
  job.progress_file = "/state/tag/bench-1/progress.jsonl";
  job.result_file = "/state/tag/bench-1/result.json";
  auto back = specctl::run::bench_job_from_json(json::parse(to_json(job).dump()));
  CHECK(to_json(back) == to_json(job));
  CHECK(back.request.endpoint == Endpoint::chat);
  CHECK(back.request.idle_timeout == std::chrono::seconds{7});
  CHECK(back.prompts == job.prompts);
  CHECK_FALSE(back.unique_prompts);
  CHECK(back.prompt_tag == "decode r2");
  CHECK(*back.max_concurrency == 6);
  json wrong = to_json(job);
  wrong["format"] = "something else";
  CHECK_THROWS_AS(specctl::run::bench_job_from_json(wrong), specctl::Error);
}

TEST_CASE("whether a host can run this specctl: its machine, not its glibc, which the bundle brings") {
  using specctl::run::detail::host_incompatibility;
  CHECK_FALSE(host_incompatibility("x86_64", "x86_64"));
  CHECK(host_incompatibility("x86_64", "aarch64") ==
        std::string("the host is aarch64 and this specctl is built for x86_64"));
  CHECK(host_incompatibility("x86_64", "") == std::string("the host did not say its machine (uname -m)"));
  // This build's own machine is what a host is held against.
  CHECK_FALSE(specctl::run::detail::build_machine().empty());
}
