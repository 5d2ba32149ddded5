#pragma once

// Goodput: the requests that met every per-request latency bound of a service-level
// objective, as vLLM's `bench serve --goodput` counts them. One rule for specctl's own
// result (report::slo) and for the files it writes in vLLM's shape (vllm_json.hpp).

#include <specctl/bench/result.hpp>

#include <optional>
#include <vector>

namespace specctl::bench {

// Upper bounds on one request's latencies, in milliseconds; unset: not bounded.
struct RequestBounds {
  std::optional<double> ttft_ms;
  std::optional<double> tpot_ms;
  std::optional<double> e2e_ms;

  bool any() const { return ttft_ms || tpot_ms || e2e_ms; }
};

// Whether a completed request of these latencies met every bound. TPOT is tpot_ms()'s
// (result.hpp): a request of one token has none, so it meets no TPOT bound (vLLM counts
// it as 0). A bound is met when the latency is at most the bound; a latency that is not
// a number meets none.
bool meets_bounds(const RequestBounds& bounds, double ttft_ms, double e2e_ms, int output_tokens);

// The records that completed and met every bound; a failed request is never good.
int good_requests(const std::vector<RequestRecord>& records, const RequestBounds& bounds);

} // namespace specctl::bench
