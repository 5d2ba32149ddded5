// The engine against specsim, the simulated SGLang server: every mode, both
// endpoints, speculative multi-token chunks, usage present and absent, and
// specsim's staged faults.

#include <doctest/doctest.h>

#include "../support/child.hpp"
#include "../support/skip.hpp"

#include <specctl/bench/bench.hpp>
#include <specctl/bench/workload.hpp>

#include <cmath>

using namespace specctl;
using namespace specctl::bench;
using namespace specctl::test;
using namespace std::chrono_literals;

namespace {

// Model time runs this much faster than real time: tests stay short.
const std::string k_speed = "20";

RunOptions quick(int max_tokens, Endpoint endpoint = Endpoint::completions) {
  RunOptions o;
  o.prompts = plain_requests({"Explain the theory of general relativity in detail.", "Write a B-tree in Rust."});
  o.request.endpoint = endpoint;
  o.request.max_tokens = max_tokens;
  o.request.timeout = 60s;
  o.warmup = 1;
  return o;
}

const std::vector<std::string> k_eagle3 = {"--speculative-algorithm",        "EAGLE3",
                                           "--speculative-num-steps",        "2",
                                           "--speculative-eagle-topk",       "1",
                                           "--speculative-num-draft-tokens", "3",
                                           "--speculative-draft-model-path", "/models/draft"};

// Says why and is false when there is no specsim (ctest reports the case skipped).
bool have_specsim() {
  if (specctl::test::pretend_missing("specsim") || specsim_binary().empty()) {
    specctl::test::skip("no specsim (this build has no specsim target: src/main/specsim.cpp is missing)");
    return false;
  }
  return true;
}

std::vector<std::string> with(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

} // namespace

TEST_CASE("specsim: every mode on both endpoints, exact token counts") {
  if (!have_specsim()) {
    return;
  }
  Specsim sim({"--sim-speed", k_speed});
  for (Endpoint endpoint : {Endpoint::completions, Endpoint::chat}) {
    CAPTURE(endpoint_name(endpoint));
    const Target target{sim.url(), "", ""};
    const auto single = run_single_stream(target, SingleStreamOptions{quick(48, endpoint), 2});
    REQUIRE(single.runs.size() == 2);
    for (const auto& run : single.runs) {
      CHECK(run.ok);
      CHECK(run.output_tokens == 48);
      CHECK(run.tok_s > 0);
    }
    CHECK(single.mean > 0);

    const auto closed = run_concurrency(target, ConcurrencyOptions{quick(32, endpoint), {1, 4}, 8});
    REQUIRE(closed.levels.size() == 2);
    for (const auto& level : closed.levels) {
      CHECK(level.completed == 8);
      CHECK(level.failed == 0);
      CHECK(level.output_tokens == 8 * 32);
      CHECK(level.tokens_from_chunks == 0);
      CHECK(level.tokens_per_chunk == doctest::Approx(1.0));
      CHECK(level.ttft_ms.count == 8);
      CHECK(level.itl_ms.count == 8 * 31);
    }
    // Four streams share the batch: each is slower, together they are faster.
    CHECK(closed.levels[1].output_tok_s > closed.levels[0].output_tok_s);

    const auto open = run_rate(target, RateOptions{quick(16, endpoint), {20.0}, 1s, 8, 1.0, 5});
    const auto& level = open.levels.at(0);
    CHECK(level.requests == static_cast<int>(arrival_times(20.0, 1.0, 1.0, 5).size()));
    CHECK(level.completed == level.requests);
    CHECK(level.output_tokens == 16 * level.completed);
  }
}

TEST_CASE("specsim: EAGLE-3 sends several tokens per chunk and usage keeps the count exact") {
  if (!have_specsim()) {
    return;
  }
  Specsim sim(with({"--sim-speed", k_speed}, k_eagle3));
  const Target target{sim.url(), "", ""};
  SUBCASE("usage present") {
    const auto level = run_concurrency(target, ConcurrencyOptions{quick(64), {2}, 4}).levels.at(0);
    CHECK(level.completed == 4);
    CHECK(level.output_tokens == 4 * 64);
    CHECK(level.tokens_from_chunks == 0);
    // Accept length about 2: clearly more than one token per chunk.
    CHECK(level.tokens_per_chunk > 1.3);
    CHECK(level.token_latency_ms.p50 < level.itl_ms.p50);
  }
  SUBCASE("usage absent: counted chunks are a flagged lower bound") {
    auto options = quick(64);
    options.request.include_usage = false;
    const auto level = run_concurrency(target, ConcurrencyOptions{options, {2}, 4}).levels.at(0);
    CHECK(level.completed == 4);
    CHECK(level.tokens_from_chunks == 4);
    CHECK(level.output_tokens < 4 * 64);
    REQUIRE_FALSE(level.warnings.empty());
    CHECK(level.warnings[0].find("counted from content chunks") != std::string::npos);
  }
}

TEST_CASE("specsim: staged faults are counted by kind") {
  if (!have_specsim()) {
    return;
  }
  SUBCASE("http-500 on half the requests") {
    Specsim sim({"--sim-speed", k_speed, "--sim-fault", "http-500:0.5"});
    auto options = quick(8);
    options.warmup = 0;
    const auto level = run_concurrency(Target{sim.url(), "", ""}, ConcurrencyOptions{options, {2}, 10}).levels.at(0);
    CHECK(level.failures_of(FailureKind::http_status) == 5);
    CHECK(level.completed == 5);
  }
  SUBCASE("cut streams") {
    Specsim sim({"--sim-speed", k_speed, "--sim-fault", "cut-stream:0.5"});
    auto options = quick(16);
    options.warmup = 0;
    const auto level = run_concurrency(Target{sim.url(), "", ""}, ConcurrencyOptions{options, {2}, 10}).levels.at(0);
    CHECK(level.failures_of(FailureKind::cut_stream) == 5);
    CHECK(level.completed == 5);
    CHECK(level.output_tokens == 5 * 16);
  }
  SUBCASE("garbled events") {
    Specsim sim({"--sim-speed", k_speed, "--sim-fault", "garbled:0.05"});
    auto options = quick(40);
    options.warmup = 0;
    const auto level = run_concurrency(Target{sim.url(), "", ""}, ConcurrencyOptions{options, {2}, 10}).levels.at(0);
    // 400 events, one in twenty broken. Interleaved streams can make the
    // broken ones fall on the same requests, so only a floor is certain.
    CHECK(level.failures_of(FailureKind::malformed_event) >= 3);
    CHECK(level.failed == level.failures_of(FailureKind::malformed_event));
    CHECK(level.completed + level.failed == 10);
  }
  SUBCASE("a slow first token shows in TTFT only") {
    // Two seconds of model time at speed 20: 100 ms.
    Specsim sim({"--sim-speed", k_speed, "--sim-fault", "slow-first-token:2s"});
    const auto level = run_concurrency(Target{sim.url(), "", ""}, ConcurrencyOptions{quick(8), {2}, 4}).levels.at(0);
    CHECK(level.completed == 4);
    CHECK(level.ttft_ms.min >= 100.0);
    CHECK(level.itl_ms.p50 < 100.0);
  }
  SUBCASE("a server that dies mid-run") {
    Specsim sim({"--sim-speed", k_speed, "--sim-fault", "die-after:3"});
    auto options = quick(32);
    options.warmup = 0;
    options.request.timeout = 10s;
    const auto start = std::chrono::steady_clock::now();
    const auto level = run_concurrency(Target{sim.url(), "m", ""}, ConcurrencyOptions{options, {1}, 6}).levels.at(0);
    CHECK(std::chrono::steady_clock::now() - start < 30s);
    CHECK(level.requests == 6);
    CHECK(level.completed == 3);
    CHECK(level.failed == 3);
    CHECK(level.failures_of(FailureKind::timeout) == 0);
  }
}
