#include <doctest/doctest.h>

#include <specctl/bench/goodput.hpp>
#include <specctl/bench/vllm_json.hpp>

#include <cmath>

using namespace specctl::bench;

namespace {

RequestRecord record(double ttft_ms, double e2e_ms, int tokens, bool ok = true) {
  RequestRecord r;
  r.ttft_ms = ttft_ms;
  r.e2e_ms = e2e_ms;
  r.output_tokens = tokens;
  if (!ok) {
    r.failure = FailureKind::timeout;
  }
  return r;
}

} // namespace

TEST_CASE("goodput: a request meets its bounds at or below each, and a failed one never") {
  SUBCASE("TTFT just under, at and just over") {
    RequestBounds b{100.0, std::nullopt, std::nullopt};
    CHECK(meets_bounds(b, 99.9, 500, 10));
    CHECK(meets_bounds(b, 100.0, 500, 10));
    CHECK_FALSE(meets_bounds(b, 100.1, 500, 10));
  }
  SUBCASE("TPOT is (e2e - ttft) / (tokens - 1); an answer of one token has none, so it meets no TPOT bound") {
    RequestBounds b{std::nullopt, 10.0, std::nullopt};
    // (1090 - 100) / 99 = 10.0
    CHECK(meets_bounds(b, 100, 1090, 100));
    // (1091 - 100) / 99 = 10.01
    CHECK_FALSE(meets_bounds(b, 100, 1091, 100));
    // vLLM counts its TPOT as 0, which met any bound: a one-token answer after 5 s was "good".
    CHECK_FALSE(meets_bounds(b, 100, 5000, 1));
    CHECK_FALSE(meets_bounds(b, 100, 100.5, 1));
    CHECK_FALSE(meets_bounds(b, 100, 5000, 0));
    // Without a TPOT bound it is judged by the others alone.
    CHECK(meets_bounds(RequestBounds{200.0, std::nullopt, 6000.0}, 100, 5000, 1));
    CHECK(std::isnan(tpot_ms(100, 5000, 1)));
    CHECK(tpot_ms(100, 1090, 100) == doctest::Approx(10.0));
  }
  SUBCASE("E2E") {
    RequestBounds b{std::nullopt, std::nullopt, 2000.0};
    CHECK(meets_bounds(b, 10, 1999.9, 5));
    CHECK_FALSE(meets_bounds(b, 10, 2000.1, 5));
  }
  SUBCASE("every bound at once: one over is enough to miss") {
    RequestBounds b{100.0, 10.0, 2000.0};
    CHECK(meets_bounds(b, 100, 1090, 100));
    CHECK_FALSE(meets_bounds(b, 100.5, 1090, 100));
    CHECK_FALSE(meets_bounds(b, 100, 2000.5, 100));
  }
  SUBCASE("a latency that is not a number meets no bound on it, and no bound is met by anything") {
    CHECK_FALSE(meets_bounds(RequestBounds{100.0, std::nullopt, std::nullopt}, NAN, 500, 10));
    CHECK(meets_bounds(RequestBounds{}, NAN, NAN, 0));
    CHECK_FALSE(RequestBounds{}.any());
    CHECK(RequestBounds{std::nullopt, std::nullopt, 1.0}.any());
  }
  SUBCASE("good_requests counts completed requests within every bound") {
    RequestBounds b{100.0, std::nullopt, 2000.0};
    std::vector<RequestRecord> records = {
        record(50, 1000, 10),      // good
        record(150, 1000, 10),     // TTFT over
        record(50, 2500, 10),      // E2E over
        record(10, 20, 10, false), // failed: never good, however fast
        record(100, 2000, 10),     // at both bounds: good
    };
    CHECK(good_requests(records, b) == 2);
    CHECK(good_requests(records, RequestBounds{}) == 4);
    CHECK(good_requests({}, b) == 0);
  }
}

TEST_CASE("goodput: the vLLM-shaped file's request_goodput counts by the same rule") {
  VllmLevel level;
  level.duration_s = 2.0;
  level.goodput_ttft_ms = 100;
  level.goodput_tpot_ms = 10;
  const auto add = [&](double ttft, double e2e, int tokens, bool ok) {
    VllmRequestRecord r;
    r.ok = ok;
    r.ttft_ms = ttft;
    r.e2e_ms = e2e;
    r.output_tokens = tokens;
    level.requests.push_back(r);
  };
  add(100, 1090, 100, true); // at both bounds
  add(100, 1091, 100, true); // TPOT just over
  add(101, 200, 1, true);    // TTFT just over
  add(50, 60, 1, false);     // failed
  add(20, 5000, 1, true);    // one token: no TPOT, so not within the TPOT bound
  CHECK(vllm_result_json(level)["request_goodput"].get<double>() == doctest::Approx(0.5));
}
