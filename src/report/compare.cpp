#include <specctl/report/compare.hpp>

#include "cells.hpp"

#include <specctl/util/error.hpp>
#include <specctl/util/text_table.hpp>

#include <algorithm>
#include <fmt/format.h>

namespace specctl::report {

namespace {

using detail::fixed;
using ojson = nlohmann::ordered_json;

std::string run_text(const nlohmann::json& run, const char* key) {
  auto it = run.find(key);
  return it != run.end() && it->is_string() ? it->get<std::string>() : std::string();
}

const VariantRow* find_variant(const Report& r, const std::string& name) {
  for (const auto& v : r.variants) {
    if (v.name == name) {
      return &v;
    }
  }
  return nullptr;
}

template <typename Table> const Table* find_table(const std::vector<Table>& tables, const std::string& benchmark) {
  for (const auto& t : tables) {
    if (t.benchmark == benchmark) {
      return &t;
    }
  }
  return nullptr;
}

const SingleStreamRow* row_in(const SingleStreamTable* t, const std::string& variant) {
  if (t != nullptr) {
    for (const auto& row : t->rows) {
      if (row.variant == variant) {
        return &row;
      }
    }
  }
  return nullptr;
}

const LevelFigures* level_in(const LevelsTable* t, const std::string& variant, double level) {
  if (t == nullptr) {
    return nullptr;
  }
  auto at = std::find(t->levels.begin(), t->levels.end(), level);
  if (at == t->levels.end()) {
    return nullptr;
  }
  for (const auto& row : t->rows) {
    if (row.variant == variant) {
      return &row.levels[static_cast<std::size_t>(at - t->levels.begin())];
    }
  }
  return nullptr;
}

// The A/A noise a run measured for a figure: |repeat / baseline - 1|.
std::optional<double> noise_of(const std::optional<Ratio>& aa) {
  return aa ? std::optional(std::abs(aa->value - 1.0)) : std::nullopt;
}

// The wider of the two runs' A/A noise.
std::optional<double> wider(std::optional<double> a, std::optional<double> b) {
  if (a && b) {
    return std::max(*a, *b);
  }
  return a ? a : b;
}

// after vs before by the report's rule, refused where either side's own figures are.
template <typename Change>
void judge_change(Change& change, const std::string& refused_before, const std::string& refused_after,
                  const std::optional<Spread>& before, const std::optional<Spread>& after,
                  std::optional<double> noise) {
  if (!refused_before.empty() || !refused_after.empty()) {
    change.verdict = Verdict::not_measured;
    change.why = !refused_after.empty() ? "after: " + refused_after : "before: " + refused_before;
    return;
  }
  auto j = judge(after, before, noise);
  change.change = j.ratio;
  change.verdict = j.verdict;
  change.why = j.why;
}

// tok/J after vs before, where either side was sampled, by the rule of tok/s.
void energy_change(EnergyChange& e, const EnergyFigures* before, const EnergyFigures* after,
                   const std::string& refused_before, const std::string& refused_after, std::optional<double> noise) {
  e.sampled = (before != nullptr && before->sampled) || (after != nullptr && after->sampled);
  if (!e.sampled) {
    return;
  }
  e.before = before != nullptr ? before->tok_per_j : std::nullopt;
  e.after = after != nullptr ? after->tok_per_j : std::nullopt;
  judge_change(e, refused_before, refused_after, e.before, e.after, noise);
}

std::string spread_text(const std::optional<Spread>& s) {
  return s ? fmt::format("{:.1f} ± {:.1f} ({})", s->mean, s->stdev, s->n) : "-";
}

std::string energy_spread_text(const std::optional<Spread>& s) {
  return s ? fmt::format("{:.2f} ± {:.2f} ({})", s->mean, s->stdev, s->n) : "-";
}

std::optional<double> mean_of(const std::optional<Spread>& s) {
  return s ? std::optional(s->mean) : std::nullopt;
}

// How many figures got `verdict`: tok/s, or tok/J with `energy`; nullopt for tok/J when no side was sampled.
std::optional<int> count_verdicts(const Comparison& c, Verdict verdict, bool energy = false) {
  int n = 0;
  bool sampled = false;
  auto count = [&](const auto& change) {
    if (energy) {
      sampled = sampled || change.tok_per_j.sampled;
      n += change.tok_per_j.sampled && change.tok_per_j.verdict == verdict ? 1 : 0;
    } else {
      n += change.verdict == verdict ? 1 : 0;
    }
  };
  for (const auto& v : c.variants) {
    std::for_each(v.single_stream.begin(), v.single_stream.end(), count);
    std::for_each(v.levels.begin(), v.levels.end(), count);
  }
  return energy && !sampled ? std::nullopt : std::optional(n);
}

bool variant_regressed(const VariantChange& v) {
  bool broke = v.before_status == VariantStatus::ok && v.after_status != VariantStatus::ok;
  auto worse = [](const auto& change) {
    return change.verdict == Verdict::slower || change.tok_per_j.verdict == Verdict::slower;
  };
  bool slower = std::any_of(v.single_stream.begin(), v.single_stream.end(), worse) ||
                std::any_of(v.levels.begin(), v.levels.end(), worse);
  return broke || slower;
}

// What a regressed variant did wrong, in one line.
std::string regression_text(const VariantChange& v) {
  std::vector<std::string> parts;
  if (v.before_status == VariantStatus::ok && v.after_status != VariantStatus::ok) {
    parts.push_back(fmt::format("was ok, now {}", v.after_status));
  }
  for (const auto& s : v.single_stream) {
    if (s.verdict == Verdict::slower) {
      parts.push_back(fmt::format("{} {} {}", s.benchmark, detail::times(s.change->value), detail::interval(s.change)));
    }
    if (s.tok_per_j.verdict == Verdict::slower) {
      parts.push_back(fmt::format("{} tok/J {}", s.benchmark, detail::ratio_text(s.tok_per_j.change)));
    }
  }
  for (const auto& l : v.levels) {
    if (l.verdict == Verdict::slower) {
      parts.push_back(
          fmt::format("{} {} {}", l.benchmark, detail::level_label(l.rate, l.level), detail::ratio_text(l.change)));
    }
    if (l.tok_per_j.verdict == Verdict::slower) {
      parts.push_back(fmt::format("{} {} tok/J {}", l.benchmark, detail::level_label(l.rate, l.level),
                                  detail::ratio_text(l.tok_per_j.change)));
    }
  }
  std::string out;
  for (const auto& p : parts) {
    out += (out.empty() ? "" : "; ") + p;
  }
  return out;
}

} // namespace

bool Comparison::regressed() const {
  return std::any_of(variants.begin(), variants.end(), variant_regressed);
}

Comparison compare_runs(const RunData& before_data, const RunData& after_data) {
  Comparison c;
  c.experiment = run_text(before_data.run, "experiment");
  std::string other = run_text(after_data.run, "experiment");
  if (c.experiment != other) {
    throw Error(fmt::format("{} holds experiment \"{}\" and {} holds \"{}\": compare runs of the same experiment",
                            before_data.dir.string(), c.experiment, after_data.dir.string(), other),
                ErrorKind::bad_input);
  }
  c.before_dir = before_data.dir.string();
  c.after_dir = after_data.dir.string();
  c.before_started = run_text(before_data.run, "started");
  c.after_started = run_text(after_data.run, "started");
  if (run_text(before_data.run, "content_hash") != run_text(after_data.run, "content_hash")) {
    c.notes.push_back("the experiment file changed between the two runs: compare with care");
  }
  Report before = build_report(before_data);
  Report after = build_report(after_data);

  std::vector<std::string> names;
  for (const auto* r : {&before, &after}) {
    for (const auto& v : r->variants) {
      if (std::find(names.begin(), names.end(), v.name) == names.end()) {
        names.push_back(v.name);
      }
    }
  }
  for (const auto& name : names) {
    VariantChange change;
    change.variant = name;
    const VariantRow* b = find_variant(before, name);
    const VariantRow* a = find_variant(after, name);
    change.before_status = b != nullptr ? b->status : VariantStatus::not_run;
    change.after_status = a != nullptr ? a->status : VariantStatus::not_run;
    for (const auto& t : before.single_stream) {
      const auto* after_table = find_table(after.single_stream, t.benchmark);
      const SingleStreamRow* rb = row_in(&t, name);
      const SingleStreamRow* ra = row_in(after_table, name);
      SingleStreamChange s;
      s.benchmark = t.benchmark;
      s.before = rb != nullptr ? rb->tok_s : std::nullopt;
      s.after = ra != nullptr ? ra->tok_s : std::nullopt;
      // A variant's own noise is its run's A/A: the baseline against its repeat.
      auto aa = [&](const SingleStreamTable* table, const Report& r) -> std::optional<double> {
        const SingleStreamRow* row = r.repeat.empty() ? nullptr : row_in(table, r.repeat);
        return row != nullptr ? noise_of(row->speedup) : std::nullopt;
      };
      judge_change(s, rb != nullptr ? rb->refused : "", ra != nullptr ? ra->refused : "", s.before, s.after,
                   wider(aa(&t, before), aa(after_table, after)));
      auto aa_energy = [&](const SingleStreamTable* table, const Report& r) -> std::optional<double> {
        const SingleStreamRow* row = r.repeat.empty() ? nullptr : row_in(table, r.repeat);
        return row != nullptr ? noise_of(row->energy.ratio) : std::nullopt;
      };
      energy_change(s.tok_per_j, rb != nullptr ? &rb->energy : nullptr, ra != nullptr ? &ra->energy : nullptr,
                    rb != nullptr ? rb->refused : "", ra != nullptr ? ra->refused : "",
                    wider(aa_energy(&t, before), aa_energy(after_table, after)));
      change.single_stream.push_back(s);
    }
    for (const auto& t : before.levels) {
      const LevelsTable* other_table = find_table(after.levels, t.benchmark);
      for (double level : t.levels) {
        LevelChange l;
        l.benchmark = t.benchmark;
        l.rate = t.rate;
        l.level = level;
        const LevelFigures* fb = level_in(&t, name, level);
        const LevelFigures* fa = level_in(other_table, name, level);
        if (fb != nullptr) {
          l.before_tok_s = fb->tok_s;
          l.before_ttft_p99_ms = fb->ttft_p99_ms;
        }
        if (fa != nullptr) {
          l.after_tok_s = fa->tok_s;
          l.after_ttft_p99_ms = fa->ttft_p99_ms;
        }
        auto aa = [&](const LevelsTable* table, const Report& r) -> std::optional<double> {
          const LevelFigures* f = r.repeat.empty() ? nullptr : level_in(table, r.repeat, level);
          return f != nullptr ? noise_of(f->speedup) : std::nullopt;
        };
        judge_change(l, fb != nullptr ? fb->refused : "", fa != nullptr ? fa->refused : "", l.before_tok_s,
                     l.after_tok_s, wider(aa(&t, before), aa(other_table, after)));
        auto aa_energy = [&](const LevelsTable* table, const Report& r) -> std::optional<double> {
          const LevelFigures* f = r.repeat.empty() ? nullptr : level_in(table, r.repeat, level);
          return f != nullptr ? noise_of(f->energy.ratio) : std::nullopt;
        };
        energy_change(l.tok_per_j, fb != nullptr ? &fb->energy : nullptr, fa != nullptr ? &fa->energy : nullptr,
                      fb != nullptr ? fb->refused : "", fa != nullptr ? fa->refused : "",
                      wider(aa_energy(&t, before), aa_energy(other_table, after)));
        change.levels.push_back(l);
      }
    }
    c.variants.push_back(std::move(change));
  }
  return c;
}

std::string compare_markdown(const Comparison& c) {
  std::string out = fmt::format("# {}: before / after\n\nBefore: {} (started {})\nAfter: {} (started {})\n\n",
                                c.experiment, c.before_dir, c.before_started, c.after_dir, c.after_started);
  out += fmt::format("**{}: {} faster, {} slower, {} inconclusive", c.regressed() ? "REGRESSED" : "no regression",
                     *count_verdicts(c, Verdict::faster), *count_verdicts(c, Verdict::slower),
                     *count_verdicts(c, Verdict::inconclusive));
  if (auto better = count_verdicts(c, Verdict::faster, true)) {
    out += fmt::format("; tok/J: {} better, {} worse, {} inconclusive", *better,
                       *count_verdicts(c, Verdict::slower, true), *count_verdicts(c, Verdict::inconclusive, true));
  }
  out += "**\n";
  for (const auto& note : c.notes) {
    out += fmt::format("\n> Note: {}\n", note);
  }
  util::TextTable status({{"variant"}, {"before"}, {"after"}, {"regression"}});
  for (const auto& v : c.variants) {
    status.add_row({v.variant, std::string(status_name(v.before_status)), std::string(status_name(v.after_status)),
                    variant_regressed(v) ? regression_text(v) : "-"});
  }
  out += "\n## Variants\n\n" + status.markdown();
  if (c.variants.empty()) {
    return out;
  }
  const auto& first = c.variants.front();
  for (std::size_t i = 0; i < first.single_stream.size(); ++i) {
    util::TextTable table({{"variant"},
                           {"before tok/s ± stdev (n)", util::Align::right},
                           {"after", util::Align::right},
                           {"after / before", util::Align::right},
                           {"95% CI", util::Align::right},
                           {"verdict"}});
    for (const auto& v : c.variants) {
      const auto& s = v.single_stream[i];
      table.add_row({v.variant, spread_text(s.before), spread_text(s.after),
                     detail::times(s.change ? std::optional(s.change->value) : std::nullopt),
                     detail::interval(s.change), detail::verdict_text(s.verdict, s.why)});
    }
    out += fmt::format("\n## {} (single stream)\n\n{}", first.single_stream[i].benchmark, table.markdown());
    if (std::any_of(c.variants.begin(), c.variants.end(),
                    [&](const auto& v) { return v.single_stream[i].tok_per_j.sampled; })) {
      util::TextTable energy({{"variant"},
                              {"before tok/J ± stdev (n)", util::Align::right},
                              {"after", util::Align::right},
                              {"after / before", util::Align::right},
                              {"95% CI", util::Align::right},
                              {"verdict"}});
      for (const auto& v : c.variants) {
        const auto& e = v.single_stream[i].tok_per_j;
        energy.add_row({v.variant, energy_spread_text(e.before), energy_spread_text(e.after),
                        detail::times(e.change ? std::optional(e.change->value) : std::nullopt),
                        detail::interval(e.change), e.sampled ? detail::energy_verdict_text(e.verdict, e.why) : "-"});
      }
      out += "\nOutput tok/J (more is better):\n\n" + energy.markdown();
    }
  }
  // Levels, grouped by benchmark: a column per level, "before → after (ratio)".
  std::size_t at = 0;
  while (at < first.levels.size()) {
    std::size_t end = at;
    while (end < first.levels.size() && first.levels[end].benchmark == first.levels[at].benchmark) {
      ++end;
    }
    std::vector<util::TableColumn> columns = {{"variant"}};
    for (std::size_t i = at; i < end; ++i) {
      columns.push_back({detail::level_label(first.levels[i].rate, first.levels[i].level), util::Align::right});
    }
    util::TextTable tok(columns);
    util::TextTable ttft(columns);
    util::TextTable energy(columns);
    bool sampled = false;
    for (const auto& v : c.variants) {
      std::vector<std::string> tok_cells = {v.variant};
      std::vector<std::string> ttft_cells = {v.variant};
      for (std::size_t i = at; i < end; ++i) {
        const auto& l = v.levels[i];
        tok_cells.push_back(l.change ? fmt::format("{} → {} ({} {})", fixed(mean_of(l.before_tok_s), 1),
                                                   fixed(mean_of(l.after_tok_s), 1), detail::ratio_text(l.change),
                                                   detail::verdict_text(l.verdict, l.why))
                                     : "-");
        ttft_cells.push_back(l.before_ttft_p99_ms || l.after_ttft_p99_ms
                                 ? fmt::format("{} → {}", fixed(l.before_ttft_p99_ms, 1), fixed(l.after_ttft_p99_ms, 1))
                                 : "-");
      }
      tok.add_row(std::move(tok_cells));
      ttft.add_row(std::move(ttft_cells));
      std::vector<std::string> energy_cells = {v.variant};
      for (std::size_t i = at; i < end; ++i) {
        const auto& e = v.levels[i].tok_per_j;
        sampled = sampled || e.sampled;
        energy_cells.push_back(e.change ? fmt::format("{} → {} ({} {})", fixed(mean_of(e.before), 2),
                                                      fixed(mean_of(e.after), 2), detail::ratio_text(e.change),
                                                      detail::energy_verdict_text(e.verdict, e.why))
                                        : "-");
      }
      energy.add_row(std::move(energy_cells));
    }
    out += fmt::format("\n## {}\n\nOutput tok/s, before → after (after / before [95% CI], verdict: slower or faster "
                       "only outside the interval and the A/A noise):\n\n{}"
                       "\nTTFT p99 ms, before → after:\n\n{}",
                       first.levels[at].benchmark, tok.markdown(), ttft.markdown());
    if (sampled) {
      out += "\nOutput tok/J, before → after (after / before [95% CI], verdict: worse or better only outside the "
             "interval and the A/A noise):\n\n" +
             energy.markdown();
    }
    at = end;
  }
  return out;
}

std::string compare_csv(const Comparison& c) {
  std::string out = "variant,before_status,after_status,benchmark,level,metric,before,before_stdev,before_n,after,"
                    "after_stdev,after_n,change,ci_low,ci_high,verdict\n";
  auto num = [](std::optional<double> v) { return v ? fmt::format("{:.6g}", *v) : std::string(); };
  auto line = [&](const std::vector<std::string>& cells) {
    std::string s;
    for (std::size_t i = 0; i < cells.size(); ++i) {
      s += (i == 0 ? "" : ",") + detail::csv_field(cells[i]);
    }
    out += s + "\n";
  };
  auto part = [&](const std::optional<Spread>& x) {
    return std::vector<std::string>{num(x ? std::optional(x->mean) : std::nullopt),
                                    num(x ? std::optional(x->stdev) : std::nullopt), x ? fmt::format("{}", x->n) : ""};
  };
  auto statuses = [](const VariantChange& v) {
    return std::pair{std::string(status_name(v.before_status)), std::string(status_name(v.after_status))};
  };
  auto energy_line = [&](const VariantChange& v, const std::string& benchmark, const std::string& level,
                         const EnergyChange& e) {
    if (!e.sampled) {
      return;
    }
    auto b = part(e.before);
    auto a = part(e.after);
    auto [before_status, after_status] = statuses(v);
    line({v.variant, before_status, after_status, benchmark, level, "tok_per_j", b[0], b[1], b[2], a[0], a[1], a[2],
          num(e.change ? std::optional(e.change->value) : std::nullopt), num(e.change ? e.change->low : std::nullopt),
          num(e.change ? e.change->high : std::nullopt), std::string(detail::energy_verdict_name(e.verdict))});
  };
  for (const auto& v : c.variants) {
    auto [before_status, after_status] = statuses(v);
    for (const auto& s : v.single_stream) {
      auto b = part(s.before);
      auto a = part(s.after);
      line({v.variant, before_status, after_status, s.benchmark, "", "output_tok_s", b[0], b[1], b[2], a[0], a[1], a[2],
            num(s.change ? std::optional(s.change->value) : std::nullopt), num(s.change ? s.change->low : std::nullopt),
            num(s.change ? s.change->high : std::nullopt), std::string(verdict_name(s.verdict))});
      energy_line(v, s.benchmark, "", s.tok_per_j);
    }
    for (const auto& l : v.levels) {
      auto b = part(l.before_tok_s);
      auto a = part(l.after_tok_s);
      line({v.variant, before_status, after_status, l.benchmark, detail::level_label(l.rate, l.level), "output_tok_s",
            b[0], b[1], b[2], a[0], a[1], a[2], num(l.change ? std::optional(l.change->value) : std::nullopt),
            num(l.change ? l.change->low : std::nullopt), num(l.change ? l.change->high : std::nullopt),
            std::string(verdict_name(l.verdict))});
      line({v.variant, before_status, after_status, l.benchmark, detail::level_label(l.rate, l.level), "ttft_p99_ms",
            num(l.before_ttft_p99_ms), "", "", num(l.after_ttft_p99_ms), "", "", "", "", "", ""});
      energy_line(v, l.benchmark, detail::level_label(l.rate, l.level), l.tok_per_j);
    }
  }
  return out;
}

std::string compare_json(const Comparison& c) {
  auto num = [](std::optional<double> v) { return v ? ojson(*v) : ojson(nullptr); };
  auto spread = [](const std::optional<Spread>& s) {
    return s ? ojson{{"mean", s->mean}, {"stdev", s->stdev}, {"n", s->n}} : ojson(nullptr);
  };
  auto change = [&](const std::optional<Ratio>& r) {
    return r ? ojson{{"value", r->value}, {"ci95_low", num(r->low)}, {"ci95_high", num(r->high)}} : ojson(nullptr);
  };
  auto energy = [&](const EnergyChange& e) {
    return ojson{{"before", spread(e.before)},
                 {"after", spread(e.after)},
                 {"change", change(e.change)},
                 {"verdict", detail::energy_verdict_name(e.verdict)},
                 {"why", e.why}};
  };
  ojson out = {{"format", "specctl-comparison"},
               {"version", 2},
               {"experiment", c.experiment},
               {"before", c.before_dir},
               {"after", c.after_dir},
               {"regressed", c.regressed()},
               {"notes", c.notes},
               {"variants", ojson::array()}};
  for (const auto& v : c.variants) {
    ojson j = {{"variant", v.variant},
               {"before_status", status_name(v.before_status)},
               {"after_status", status_name(v.after_status)},
               {"regressed", variant_regressed(v)},
               {"single_stream", ojson::array()},
               {"levels", ojson::array()}};
    for (const auto& s : v.single_stream) {
      j["single_stream"].push_back({{"benchmark", s.benchmark},
                                    {"before", spread(s.before)},
                                    {"after", spread(s.after)},
                                    {"change", change(s.change)},
                                    {"verdict", verdict_name(s.verdict)},
                                    {"why", s.why}});
      if (s.tok_per_j.sampled) {
        j["single_stream"].back()["tok_per_j"] = energy(s.tok_per_j);
      }
    }
    for (const auto& l : v.levels) {
      j["levels"].push_back({{"benchmark", l.benchmark},
                             {"axis", l.rate ? "rate" : "concurrency"},
                             {"level", l.level},
                             {"before_tok_s", spread(l.before_tok_s)},
                             {"after_tok_s", spread(l.after_tok_s)},
                             {"change", change(l.change)},
                             {"verdict", verdict_name(l.verdict)},
                             {"why", l.why},
                             {"before_ttft_p99_ms", num(l.before_ttft_p99_ms)},
                             {"after_ttft_p99_ms", num(l.after_ttft_p99_ms)}});
      if (l.tok_per_j.sampled) {
        j["levels"].back()["tok_per_j"] = energy(l.tok_per_j);
      }
    }
    out["variants"].push_back(j);
  }
  // Folder names and quoted text need not be UTF-8: replace such bytes rather than throw.
  return out.dump(2, ' ', false, ojson::error_handler_t::replace) + "\n";
}

std::string compare_junit(const Comparison& c) {
  std::string cases;
  int failures = 0;
  for (const auto& v : c.variants) {
    cases += fmt::format("    <testcase classname=\"{}.compare\" name=\"{}\"", detail::xml_escape(c.experiment),
                         detail::xml_escape(v.variant));
    if (!variant_regressed(v)) {
      cases += "/>\n";
      continue;
    }
    ++failures;
    cases += fmt::format(">\n      <failure type=\"regression\" message=\"{}\"/>\n    </testcase>\n",
                         detail::xml_escape(regression_text(v)));
  }
  return fmt::format("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
                     "<testsuites name=\"specctl compare\" tests=\"{0}\" failures=\"{1}\" errors=\"0\">\n"
                     "  <testsuite name=\"{2}\" tests=\"{0}\" failures=\"{1}\" errors=\"0\" skipped=\"0\">\n{3}"
                     "  </testsuite>\n</testsuites>\n",
                     c.variants.size(), failures, detail::xml_escape(c.experiment), cases);
}

std::string render(const Comparison& comparison, std::string_view format) {
  if (format == "md") {
    return compare_markdown(comparison);
  }
  if (format == "csv") {
    return compare_csv(comparison);
  }
  if (format == "json") {
    return compare_json(comparison);
  }
  if (format == "junit") {
    return compare_junit(comparison);
  }
  throw Error(fmt::format("unknown comparison format \"{}\" (md, csv, json, junit)", format), ErrorKind::bad_input);
}

} // namespace specctl::report
