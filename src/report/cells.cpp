#include "cells.hpp"

#include <specctl/util/text.hpp>

#include <algorithm>
#include <cmath>
#include <fmt/format.h>

namespace specctl::report::detail {

std::string level_label(bool rate, double level) {
  return rate ? fmt::format("{:g}/s", level) : fmt::format("c{:g}", level);
}

std::string fixed(std::optional<double> value, int decimals) {
  return value && std::isfinite(*value) ? fmt::format("{:.{}f}", *value, decimals) : "-";
}

std::string times(std::optional<double> ratio) {
  return ratio && std::isfinite(*ratio) ? fmt::format("{:.2f}×", *ratio) : "-";
}

std::string interval(const std::optional<Ratio>& ratio) {
  if (!ratio || !ratio->low || !ratio->high || !std::isfinite(*ratio->low) || !std::isfinite(*ratio->high)) {
    return "-";
  }
  return fmt::format("[{:.2f}, {:.2f}]", *ratio->low, *ratio->high);
}

std::string csv_field(const std::string& value) {
  if (value.find_first_of(",\"\n\r") == std::string::npos) {
    return value;
  }
  std::string out = "\"";
  for (char c : value) {
    out += c == '"' ? std::string("\"\"") : std::string(1, c);
  }
  return out + "\"";
}

std::string xml_escape(std::string_view text) {
  std::string out;
  for (char c : text) {
    switch (c) {
    case '&':
      out += "&amp;";
      break;
    case '<':
      out += "&lt;";
      break;
    case '>':
      out += "&gt;";
      break;
    case '"':
      out += "&quot;";
      break;
    case '\'':
      out += "&apos;";
      break;
    default:
      // Control characters other than tab and newline are not allowed in XML 1.0.
      out += (static_cast<unsigned char>(c) < 0x20 && c != '\n' && c != '\t') ? '?' : c;
    }
  }
  return out;
}

std::string percent(std::optional<double> value) {
  return value ? fmt::format("{:+.1f}%", *value) : "-";
}

std::string crossover_text(const LevelsTable& table, const Crossover& crossover) {
  const auto& runs = crossover.runs;
  if (runs.empty()) {
    return "-";
  }
  auto label = [&](std::size_t i) { return table.label(i); };
  std::string out;
  if (runs.size() == 1) {
    switch (runs.front().verdict) {
    case Verdict::one_sample:
      return "one sample per level: no verdict";
    case Verdict::not_measured:
      return "-";
    default:
      return fmt::format("{} at all levels", verdict_name(runs.front().verdict));
    }
  }
  for (std::size_t k = 0; k < runs.size(); ++k) {
    const auto& run = runs[k];
    std::string where;
    if (run.first == run.last) {
      where = "at " + label(run.first);
    } else if (k == 0) {
      where = "up to " + label(run.last);
    } else if (k + 1 == runs.size()) {
      where = "from " + label(run.first);
    } else {
      where = fmt::format("at {}–{}", label(run.first), label(run.last));
    }
    out += fmt::format("{}{} {}", k == 0 ? "" : ", ", verdict_name(run.verdict), where);
  }
  if (crossover.estimate) {
    // An estimate: one decimal below 10, whole numbers above.
    out += fmt::format(" (1.00× at ≈{:.{}f})", *crossover.estimate, *crossover.estimate < 10 ? 1 : 0);
  }
  return out;
}

std::string verdict_text(Verdict verdict, const std::string& why) {
  std::string name(verdict_name(verdict));
  if (why.empty() || why == name) {
    return name;
  }
  if (verdict == Verdict::not_measured || (verdict == Verdict::inconclusive && why.starts_with("within"))) {
    return name + ": " + why;
  }
  return name;
}

std::string spread_text(const std::optional<Spread>& spread, int decimals) {
  if (!spread || !std::isfinite(spread->mean)) {
    return "-";
  }
  if (spread->n < 2 || !std::isfinite(spread->stdev)) {
    return fixed(spread->mean, decimals);
  }
  return fmt::format("{:.{}f} ± {:.{}f}", spread->mean, decimals, spread->stdev, decimals);
}

std::string failed_text(const Counts& counts) {
  return counts.failed > 0 ? fmt::format(" ({} of {} failed)", counts.failed, counts.requests) : "";
}

std::string ratio_text(const std::optional<Ratio>& ratio) {
  if (!ratio || !std::isfinite(ratio->value)) {
    return "-";
  }
  std::string out = times(ratio->value);
  if (interval(ratio) != "-") {
    out += " " + interval(ratio);
  }
  return out;
}

namespace {

// "x (a, b); y (c)": each distinct source with the variants that have it.
std::string grouped(const std::vector<std::pair<std::string, std::string>>& by_variant) {
  std::vector<std::pair<std::string, std::vector<std::string>>> groups;
  for (const auto& [source, variant] : by_variant) {
    if (source.empty()) {
      continue;
    }
    auto it = std::find_if(groups.begin(), groups.end(), [&](const auto& g) { return g.first == source; });
    if (it == groups.end()) {
      groups.push_back({source, {variant}});
    } else if (std::find(it->second.begin(), it->second.end(), variant) == it->second.end()) {
      it->second.push_back(variant);
    }
  }
  std::vector<std::string> everyone;
  for (const auto& [source, variant] : by_variant) {
    if (std::find(everyone.begin(), everyone.end(), variant) == everyone.end()) {
      everyone.push_back(variant);
    }
  }
  if (groups.size() == 1 && groups.front().second.size() == everyone.size()) {
    return groups.front().first;
  }
  std::string out;
  for (const auto& [source, variants] : groups) {
    std::string names;
    for (const auto& v : variants) {
      names += (names.empty() ? "" : ", ") + v;
    }
    out += fmt::format("{}{} ({})", out.empty() ? "" : "; ", source, names);
  }
  return out;
}

std::string token_source_text(const std::string& source) {
  if (source == "chunks") {
    return "content chunks counted (no usage came: a lower bound)";
  }
  if (source == "mixed") {
    return "usage, and chunks counted where no usage came";
  }
  return source == "usage" ? "the server's usage" : source;
}

std::string sources_line(const std::vector<std::pair<std::string, std::string>>& accept,
                         const std::vector<std::pair<std::string, std::string>>& tokens, const std::string& samples) {
  std::string out = "Sources: " + samples;
  if (auto t = grouped(tokens); !t.empty()) {
    out += "; output tokens from " + t;
  }
  if (auto a = grouped(accept); !a.empty()) {
    out += "; accept length from " + a;
  }
  return out + ".";
}

} // namespace

std::string sources_text(const SingleStreamTable& table) {
  std::vector<std::pair<std::string, std::string>> accept;
  std::vector<std::pair<std::string, std::string>> tokens;
  int most = 0;
  for (const auto& row : table.rows) {
    accept.emplace_back(row.sources.accept_length, row.variant);
    tokens.emplace_back(token_source_text(row.sources.tokens), row.variant);
    most = std::max(most, row.tok_s ? row.tok_s->n : 0);
  }
  return sources_line(
      accept, tokens,
      fmt::format("tok/s is the mean of each variant's successful runs (n, up to {}), one request each", most));
}

std::string sources_text(const LevelsTable& table) {
  std::vector<std::pair<std::string, std::string>> accept;
  std::vector<std::pair<std::string, std::string>> tokens;
  for (const auto& row : table.rows) {
    for (const auto& f : row.levels) {
      accept.emplace_back(f.sources.accept_length, row.variant);
      tokens.emplace_back(token_source_text(f.sources.tokens), row.variant);
    }
  }
  std::string samples =
      table.repeats > 1
          ? fmt::format("each level measured {} times, interleaved (every level, then again); figures are means over "
                        "the repeats, ± their stdev",
                        table.repeats)
          : "each level measured once: one sample, no interval and no verdict";
  return sources_line(accept, tokens, samples);
}

std::string category_figure(std::optional<double> value, int decimals) {
  return value && std::isfinite(*value) ? fmt::format("{:.{}f}", *value, decimals) : "—";
}

std::string category_cell(const std::optional<CategoryFigures>& figures) {
  if (!figures) {
    return "—";
  }
  return category_figure(figures->accept_length, 2) + " · " + category_figure(figures->tok_s, 1) +
         failed_text(figures->counts);
}

std::string category_title(const CategoryTable& table) {
  return table.level.empty() ? table.benchmark + " (single stream)" : table.benchmark + " at " + table.level;
}

std::string category_note(const CategoryTable& table) {
  std::vector<std::pair<std::string, std::string>> accept;
  for (const auto& row : table.rows) {
    accept.emplace_back(row.accept_length_source, row.variant);
  }
  // tok/s here is per request, so a reader must not hold it against a level's throughput.
  std::string out = "tok/s per request: output tokens / end-to-end time of each completed request, averaged over the "
                    "category (not the throughput above)";
  if (table.repeats > 1) {
    out += fmt::format("; means over the level's {} repeats, of those that have the figure", table.repeats);
  }
  auto sources = grouped(accept);
  out += sources.empty() ? "; no accept length per category was reported" : "; accept length from " + sources;
  return out + "; —: not reported.";
}

const std::vector<std::pair<std::string, std::string>>& glossary() {
  static const std::vector<std::pair<std::string, std::string>> k_terms = {
      {"tok/s", "output tokens of completed requests / wall time (single stream: each run's tokens / its end-to-end "
                "time, averaged over runs)"},
      {"TTFT", "time to first token: from sending a request to its first content chunk"},
      {"TPOT", "time per output token after the first: (end-to-end - TTFT) / (tokens - 1), per request"},
      {"ITL", "inter-token latency: the gap between consecutive content chunks of a request"},
      {"accept length", "tokens a speculative step emits on average: 1 + accepted draft tokens / verify passes, as "
                        "the server counts them (its source is named under each table)"},
      {"speedup", "a variant's mean tok/s / the baseline's, with its 95% confidence interval (delta method, "
                  "Welch-Satterthwaite degrees of freedom)"},
      {"verdict", "faster or slower only when the interval excludes 1.00 and the difference exceeds the A/A noise; "
                  "one sample a side gives a ratio and no verdict; a benchmark with too many failed requests is not "
                  "measured"},
      {"A/A", "the baseline measured again at the end of the sweep: how far two runs of the same thing differ"},
  };
  return k_terms;
}

std::string verdict_line(const Report& report) {
  auto ok = std::count_if(report.variants.begin(), report.variants.end(),
                          [](const auto& v) { return v.status == VariantStatus::ok; });
  auto met =
      std::count_if(report.expectations.begin(), report.expectations.end(), [](const auto& e) { return e.reproduced; });
  std::string out =
      fmt::format("{}: {}/{} variants ok", report.passed() ? "passed" : "FAILED", ok, report.variants.size());
  if (!report.expectations.empty()) {
    out += fmt::format(", {}/{} expectations reproduced", met, report.expectations.size());
  }
  return out;
}

std::string tok_s_cell(const SingleStreamRow& row) {
  return fixed(row.tok_s ? std::optional(row.tok_s->mean) : std::nullopt, 1);
}

std::string tok_s_cell(const LevelFigures& level) {
  return spread_text(level.tok_s) + failed_text(level.counts);
}

std::string slo_text(const Slo& slo) {
  std::vector<std::string> bounds;
  for (const auto& [metric, bound] : slo) {
    bounds.push_back(fmt::format("{} ≤ {:g}", metric, bound));
  }
  return util::join(bounds, ", ");
}

std::string goodput_cell(const LevelFigures& level) {
  if (!level.goodput_rps) {
    return "-";
  }
  return fixed(level.goodput_rps, 2) + (level.slo_met == false ? " (missed)" : "");
}

std::string search_text(const SloSearchFigures& search) {
  if (!search.max_rate) {
    return search.missed_at ? fmt::format("no rate met the SLO (missed at {:g} req/s)", *search.missed_at)
                            : std::string("no rate was judged against the SLO");
  }
  if (!search.missed_at) {
    return fmt::format("highest rate meeting the SLO: at least {:g} req/s (none measured missed)", *search.max_rate);
  }
  return fmt::format("highest rate meeting the SLO: {:g} req/s (missed at {:g})", *search.max_rate, *search.missed_at);
}

std::string metric_cell(std::optional<double> value) {
  return value ? fmt::format("{:.4g}", *value) : "-";
}

} // namespace specctl::report::detail

namespace specctl::report {

std::string expectation_text(const ExpectationRow& e) {
  std::string where = e.level.empty() ? "" : " " + e.level;
  std::string subject = fmt::format("{} {}{} {}", e.variant, e.benchmark, where, e.metric);
  if (!e.measured) {
    return fmt::format("{}: not measured ({:g} expected)", subject, e.expected);
  }
  return fmt::format("{}: {:.4g} vs {:g} expected ({:+.1f}%, {} {:g}%)", subject, *e.measured, e.expected,
                     e.delta_pct.value_or(0), e.reproduced ? "within" : "outside", e.tolerance_pct);
}

} // namespace specctl::report
