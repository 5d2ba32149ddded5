#include <doctest/doctest.h>

#include <specctl/bench/bench.hpp>
#include <specctl/bench/result.hpp>
#include <specctl/bench/stats.hpp>

#include <cmath>

using namespace specctl::bench;

TEST_CASE("summaries match numpy") {
  // numpy.percentile([1..10], [50, 90, 99]) = 5.5, 9.1, 9.91; np.std = 2.8722813232690143
  std::vector<double> samples = {10, 9, 8, 7, 6, 5, 4, 3, 2, 1};
  const Summary s = summarize(samples);
  CHECK(s.count == 10);
  CHECK(s.mean == doctest::Approx(5.5));
  CHECK(s.p50 == doctest::Approx(5.5));
  CHECK(s.p90 == doctest::Approx(9.1));
  CHECK(s.p99 == doctest::Approx(9.91));
  CHECK(s.stdev == doctest::Approx(2.8722813232690143));
  CHECK(s.min == 1);
  CHECK(s.max == 10);
  CHECK(sample_stdev({1, 2, 3, 4}) == doctest::Approx(1.2909944487358056));
  CHECK(median({3, 1, 2}) == 2);
  CHECK(median({4, 1, 3, 2}) == 2.5);

  std::vector<double> one = {42};
  const Summary single = summarize(one);
  CHECK(single.p99 == 42);
  CHECK(single.stdev == 0);
  std::vector<double> none;
  CHECK(std::isnan(summarize(none).mean));
  CHECK(sample_stdev({5}) == 0);
}

TEST_CASE("aggregate: the metric definitions") {
  LevelResult level;
  level.duration_s = 2.0;
  RequestRecord a;
  a.output_tokens = 4;
  a.ttft_ms = 100;
  a.e2e_ms = 400;
  a.tpot_ms = 100;
  a.chunks = {{100'000, 0}, {200'000, 0}, {300'000, 0}, {400'000, 0}};
  RequestRecord b;
  // Two chunks of three tokens: speculative decoding.
  b.output_tokens = 6;
  b.ttft_ms = 50;
  b.e2e_ms = 350;
  b.tpot_ms = 60;
  b.chunks = {{50'000, 3}, {350'000, 3}};
  b.chunk_tokens_exact = true;
  RequestRecord c;
  c.failure = FailureKind::timeout;
  c.error = "timed out";
  RequestRecord d;
  d.failure = FailureKind::timeout;
  d.error = "timed out again";
  RequestRecord e;
  e.output_tokens = 2;
  e.token_source = TokenSource::chunks;
  e.ttft_ms = 10;
  e.e2e_ms = 20;
  e.tpot_ms = 10;
  e.chunks = {{10'000, 0}, {20'000, 0}};
  level.records = {a, b, c, d, e};
  aggregate(level);

  CHECK(level.requests == 5);
  CHECK(level.completed == 3);
  CHECK(level.failed == 2);
  CHECK(level.failures_of(FailureKind::timeout) == 2);
  CHECK(level.first_error[static_cast<std::size_t>(FailureKind::timeout)] == "timed out");
  CHECK(level.output_tokens == 12);
  CHECK(level.output_tok_s == doctest::Approx(6.0));
  CHECK(level.request_s == doctest::Approx(1.5));
  CHECK(level.tokens_from_chunks == 1);
  REQUIRE(level.warnings.size() == 1);
  CHECK(level.warnings[0].find("1 of 3 completed requests sent no usage") == 0);
  // ITL per chunk: 100, 100, 100 (a), 300 (b), 10 (e).
  CHECK(level.itl_ms.count == 5);
  CHECK(level.itl_ms.max == doctest::Approx(300));
  // Per token: b's 300 ms gap carried 3 tokens -> three samples of 100 ms.
  CHECK(level.token_latency_ms.count == 3 + 3 + 1);
  CHECK(level.token_latency_ms.max == doctest::Approx(100));
  CHECK(level.ttft_ms.count == 3);
  CHECK(level.tokens_per_chunk == doctest::Approx(12.0 / 8.0));
  // tokens / e2e: 10, 17.14, 100 tok/s.
  CHECK(level.per_user_tok_s == doctest::Approx((10.0 + 6 / 0.35 + 100.0) / 3));
}

TEST_CASE("aggregate warns when the client was the busy one") {
  LevelResult level;
  level.duration_s = 1.0;
  level.client_cpu_s = 0.9;
  aggregate(level);
  REQUIRE(level.warnings.size() == 1);
  CHECK(level.warnings[0].find("busy 90%") != std::string::npos);
}

TEST_CASE("arrival times: Poisson and gamma schedules") {
  const auto poisson = arrival_times(50, 1.0, 100, 7);
  // 5000 expected arrivals; a Poisson count has stdev ~71.
  CHECK(poisson.size() > 4700);
  CHECK(poisson.size() < 5300);
  CHECK(std::is_sorted(poisson.begin(), poisson.end()));
  CHECK(poisson.back() < 100);
  CHECK(arrival_times(50, 1.0, 100, 7) == poisson);
  CHECK(arrival_times(50, 1.0, 100, 8) != poisson);
  // Burstier arrivals keep the mean rate.
  const auto bursty = arrival_times(50, 0.25, 100, 7);
  CHECK(bursty.size() > 4000);
  CHECK(bursty.size() < 6000);
  CHECK(arrival_times(0, 1.0, 10, 1).empty());
  CHECK(default_requests(1) == 10);
  CHECK(default_requests(250) == 500);
}
