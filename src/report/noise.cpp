// The A/A rows: the baseline against its repeat, metric by metric, and the
// note that says how far apart and how different the two were.

#include "noise.hpp"
#include "json_fields.hpp"

#include <specctl/report/results.hpp>
#include <specctl/util/duration.hpp>

#include <cmath>
#include <cstdio>
#include <ctime>
#include <fmt/format.h>

namespace specctl::report::detail {

namespace {

// The row of `name` in a table's rows, or nullptr.
template <typename Row> const Row* row_of(const std::vector<Row>& rows, const std::string& name) {
  for (const auto& row : rows) {
    if (row.variant == name) {
      return &row;
    }
  }
  return nullptr;
}

// Seconds since the epoch of "2026-11-20T22:00:00.000Z"; nullopt when it is not one.
std::optional<double> utc_seconds(const std::string& stamp) {
  std::tm tm{};
  double seconds = 0;
  if (std::sscanf(stamp.c_str(), "%4d-%2d-%2dT%2d:%2d:%lfZ", &tm.tm_year, &tm.tm_mon, &tm.tm_mday, &tm.tm_hour,
                  &tm.tm_min, &seconds) != 6) {
    return std::nullopt;
  }
  tm.tm_year -= 1900;
  tm.tm_mon -= 1;
  return static_cast<double>(timegm(&tm)) + seconds;
}

} // namespace

// The baseline against its repeat, metric by metric.
std::vector<NoiseRow> noise_rows(const Report& r) {
  std::vector<NoiseRow> out;
  auto add = [&](const std::string& benchmark, const std::string& level, const char* metric,
                 std::optional<double> first, std::optional<double> again) {
    NoiseRow row{benchmark, level, metric, first, again, std::nullopt};
    if (first && again && *first != 0) {
      row.difference_pct = (*again - *first) / *first * 100.0;
    }
    out.push_back(std::move(row));
  };
  auto mean = [](const std::optional<Spread>& s) { return s ? std::optional(s->mean) : std::nullopt; };
  for (const auto& t : r.single_stream) {
    const auto* first = row_of(t.rows, r.baseline);
    const auto* again = row_of(t.rows, r.repeat);
    if (first == nullptr || again == nullptr) {
      continue;
    }
    add(t.benchmark, "", "output_tok_s", mean(first->tok_s), mean(again->tok_s));
    add(t.benchmark, "", "ttft_ms", first->ttft_ms, again->ttft_ms);
    add(t.benchmark, "", "tpot_ms", first->tpot_ms, again->tpot_ms);
    if (first->energy.sampled || again->energy.sampled) {
      add(t.benchmark, "", "tok_per_j", mean(first->energy.tok_per_j), mean(again->energy.tok_per_j));
    }
  }
  for (const auto& t : r.levels) {
    const auto* first = row_of(t.rows, r.baseline);
    const auto* again = row_of(t.rows, r.repeat);
    if (first == nullptr || again == nullptr) {
      continue;
    }
    for (std::size_t i = 0; i < t.levels.size(); ++i) {
      const auto& a = first->levels[i];
      const auto& b = again->levels[i];
      add(t.benchmark, t.label(i), "output_tok_s", mean(a.tok_s), mean(b.tok_s));
      add(t.benchmark, t.label(i), "ttft_p50_ms", a.ttft_p50_ms, b.ttft_p50_ms);
      add(t.benchmark, t.label(i), "ttft_p99_ms", a.ttft_p99_ms, b.ttft_p99_ms);
      add(t.benchmark, t.label(i), "tpot_p50_ms", a.tpot_p50_ms, b.tpot_p50_ms);
      add(t.benchmark, t.label(i), "tpot_p99_ms", a.tpot_p99_ms, b.tpot_p99_ms);
      if (a.energy.sampled || b.energy.sampled) {
        add(t.benchmark, t.label(i), "tok_per_j", mean(a.energy.tok_per_j), mean(b.energy.tok_per_j));
      }
    }
  }
  return out;
}

// How far apart the two measurements of the baseline were, and the largest tok/s drift.
std::string noise_note(const RunData& data, const Report& r) {
  std::string when;
  auto first = data.results.find(r.baseline);
  auto again = data.results.find(r.repeat);
  if (first != data.results.end() && again != data.results.end()) {
    auto t1 = utc_seconds(json_text(dig(first->second, {"started"})));
    auto t2 = utc_seconds(json_text(dig(again->second, {"started"})));
    if (t1 && t2) {
      when = fmt::format(", {} later", util::format_duration(std::chrono::milliseconds(
                                           static_cast<std::int64_t>(std::abs(*t2 - *t1) * 1000))));
    }
  }
  const NoiseRow* widest = nullptr;
  for (const auto& row : r.noise) {
    if (row.metric == "output_tok_s" && row.difference_pct &&
        (widest == nullptr || std::abs(*row.difference_pct) > std::abs(*widest->difference_pct))) {
      widest = &row;
    }
  }
  std::string drift = widest == nullptr
                          ? "no tok/s figure on both sides"
                          : fmt::format("output tok/s moved {:+.1f}% ({}{}{})", *widest->difference_pct,
                                        widest->benchmark, widest->level.empty() ? "" : " ", widest->level);
  return fmt::format("noise: \"{}\" measured the baseline \"{}\" again{}; {} at most; a difference within the A/A "
                     "one is inconclusive",
                     r.repeat, r.baseline, when, drift);
}

} // namespace specctl::report::detail
