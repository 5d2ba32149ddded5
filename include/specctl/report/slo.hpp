#pragma once

// A benchmark's service-level objective (`slo:`) on its levels: the goodput of a
// level, whether the level met the SLO, and the search for the highest request
// rate that meets it (`bisect:`), as vLLM's `bench sweep serve_sla` searches it.
// The runner writes these figures into result.json; the report reads them back.

#include <specctl/bench/goodput.hpp>
#include <specctl/bench/result.hpp>

#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace specctl::report {

// Upper bounds on level metrics by name ("ttft_p99_ms" -> 2000), in the order written.
using Slo = std::vector<std::pair<std::string, double>>;

// The bounds a single request is held to. A ttft_*, tpot_* or e2e_* bound applies to
// each request's own TTFT, TPOT or E2E latency (the tightest bound of each, when
// several are given). An itl_* bound has no per-request meaning (a request has many
// gaps, and a long one is the percentile's business): it is judged on the level only.
bench::RequestBounds request_bounds(const Slo& slo);

// What misses the SLO over the measurements of one level (its repeats: metrics
// objects as level_metrics writes them): each bound against the mean of its metric
// over them, "ttft_p99_ms 2310 > 2000" or "e2e_p99_ms not measured", and more than
// max_failed_pct of their requests failed (too_many_failed's words). Empty: met.
std::vector<std::string> slo_missed(const std::vector<const nlohmann::json*>& measurements, const Slo& slo,
                                    double max_failed_pct);

// Adds to a level's metrics (level_metrics(level)) goodput_rps (requests that
// completed and met every per-request bound, per second of the level's duration,
// the duration output_tok_s and request_s divide by), slo_met and slo_missed.
void add_slo_metrics(nlohmann::json& metrics, const bench::LevelResult& level, const Slo& slo, double max_failed_pct);

// One request rate judged against the SLO (over its repeats).
struct SloPoint {
  double rate = 0;
  bool met = false;
};

// Bisection stops when the rates that met and missed are closer than this share of the lower.
inline constexpr double k_search_resolution = 0.05;

// Where the search for the highest rate that meets the SLO stands.
struct SloSearch {
  // The rate to measure next; unset: the search is over.
  std::optional<double> next;
  // The highest rate that met; unset when none did.
  std::optional<double> max_rate;
  // The lowest rate above max_rate that missed (the lowest rate measured when
  // none met); unset when none missed above it.
  std::optional<double> missed_at;
  // For people: what the figures say, or why the search goes on.
  std::string why;
};

// The next step of the search from every rate judged so far (the listed ones and
// those bisected, in any order) and the bisection steps left: the midpoint (to 4
// significant digits) between the highest rate that met and the lowest higher one
// that missed, while steps are
// left and the two are k_search_resolution or more apart. A pure function: the same
// judgements give the same answer.
SloSearch search_slo(const std::vector<SloPoint>& judged, int steps_left);

} // namespace specctl::report
