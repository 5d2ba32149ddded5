#include <specctl/report/results.hpp>
#include <specctl/report/slo.hpp>
#include <specctl/util/parse.hpp>

#include <algorithm>
#include <cmath>
#include <fmt/format.h>

namespace specctl::report {

namespace {

// The tighter of an existing bound and a new one.
void tighten(std::optional<double>& bound, double value) {
  bound = bound ? std::min(*bound, value) : value;
}

// "2310" for a TTFT, "52.4" for a TPOT: enough digits to see it is over the bound.
std::string latency_text(double ms) {
  return std::abs(ms) >= 100 ? fmt::format("{:.0f}", ms) : fmt::format("{:.3g}", ms);
}

} // namespace

bench::RequestBounds request_bounds(const Slo& slo) {
  bench::RequestBounds out;
  for (const auto& [metric, bound] : slo) {
    if (metric.starts_with("ttft_")) {
      tighten(out.ttft_ms, bound);
    } else if (metric.starts_with("tpot_")) {
      tighten(out.tpot_ms, bound);
    } else if (metric.starts_with("e2e_")) {
      tighten(out.e2e_ms, bound);
    }
  }
  return out;
}

std::vector<std::string> slo_missed(const std::vector<const nlohmann::json*>& measurements, const Slo& slo,
                                    double max_failed_pct) {
  std::vector<std::string> out;
  int requests = 0;
  int failed = 0;
  for (const auto* m : measurements) {
    if (m->is_object()) {
      requests += m->value("requests", 0);
      failed += m->value("failed", 0);
    }
  }
  if (auto why = too_many_failed(requests, failed, max_failed_pct)) {
    out.push_back(std::move(*why));
  }
  for (const auto& [metric, bound] : slo) {
    double sum = 0;
    int n = 0;
    for (const auto* m : measurements) {
      if (auto it = m->find(metric); it != m->end() && it->is_number() && std::isfinite(it->get<double>())) {
        sum += it->get<double>();
        ++n;
      }
    }
    if (n == 0) {
      out.push_back(metric + " not measured");
    } else if (sum / n > bound) {
      out.push_back(fmt::format("{} {} > {:g}", metric, latency_text(sum / n), bound));
    }
  }
  return out;
}

void add_slo_metrics(nlohmann::json& metrics, const bench::LevelResult& level, const Slo& slo, double max_failed_pct) {
  const int good = bench::good_requests(level.records, request_bounds(slo));
  metrics["goodput_rps"] = finite_or_null(level.duration_s > 0 ? good / level.duration_s : 0.0);
  auto missed = slo_missed({&metrics}, slo, max_failed_pct);
  metrics["slo_met"] = missed.empty();
  metrics["slo_missed"] = std::move(missed);
}

SloSearch search_slo(const std::vector<SloPoint>& judged, int steps_left) {
  SloSearch out;
  for (const auto& p : judged) {
    if (p.met && (!out.max_rate || p.rate > *out.max_rate)) {
      out.max_rate = p.rate;
    }
  }
  for (const auto& p : judged) {
    if (!p.met && (!out.max_rate || p.rate > *out.max_rate) && (!out.missed_at || p.rate < *out.missed_at)) {
      out.missed_at = p.rate;
    }
  }
  if (!out.max_rate) {
    out.why = out.missed_at
                  ? fmt::format("no rate met the SLO, not even the lowest measured, {:g} req/s", *out.missed_at)
                  : std::string("no rate was measured");
    return out;
  }
  if (!out.missed_at) {
    const bool all = std::all_of(judged.begin(), judged.end(), [](const SloPoint& p) { return p.met; });
    out.why = fmt::format("{} {:g} req/s, met the SLO: a lower bound on the highest rate that does",
                          all ? "every rate measured, up to" : "the highest rate measured (a lower one missed),",
                          *out.max_rate);
    return out;
  }
  const double low = *out.max_rate;
  const double high = *out.missed_at;
  if (high - low < k_search_resolution * low) {
    out.why = fmt::format("the highest rate that meets the SLO is between {:g} and {:g} req/s, less than {:g}% apart",
                          low, high, k_search_resolution * 100);
  } else if (steps_left <= 0) {
    out.why = fmt::format("the highest rate that meets the SLO is between {:g} and {:g} req/s; the bisection's steps "
                          "are spent",
                          low, high);
  } else {
    // To 4 significant digits: a rate people can read and write back (4.4, not
    // 4.3999999999999995); the 5% stop keeps it strictly between the two.
    const double middle = (low + high) / 2;
    out.next = util::parse_number<double>(fmt::format("{:.4g}", middle)).value_or(middle);
    out.why = fmt::format("bisecting between {:g} and {:g} req/s", low, high);
  }
  return out;
}

} // namespace specctl::report
