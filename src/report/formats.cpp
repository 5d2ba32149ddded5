#include "format.hpp"

#include <specctl/util/atomic_file.hpp>
#include <specctl/util/error.hpp>

#include <cmath>
#include <fmt/format.h>

namespace specctl::report {

namespace {

using detail::csv_field;
using detail::xml_escape;
using ojson = nlohmann::ordered_json;

// ---- CSV: one tidy table, RFC 4180 quoting.

std::string csv_number(std::optional<double> value) { return value ? fmt::format("{:.6g}", *value) : ""; }

struct CsvRow {
  std::string section, variant, status, benchmark, level, metric;
  std::optional<double> value, stdev, n, speedup, ci_low, ci_high;
  std::string verdict;
  std::optional<double> expected, tolerance_pct, delta_pct;
  std::string reproduced, reason;
};

const char* const k_csv_header = "section,variant,status,benchmark,level,metric,value,stdev,n,speedup,ci_low,ci_high,"
                                 "verdict,expected,tolerance_pct,delta_pct,reproduced,reason\n";

std::string csv_line(const CsvRow& r) {
  std::vector<std::string> cells = {r.section,
                                    r.variant,
                                    r.status,
                                    r.benchmark,
                                    r.level,
                                    r.metric,
                                    csv_number(r.value),
                                    csv_number(r.stdev),
                                    csv_number(r.n),
                                    csv_number(r.speedup),
                                    csv_number(r.ci_low),
                                    csv_number(r.ci_high),
                                    r.verdict,
                                    csv_number(r.expected),
                                    csv_number(r.tolerance_pct),
                                    csv_number(r.delta_pct),
                                    r.reproduced,
                                    r.reason};
  std::string out;
  for (std::size_t i = 0; i < cells.size(); ++i) {
    out += (i == 0 ? "" : ",") + csv_field(cells[i]);
  }
  return out + "\n";
}

CsvRow csv_row(std::string section, std::string variant, std::string status, std::string benchmark, std::string level,
              std::string metric, std::optional<double> value) {
  CsvRow row;
  row.section = std::move(section);
  row.variant = std::move(variant);
  row.status = std::move(status);
  row.benchmark = std::move(benchmark);
  row.level = std::move(level);
  row.metric = std::move(metric);
  row.value = value;
  return row;
}

std::string status_of(const Report& r, const std::string& variant) {
  for (const auto& v : r.variants) {
    if (v.name == variant) {
      return v.status;
    }
  }
  return "";
}

// ---- JSON

ojson optional_number(std::optional<double> value) {
  return value && std::isfinite(*value) ? ojson(*value) : ojson(nullptr);
}

ojson ratio_json(const std::optional<Ratio>& ratio) {
  if (!ratio) {
    return nullptr;
  }
  return {{"value", ratio->value}, {"ci95_low", optional_number(ratio->low)}, {"ci95_high", optional_number(ratio->high)}};
}

std::string_view crossover_kind(Crossover::Kind kind) {
  switch (kind) {
  case Crossover::Kind::none:
    return "none";
  case Crossover::Kind::always_faster:
    return "always_faster";
  case Crossover::Kind::never_faster:
    return "never_faster";
  case Crossover::Kind::crosses:
    return "crosses";
  case Crossover::Kind::mixed:
    return "mixed";
  }
  return "none";
}

} // namespace

std::string to_csv(const Report& r) {
  std::string out = k_csv_header;
  for (const auto& v : r.variants) {
    CsvRow row = csv_row("variant", v.name, v.status, "", "", "load_s", v.load_s);
    row.reason = v.reason;
    out += csv_line(row);
  }
  for (const auto& t : r.single_stream) {
    for (const auto& row : t.rows) {
      CsvRow c = csv_row("single_stream", row.variant, status_of(r, row.variant), t.benchmark, "", "output_tok_s",
                         std::nullopt);
      if (row.tok_s) {
        c.value = row.tok_s->mean;
        c.stdev = row.tok_s->stdev;
        c.n = row.tok_s->n;
      }
      if (row.speedup) {
        c.speedup = row.speedup->value;
        c.ci_low = row.speedup->low;
        c.ci_high = row.speedup->high;
      }
      c.verdict = verdict_name(row.verdict);
      out += csv_line(c);
      for (auto [metric, value] : {std::pair{"accept_length", row.accept_length}, std::pair{"ttft_ms", row.ttft_ms},
                                   std::pair{"tpot_ms", row.tpot_ms}}) {
        if (value) {
          out += csv_line(csv_row("single_stream", row.variant, c.status, t.benchmark, "", metric, value));
        }
      }
    }
  }
  for (const auto& t : r.levels) {
    for (const auto& row : t.rows) {
      for (std::size_t i = 0; i < t.levels.size(); ++i) {
        const auto& f = row.levels[i];
        CsvRow base = csv_row(t.rate ? "rate" : "concurrency", row.variant, status_of(r, row.variant), t.benchmark,
                              t.label(i), "", std::nullopt);
        CsvRow tok = base;
        tok.metric = "output_tok_s";
        tok.value = f.tok_s;
        tok.speedup = f.speedup;
        out += csv_line(tok);
        for (auto [metric, value] : {std::pair{"ttft_p50_ms", f.ttft_p50_ms}, std::pair{"ttft_p99_ms", f.ttft_p99_ms},
                                     std::pair{"tpot_p50_ms", f.tpot_p50_ms}, std::pair{"tpot_p99_ms", f.tpot_p99_ms},
                                     std::pair{"accept_length", f.accept_length}}) {
          if (value) {
            CsvRow c = base;
            c.metric = metric;
            c.value = value;
            out += csv_line(c);
          }
        }
      }
    }
  }
  for (const auto& t : r.commands) {
    for (const auto& [variant, values] : t.rows) {
      for (std::size_t i = 0; i < t.metrics.size(); ++i) {
        out += csv_line(csv_row("command", variant, status_of(r, variant), t.benchmark, "", t.metrics[i], values[i]));
      }
    }
  }
  for (const auto& e : r.expectations) {
    CsvRow c = csv_row("expectation", e.variant, status_of(r, e.variant), e.benchmark, e.level, e.metric, e.measured);
    c.expected = e.expected;
    c.tolerance_pct = e.tolerance_pct;
    c.delta_pct = e.delta_pct;
    c.reproduced = e.reproduced ? "yes" : "no";
    out += csv_line(c);
  }
  return out;
}

std::string to_json(const Report& r) {
  ojson out;
  out["format"] = "specctl-report";
  out["version"] = 1;
  out["experiment"] = r.experiment;
  out["description"] = r.description;
  out["started"] = r.started;
  out["specctl_version"] = r.specctl_version;
  out["baseline"] = r.baseline.empty() ? ojson(nullptr) : ojson(r.baseline);
  out["passed"] = r.passed();
  out["notes"] = r.notes;
  out["variants"] = ojson::array();
  for (const auto& v : r.variants) {
    out["variants"].push_back({{"name", v.name},
                               {"status", v.status},
                               {"reason", v.reason},
                               {"failed_phase", v.failed_phase},
                               {"log_tail", v.log_tail},
                               {"host", v.host},
                               {"attempt", v.attempt},
                               {"load_s", optional_number(v.load_s)},
                               {"duration_s", optional_number(v.duration_s)},
                               {"accept_length", optional_number(v.accept_length)},
                               {"flags", v.flags}});
  }
  out["single_stream"] = ojson::array();
  for (const auto& t : r.single_stream) {
    ojson rows = ojson::array();
    for (const auto& row : t.rows) {
      rows.push_back({{"variant", row.variant},
                      {"output_tok_s", row.tok_s ? ojson{{"mean", row.tok_s->mean},
                                                         {"stdev", row.tok_s->stdev},
                                                         {"n", row.tok_s->n}}
                                                 : ojson(nullptr)},
                      {"speedup", ratio_json(row.speedup)},
                      {"verdict", verdict_name(row.verdict)},
                      {"accept_length", optional_number(row.accept_length)},
                      {"ttft_ms", optional_number(row.ttft_ms)},
                      {"tpot_ms", optional_number(row.tpot_ms)}});
    }
    out["single_stream"].push_back({{"benchmark", t.benchmark}, {"spec", t.spec}, {"rows", rows}});
  }
  out["levels"] = ojson::array();
  for (const auto& t : r.levels) {
    ojson rows = ojson::array();
    for (const auto& row : t.rows) {
      ojson levels = ojson::array();
      for (std::size_t i = 0; i < t.levels.size(); ++i) {
        const auto& f = row.levels[i];
        levels.push_back({{"level", t.levels[i]},
                          {"output_tok_s", optional_number(f.tok_s)},
                          {"speedup", optional_number(f.speedup)},
                          {"ttft_p50_ms", optional_number(f.ttft_p50_ms)},
                          {"ttft_p99_ms", optional_number(f.ttft_p99_ms)},
                          {"tpot_p50_ms", optional_number(f.tpot_p50_ms)},
                          {"tpot_p99_ms", optional_number(f.tpot_p99_ms)},
                          {"accept_length", optional_number(f.accept_length)}});
      }
      rows.push_back({{"variant", row.variant},
                      {"levels", levels},
                      {"crossover",
                       {{"kind", crossover_kind(row.crossover.kind)},
                        {"last_faster", optional_number(row.crossover.last_faster)},
                        {"first_not_faster", optional_number(row.crossover.first_not_faster)},
                        {"estimate", optional_number(row.crossover.estimate)}}}});
    }
    out["levels"].push_back({{"benchmark", t.benchmark},
                             {"spec", t.spec},
                             {"axis", t.rate ? "rate" : "concurrency"},
                             {"levels", t.levels},
                             {"rows", rows}});
  }
  out["commands"] = ojson::array();
  for (const auto& t : r.commands) {
    ojson rows = ojson::array();
    for (const auto& [variant, values] : t.rows) {
      ojson metrics = ojson::object();
      for (std::size_t i = 0; i < t.metrics.size(); ++i) {
        metrics[t.metrics[i]] = optional_number(values[i]);
      }
      rows.push_back({{"variant", variant}, {"metrics", metrics}});
    }
    out["commands"].push_back({{"benchmark", t.benchmark}, {"spec", t.spec}, {"rows", rows}});
  }
  out["expectations"] = ojson::array();
  for (const auto& e : r.expectations) {
    out["expectations"].push_back({{"variant", e.variant},
                                   {"benchmark", e.benchmark},
                                   {"level", e.level.empty() ? ojson(nullptr) : ojson(e.level)},
                                   {"metric", e.metric},
                                   {"expected", e.expected},
                                   {"measured", optional_number(e.measured)},
                                   {"delta_pct", optional_number(e.delta_pct)},
                                   {"tolerance_pct", e.tolerance_pct},
                                   {"reproduced", e.reproduced}});
  }
  // Text the report quotes (a damaged file's parse error, a folder's name) need not be
  // UTF-8: replace such bytes rather than throw and lose the whole report.
  return out.dump(2, ' ', false, ojson::error_handler_t::replace) + "\n";
}

std::string to_junit(const Report& r) {
  std::string cases;
  int failures = 0;
  for (const auto& v : r.variants) {
    cases += fmt::format("    <testcase classname=\"{}.variants\" name=\"{}\" time=\"{:.3f}\"",
                         xml_escape(r.experiment), xml_escape(v.name), v.duration_s.value_or(0));
    if (v.status == "ok") {
      cases += "/>\n";
      continue;
    }
    ++failures;
    std::string body = v.reason + (v.log_tail.empty() ? "" : "\n\nLast lines of the server's log:\n" + v.log_tail);
    cases += fmt::format(">\n      <failure type=\"{}\" message=\"{}\">{}</failure>\n    </testcase>\n",
                         xml_escape(v.status), xml_escape(v.reason), xml_escape(body));
  }
  for (const auto& e : r.expectations) {
    std::string name = fmt::format("{} {}{} {}", e.variant, e.benchmark, e.level.empty() ? "" : " " + e.level, e.metric);
    cases += fmt::format("    <testcase classname=\"{}.expectations\" name=\"{}\"", xml_escape(r.experiment),
                         xml_escape(name));
    if (e.reproduced) {
      cases += "/>\n";
      continue;
    }
    ++failures;
    std::string message =
        e.measured ? fmt::format("measured {:.4g}, expected {:g} ±{:g}% ({:+.1f}%)", *e.measured, e.expected,
                                 e.tolerance_pct, e.delta_pct.value_or(0))
                   : fmt::format("not measured (expected {:g} ±{:g}%): {}", e.expected, e.tolerance_pct,
                                 status_of(r, e.variant) == "ok"
                                     ? "the result has no such figure"
                                     : fmt::format("the variant's status is \"{}\"", status_of(r, e.variant)));
    cases += fmt::format(">\n      <failure type=\"not reproduced\" message=\"{}\"/>\n    </testcase>\n",
                         xml_escape(message));
  }
  std::size_t tests = r.variants.size() + r.expectations.size();
  std::string out = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  out += fmt::format("<testsuites name=\"specctl\" tests=\"{}\" failures=\"{}\" errors=\"0\">\n", tests, failures);
  out += fmt::format("  <testsuite name=\"{}\" tests=\"{}\" failures=\"{}\" errors=\"0\" skipped=\"0\" "
                     "timestamp=\"{}\">\n",
                     xml_escape(r.experiment), tests, failures, xml_escape(r.started.substr(0, 19)));
  out += fmt::format("    <properties>\n      <property name=\"baseline\" value=\"{}\"/>\n"
                     "      <property name=\"specctl_version\" value=\"{}\"/>\n    </properties>\n",
                     xml_escape(r.baseline), xml_escape(r.specctl_version));
  out += cases;
  out += "  </testsuite>\n</testsuites>\n";
  return out;
}

std::string file_name(std::string_view format) {
  if (format == "junit") {
    return "junit.xml";
  }
  return fmt::format("report.{}", format);
}

std::string render(const Report& report, std::string_view format) {
  if (format == "md") {
    return to_markdown(report);
  }
  if (format == "csv") {
    return to_csv(report);
  }
  if (format == "json") {
    return to_json(report);
  }
  if (format == "html") {
    return to_html(report);
  }
  if (format == "junit") {
    return to_junit(report);
  }
  throw Error(fmt::format("unknown report format \"{}\" (md, csv, json, html, junit)", format), ErrorKind::bad_input);
}

std::vector<std::filesystem::path> write_reports(const Report& report, const std::filesystem::path& dir,
                                                 const std::vector<std::string>& formats) {
  std::vector<std::filesystem::path> written;
  for (const auto& format : formats) {
    auto path = dir / file_name(format);
    if (auto ok = util::write_file_atomic(path, render(report, format)); !ok) {
      throw Error(fmt::format("{}: cannot write the report: {}", path.string(), ok.error().what()));
    }
    written.push_back(path);
  }
  return written;
}

} // namespace specctl::report
