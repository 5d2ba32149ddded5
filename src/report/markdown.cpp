#include "cells.hpp"
#include "tuning.hpp"

#include <specctl/util/text_table.hpp>

#include <fmt/format.h>

namespace specctl::report {

namespace {

using detail::fixed;
using util::Align;
using util::TextTable;

std::string variants_section(const Report& r) {
  TextTable table(
      {{"variant"}, {"status"}, {"host"}, {"load s", Align::right}, {"accept len", Align::right}, {"reason"}});
  for (const auto& v : r.variants) {
    table.add_row({v.name, std::string(status_name(v.status)), v.host.empty() ? "-" : v.host, fixed(v.load_s, 1),
                   fixed(v.accept_length, 2),
                   v.reason.empty() && !v.repeat_of.empty() ? fmt::format("A/A: repeats {}", v.repeat_of) : v.reason});
  }
  return "## Variants\n\n" + table.markdown();
}

std::string single_stream_section(const SingleStreamTable& t) {
  const bool energy = detail::has_energy(t);
  std::vector<util::TableColumn> columns = {{"variant"},
                                            {"tok/s", Align::right},
                                            {"± stdev", Align::right},
                                            {"n", Align::right},
                                            {"failed", Align::right},
                                            {"speedup", Align::right},
                                            {"95% CI", Align::right},
                                            {"verdict"},
                                            {"accept len", Align::right},
                                            {"TTFT ms", Align::right},
                                            {"TPOT ms", Align::right}};
  if (energy) {
    columns.insert(columns.end(),
                   {{"tok/J", Align::right}, {"tok/J vs baseline", Align::right}, {"GPU W", Align::right}});
  }
  TextTable table(std::move(columns));
  std::string throttled;
  for (const auto& row : t.rows) {
    bool measured = row.tok_s.has_value();
    std::vector<std::string> cells = {
        row.variant,
        detail::tok_s_cell(row),
        fixed(measured ? std::optional(row.tok_s->stdev) : std::nullopt, 1),
        measured ? fmt::format("{}", row.tok_s->n) : "-",
        row.counts.requests > 0 ? fmt::format("{}/{}", row.counts.failed, row.counts.requests) : "-",
        row.verdict == Verdict::baseline
            ? "1.00×"
            : detail::times(row.speedup ? std::optional(row.speedup->value) : std::nullopt),
        detail::interval(row.speedup),
        detail::verdict_text(row.verdict, row.why),
        fixed(row.accept_length, 2),
        fixed(row.ttft_ms, 1),
        fixed(row.tpot_ms, 2)};
    if (energy) {
      cells.insert(cells.end(), {detail::tok_per_j_cell(row.energy), detail::tok_per_j_ratio_cell(row.energy),
                                 detail::power_cell(row.energy)});
      for (const auto& repeat : row.energy.throttled) {
        throttled += fmt::format("- **{}**: {}\n", row.variant, detail::throttle_text(repeat));
      }
    }
    table.add_row(std::move(cells));
  }
  std::string out = fmt::format("## {} (single stream)\n\n{}\n\n{}\n{}", t.benchmark, t.spec, table.markdown(),
                                detail::sources_text(t));
  if (energy) {
    out += "\n\n" + detail::energy_note(1) + (throttled.empty() ? "" : "\n\n" + throttled);
  }
  return out;
}

// A table of variants × levels whose cells `cell` writes.
template <typename Cell>
std::string level_grid(const LevelsTable& t, const std::string& title, Cell cell, bool with_crossover = false,
                       bool skip_baseline = false, const std::string& baseline = {}) {
  std::vector<util::TableColumn> columns = {{"variant"}};
  for (std::size_t i = 0; i < t.levels.size(); ++i) {
    columns.push_back({t.label(i), Align::right});
  }
  if (with_crossover) {
    columns.push_back({"crossover"});
  }
  TextTable table(std::move(columns));
  for (const auto& row : t.rows) {
    if (skip_baseline && row.variant == baseline) {
      continue;
    }
    std::vector<std::string> cells = {row.variant};
    for (const auto& f : row.levels) {
      cells.push_back(cell(f));
    }
    if (with_crossover) {
      cells.push_back(detail::crossover_text(t, row.crossover));
    }
    table.add_row(std::move(cells));
  }
  return table.empty() ? std::string() : fmt::format("{}:\n\n{}\n", title, table.markdown());
}

// tok/J beside tok/s: its figures, its ratio to the baseline's, the GPUs' power,
// and the levels whose GPUs throttled.
std::string energy_grids(const Report& r, const LevelsTable& t) {
  std::string out = level_grid(t, t.repeats > 1 ? "Output tok/J (mean ± stdev over repeats)" : "Output tok/J",
                               [](const LevelFigures& f) { return detail::tok_per_j_cell(f.energy); });
  if (!r.baseline.empty()) {
    out += level_grid(
        t, fmt::format("tok/J vs {} [95% CI], verdict", r.baseline),
        [](const LevelFigures& f) { return detail::tok_per_j_ratio_cell(f.energy); }, false, true, r.baseline);
  }
  out +=
      level_grid(t, "GPU power W (mean, all GPUs)", [](const LevelFigures& f) { return detail::power_cell(f.energy); });
  std::string throttled;
  for (const auto& row : t.rows) {
    for (std::size_t i = 0; i < row.levels.size(); ++i) {
      for (const auto& repeat : row.levels[i].energy.throttled) {
        throttled += fmt::format("- **{}** at {}: {}\n", row.variant, detail::throttle_where(t, i, repeat),
                                 detail::throttle_text(repeat));
      }
    }
  }
  return throttled.empty() ? out : out + "Throttled levels:\n\n" + throttled + "\n";
}

std::string levels_section(const Report& r, const LevelsTable& t) {
  std::string out = fmt::format("## {} ({})\n\n{}\n\n", t.benchmark, t.rate ? "request rate" : "concurrency", t.spec);
  out += level_grid(
      t, t.repeats > 1 ? "Output tok/s (mean ± stdev over repeats)" : "Output tok/s",
      [](const LevelFigures& f) { return detail::tok_s_cell(f); }, !r.baseline.empty());
  if (!r.baseline.empty()) {
    out += level_grid(
        t, fmt::format("Speedup vs {} [95% CI], verdict", r.baseline),
        [](const LevelFigures& f) {
          std::string verdict = detail::verdict_text(f.verdict, f.why);
          return f.speedup ? detail::ratio_text(f.speedup) + " " + verdict : verdict;
        },
        false, true, r.baseline);
  }
  if (detail::has_energy(t)) {
    out += energy_grids(r, t);
  }
  auto pair = [](std::optional<double> p50, std::optional<double> p99, int decimals) {
    return p50 || p99 ? fixed(p50, decimals) + " / " + fixed(p99, decimals) : std::string("-");
  };
  out +=
      level_grid(t, "TTFT p50 / p99 ms", [&](const LevelFigures& f) { return pair(f.ttft_p50_ms, f.ttft_p99_ms, 1); });
  out +=
      level_grid(t, "TPOT p50 / p99 ms", [&](const LevelFigures& f) { return pair(f.tpot_p50_ms, f.tpot_p99_ms, 2); });
  if (!t.slo.empty()) {
    out +=
        level_grid(t, fmt::format("Goodput req/s: requests meeting the SLO ({}) per second", detail::slo_text(t.slo)),
                   [](const LevelFigures& f) { return detail::goodput_cell(f); });
    std::string searches;
    for (const auto& row : t.rows) {
      if (row.search) {
        searches += fmt::format("- {}: {}\n", row.variant, detail::search_text(*row.search));
      }
    }
    out += searches.empty() ? "" : searches + "\n";
  }
  bool any_accept = false;
  for (const auto& row : t.rows) {
    for (const auto& f : row.levels) {
      any_accept |= f.accept_length.has_value();
    }
  }
  if (any_accept) {
    out += level_grid(t, "Accept length", [](const LevelFigures& f) { return fixed(f.accept_length, 2); });
  }
  out += detail::sources_text(t) + "\n";
  if (detail::has_energy(t)) {
    out += "\n" + detail::energy_note(t.repeats) + "\n";
  }
  return out;
}

// Categories as rows and variants as columns: reading across a row compares the
// variants on one kind of prompt, reading down one shows where speculation helps.
std::string categories_section(const Report& r) {
  std::string out = "## Per category\n\nThe workload's prompt categories one by one, a column per variant; each cell "
                    "is accept length · tok/s per request.\n\n";
  for (const auto& t : r.categories) {
    std::vector<util::TableColumn> columns = {{"category"}};
    for (const auto& row : t.rows) {
      columns.push_back({row.variant, Align::right});
    }
    TextTable table(std::move(columns));
    for (std::size_t i = 0; i < t.categories.size(); ++i) {
      std::vector<std::string> cells = {t.categories[i]};
      for (const auto& row : t.rows) {
        cells.push_back(detail::category_cell(row.categories[i]));
      }
      table.add_row(std::move(cells));
    }
    out += fmt::format("### {}\n\n{}\n{}\n\n", detail::category_title(t), table.markdown(), detail::category_note(t));
  }
  return out;
}

std::string noise_section(const Report& r) {
  TextTable table({{"benchmark"},
                   {"level"},
                   {"metric"},
                   {r.baseline, Align::right},
                   {r.repeat, Align::right},
                   {"difference", Align::right}});
  for (const auto& n : r.noise) {
    table.add_row({n.benchmark, n.level.empty() ? "-" : n.level, n.metric, fixed(n.first, 2), fixed(n.again, 2),
                   detail::percent(n.difference_pct)});
  }
  return fmt::format("## Noise (A/A)\n\nThe baseline \"{}\" measured again as \"{}\": a variant whose difference from "
                     "the baseline is within this one's is inconclusive.\n\n{}",
                     r.baseline, r.repeat, table.markdown());
}

// Per variant: its peak memory while loading, where its energy came from, and
// what could not be sampled.
std::string telemetry_section(const Report& r) {
  std::string out = "## GPU telemetry\n\nnvidia-smi sampled each variant's GPUs while it loaded and during every "
                    "level (telemetry.csv in its folder; report.html plots its power over time).\n\n";
  for (const auto& v : r.variants) {
    if (!v.telemetry) {
      out += fmt::format("- **{}**: not sampled\n", v.name);
      continue;
    }
    out += fmt::format("- **{}**: {}\n", v.name, detail::telemetry_summary(*v.telemetry));
    for (const auto& warning : v.telemetry->warnings) {
      out += fmt::format("  - warning: {}\n", warning);
    }
  }
  return out;
}

std::string glossary_section(const Report& r) {
  std::string out = "## Glossary\n\n";
  for (const auto& [term, definition] : detail::glossary()) {
    out += fmt::format("- **{}**: {}\n", term, definition);
  }
  if (r.has_telemetry()) {
    for (const auto& [term, definition] : detail::telemetry_glossary()) {
      out += fmt::format("- **{}**: {}\n", term, definition);
    }
  }
  return out;
}

std::string command_section(const CommandTable& t) {
  std::vector<util::TableColumn> columns = {{"variant"}};
  for (const auto& m : t.metrics) {
    columns.push_back({m, Align::right});
  }
  TextTable table(std::move(columns));
  for (const auto& [variant, values] : t.rows) {
    std::vector<std::string> cells = {variant};
    for (const auto& v : values) {
      cells.push_back(detail::metric_cell(v));
    }
    table.add_row(std::move(cells));
  }
  return fmt::format("## {} (command)\n\n{}\n\n{}", t.benchmark, t.spec, table.markdown());
}

std::string expectations_section(const Report& r) {
  TextTable table({{"variant"},
                   {"benchmark"},
                   {"level"},
                   {"metric"},
                   {"expected", Align::right},
                   {"measured", Align::right},
                   {"delta", Align::right},
                   {"tolerance", Align::right},
                   {"reproduced"}});
  for (const auto& e : r.expectations) {
    table.add_row({e.variant, e.benchmark, e.level.empty() ? "-" : e.level, e.metric, fmt::format("{:g}", e.expected),
                   e.measured ? fmt::format("{:.4g}", *e.measured) : "-", detail::percent(e.delta_pct),
                   fmt::format("±{:g}%", e.tolerance_pct), e.reproduced ? "yes" : "NO"});
  }
  return "## Expectations\n\n" + table.markdown();
}

std::string failures_section(const Report& r) {
  std::string out;
  for (const auto& v : r.variants) {
    if (v.status == VariantStatus::ok) {
      continue;
    }
    out += fmt::format("- **{}** ({}): {}\n", v.name, v.status, v.reason);
    if (!v.log_tail.empty()) {
      out += "\n  ```\n";
      std::string_view rest = v.log_tail;
      while (!rest.empty()) {
        auto end = rest.find('\n');
        out += fmt::format("  {}\n", rest.substr(0, end));
        rest = end == std::string_view::npos ? std::string_view() : rest.substr(end + 1);
      }
      out += "  ```\n";
    }
  }
  return out.empty() ? out : "## Failures\n\n" + out;
}

std::string flags_section(const Report& r) {
  std::string out;
  for (const auto& v : r.variants) {
    for (const auto& flag : v.flags) {
      out += fmt::format("- **{}**: {}\n", v.name, flag);
    }
  }
  return out.empty() ? out : "## Flags\n\n" + out;
}

} // namespace

std::string to_markdown(const Report& r) {
  std::vector<std::string> sections;
  std::string head = fmt::format("# {}: comparison report\n\n", r.experiment);
  if (!r.description.empty()) {
    head += r.description + "\n\n";
  }
  head += fmt::format("Started {} with specctl {}; baseline: {}.\n\n**{}**", r.started, r.specctl_version,
                      r.baseline.empty() ? "none" : r.baseline, detail::verdict_line(r));
  for (const auto& note : r.notes) {
    head += fmt::format("\n\n> Note: {}", note);
  }
  sections.push_back(head);
  if (r.tuning) {
    sections.push_back(detail::tuning_markdown(*r.tuning));
  }
  sections.push_back(variants_section(r));
  for (const auto& t : r.single_stream) {
    sections.push_back(single_stream_section(t));
  }
  for (const auto& t : r.levels) {
    sections.push_back(levels_section(r, t));
  }
  for (const auto& t : r.commands) {
    sections.push_back(command_section(t));
  }
  if (r.has_telemetry()) {
    sections.push_back(telemetry_section(r));
  }
  if (!r.categories.empty()) {
    sections.push_back(categories_section(r));
  }
  if (!r.noise.empty()) {
    sections.push_back(noise_section(r));
  }
  if (!r.expectations.empty()) {
    sections.push_back(expectations_section(r));
  }
  if (auto failures = failures_section(r); !failures.empty()) {
    sections.push_back(failures);
  }
  if (auto flags = flags_section(r); !flags.empty()) {
    sections.push_back(flags);
  }
  sections.push_back(glossary_section(r));
  std::string out;
  for (auto& s : sections) {
    while (s.ends_with("\n")) {
      s.pop_back();
    }
    out += s + "\n\n";
  }
  out.pop_back();
  return out;
}

} // namespace specctl::report
