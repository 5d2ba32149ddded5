// The one verdict rule of the report and of `specctl compare`: faster or
// slower needs a 95% interval that excludes 1.00 and a difference beyond the
// A/A noise.

#include <specctl/report/report.hpp>
#include <specctl/report/stats.hpp>

#include <algorithm>
#include <cmath>
#include <fmt/format.h>

namespace specctl::report {

std::string_view verdict_name(Verdict verdict) {
  switch (verdict) {
  case Verdict::faster:
    return "faster";
  case Verdict::slower:
    return "slower";
  case Verdict::inconclusive:
    return "inconclusive";
  case Verdict::one_sample:
    return "one sample";
  case Verdict::not_measured:
    return "not measured";
  case Verdict::baseline:
    return "baseline";
  case Verdict::repeat:
    return "A/A";
  }
  return "?";
}

std::optional<Ratio> compare_spreads(const Spread& a, const Spread& b) {
  if (auto ci = ratio_interval(a, b)) {
    return Ratio{ci->ratio, ci->low, ci->high};
  }
  if (!(b.mean > 0)) {
    return std::nullopt;
  }
  return Ratio{a.mean / b.mean, std::nullopt, std::nullopt};
}

Judgement judge(const std::optional<Spread>& a, const std::optional<Spread>& b, std::optional<double> noise) {
  Judgement out;
  if (!a || !b) {
    out.why = !a ? "not measured" : "the baseline did not measure it";
    return out;
  }
  out.ratio = compare_spreads(*a, *b);
  if (!out.ratio) {
    out.why = "the baseline measured nothing";
    return out;
  }
  const Ratio& r = *out.ratio;
  if (!r.low || !r.high) {
    out.verdict = Verdict::one_sample;
    out.why = fmt::format("one sample {}: no interval, no verdict", a->n < 2 && b->n < 2 ? "a side"
                                                                    : a->n < 2           ? "here"
                                                                                         : "in the baseline");
    return out;
  }
  out.verdict = *r.low > 1.0 ? Verdict::faster : *r.high < 1.0 ? Verdict::slower : Verdict::inconclusive;
  if (out.verdict == Verdict::inconclusive) {
    out.why = "the 95% interval holds 1.00";
  } else if (noise && std::abs(r.value - 1.0) <= *noise) {
    out.verdict = Verdict::inconclusive;
    out.why = fmt::format("within the A/A noise (±{:.1f}%)", *noise * 100.0);
  }
  return out;
}

Crossover crossover_of(const LevelsTable& table, const LevelsRow& row) {
  Crossover out;
  for (std::size_t i = 0; i < row.levels.size(); ++i) {
    Verdict v = row.levels[i].verdict;
    if (!out.runs.empty() && out.runs.back().verdict == v) {
      out.runs.back().last = i;
    } else {
      out.runs.push_back({v, i, i});
    }
  }
  if (std::all_of(out.runs.begin(), out.runs.end(), [](const auto& r) { return r.verdict == Verdict::not_measured; })) {
    out.runs.clear();
    return out;
  }
  // Faster from the lowest level on, then slower: estimate where 1.0 is crossed.
  if (out.runs.size() >= 2 && out.runs.front().verdict == Verdict::faster) {
    for (std::size_t k = 1; k < out.runs.size(); ++k) {
      if (out.runs[k].verdict != Verdict::slower) {
        continue;
      }
      std::size_t i1 = out.runs.front().last;
      std::size_t i2 = out.runs[k].first;
      double s1 = row.levels[i1].speedup->value;
      double s2 = row.levels[i2].speedup->value;
      double l1 = table.levels[i1];
      double l2 = table.levels[i2];
      if (s1 > 1.0 && s2 < 1.0) {
        double f = (s1 - 1.0) / (s1 - s2);
        out.estimate = l1 > 0 ? std::exp(std::log(l1) + f * (std::log(l2) - std::log(l1))) : l1 + f * (l2 - l1);
      }
      break;
    }
  }
  return out;
}

} // namespace specctl::report
