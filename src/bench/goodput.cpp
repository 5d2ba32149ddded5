#include <specctl/bench/goodput.hpp>

#include <cmath>

namespace specctl::bench {

bool meets_bounds(const RequestBounds& bounds, double ttft_ms, double e2e_ms, int output_tokens) {
  const double tpot = bench::tpot_ms(ttft_ms, e2e_ms, output_tokens);
  // NaN <= bound is false: a latency must be known to meet its bound.
  const auto within = [](const std::optional<double>& bound, double value) { return !bound || value <= *bound; };
  return within(bounds.ttft_ms, ttft_ms) && within(bounds.tpot_ms, tpot) && within(bounds.e2e_ms, e2e_ms);
}

int good_requests(const std::vector<RequestRecord>& records, const RequestBounds& bounds) {
  int good = 0;
  for (const auto& record : records) {
    if (record.ok() && meets_bounds(bounds, record.ttft_ms, record.e2e_ms, record.output_tokens)) {
      ++good;
    }
  }
  return good;
}

} // namespace specctl::bench
