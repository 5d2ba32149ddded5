#include "cells.hpp"

#include <specctl/util/atomic_file.hpp>
#include <specctl/util/error.hpp>

#include <cmath>
#include <fmt/format.h>

namespace specctl::report {

namespace {

using detail::csv_field;
using ojson = nlohmann::ordered_json;

// ---- CSV: one tidy table, RFC 4180 quoting.

std::string csv_number(std::optional<double> value) {
  return value ? fmt::format("{:.6g}", *value) : "";
}

struct CsvRow {
  std::string section, variant, status, benchmark, level, metric;
  std::optional<double> value, stdev, n, completed, failed, speedup, ci_low, ci_high;
  std::string verdict, why;
  std::optional<double> expected, tolerance_pct, delta_pct;
  std::string reproduced, reason;
};

const char* const k_csv_header = "section,variant,status,benchmark,level,metric,value,stdev,n,completed,failed,speedup,"
                                 "ci_low,ci_high,verdict,why,expected,tolerance_pct,delta_pct,reproduced,reason\n";

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
                                    csv_number(r.completed),
                                    csv_number(r.failed),
                                    csv_number(r.speedup),
                                    csv_number(r.ci_low),
                                    csv_number(r.ci_high),
                                    r.verdict,
                                    r.why,
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

void put_spread(CsvRow& row, const std::optional<Spread>& spread) {
  if (spread) {
    row.value = spread->mean;
    row.stdev = spread->stdev;
    row.n = spread->n;
  }
}

void put_judgement(CsvRow& row, const std::optional<Ratio>& ratio, Verdict verdict, const std::string& why,
                   const Counts& counts) {
  if (ratio) {
    row.speedup = ratio->value;
    row.ci_low = ratio->low;
    row.ci_high = ratio->high;
  }
  row.verdict = verdict_name(verdict);
  row.why = why;
  if (counts.requests > 0) {
    row.completed = counts.completed;
    row.failed = counts.failed;
  }
}

// A measurement's telemetry: tok/J judged against the baseline's, the GPUs' power
// and energy, and a row per throttle reason of a throttled repeat.
std::string energy_csv(const CsvRow& base, const EnergyFigures& e, bool repeated) {
  CsvRow tok = base;
  tok.metric = "tok_per_j";
  put_spread(tok, e.tok_per_j);
  put_judgement(tok, e.ratio, e.verdict, e.why, Counts{});
  tok.verdict = detail::energy_verdict_name(e.verdict);
  std::string out = csv_line(tok);
  for (auto [metric, value] : {std::pair{"power_w", e.power_w}, std::pair{"energy_j", e.energy_j}}) {
    if (value) {
      CsvRow c = base;
      c.metric = metric;
      c.value = value;
      out += csv_line(c);
    }
  }
  for (const auto& t : e.throttled) {
    for (const auto& [reason, share] : t.reasons) {
      CsvRow c = base;
      c.metric = "throttle[" + reason + "]";
      c.value = share;
      c.why = (repeated ? fmt::format("repeat {}: ", t.repeat) : "") + detail::throttle_text(t);
      out += csv_line(c);
    }
  }
  return out;
}

// A variant's peak memory per GPU while loading, and what could not be sampled.
std::string telemetry_csv(const VariantRow& v) {
  std::string out;
  if (const auto& load = v.telemetry->load) {
    for (std::size_t i = 0; i < load->peak_mib.size(); ++i) {
      out += csv_line(csv_row("variant", v.name, std::string(status_name(v.status)), "", "",
                              fmt::format("load_memory_peak_mib[{}]", load->gpus[i]), load->peak_mib[i]));
    }
    if (load->total_mib) {
      out += csv_line(
          csv_row("variant", v.name, std::string(status_name(v.status)), "", "", "memory_total_mib", load->total_mib));
    }
  }
  for (const auto& warning : v.telemetry->warnings) {
    CsvRow row =
        csv_row("variant", v.name, std::string(status_name(v.status)), "", "", "telemetry_warning", std::nullopt);
    row.reason = warning;
    out += csv_line(row);
  }
  return out;
}

// ---- JSON

ojson optional_number(std::optional<double> value) {
  return value && std::isfinite(*value) ? ojson(*value) : ojson(nullptr);
}

ojson ratio_json(const std::optional<Ratio>& ratio) {
  if (!ratio) {
    return nullptr;
  }
  return {
      {"value", ratio->value}, {"ci95_low", optional_number(ratio->low)}, {"ci95_high", optional_number(ratio->high)}};
}

ojson spread_json(const std::optional<Spread>& spread) {
  if (!spread) {
    return nullptr;
  }
  return {{"mean", optional_number(spread->mean)}, {"stdev", optional_number(spread->stdev)}, {"n", spread->n}};
}

ojson counts_json(const Counts& counts) {
  return {{"requests", counts.requests},
          {"completed", counts.completed},
          {"failed", counts.failed},
          {"error_rate", counts.requests > 0 ? ojson(counts.error_rate()) : ojson(nullptr)}};
}

ojson energy_json(const EnergyFigures& e) {
  ojson throttled = ojson::array();
  for (const auto& t : e.throttled) {
    ojson reasons = ojson::object();
    for (const auto& [reason, share] : t.reasons) {
      reasons[reason] = share;
    }
    throttled.push_back({{"repeat", t.repeat}, {"reasons", reasons}, {"text", detail::throttle_text(t)}});
  }
  return {{"sampled", e.sampled},
          {"tok_per_j", spread_json(e.tok_per_j)},
          {"ratio", ratio_json(e.ratio)},
          {"verdict", detail::energy_verdict_name(e.verdict)},
          {"why", e.why},
          {"power_w", optional_number(e.power_w)},
          {"energy_j", optional_number(e.energy_j)},
          {"throttled", throttled}};
}

ojson telemetry_json(const VariantTelemetry& t) {
  ojson load = nullptr;
  if (t.load) {
    load = {{"gpus", t.load->gpus},
            {"memory_peak_mib", t.load->peak_mib},
            {"memory_total_mib", optional_number(t.load->total_mib)},
            {"samples", t.load->samples},
            {"text", detail::load_memory_text(*t.load)}};
  }
  return {{"load", load},
          {"energy_source", t.energy_source.empty() ? ojson(nullptr) : ojson(t.energy_source)},
          {"warnings", t.warnings},
          {"throttled", t.throttled}};
}

ojson sources_json(const Sources& sources) {
  return {{"accept_length", sources.accept_length.empty() ? ojson(nullptr) : ojson(sources.accept_length)},
          {"tokens", sources.tokens.empty() ? ojson(nullptr) : ojson(sources.tokens)}};
}

} // namespace

std::string to_csv(const Report& r) {
  std::string out = k_csv_header;
  for (const auto& v : r.variants) {
    CsvRow row = csv_row("variant", v.name, std::string(status_name(v.status)), "", "", "load_s", v.load_s);
    row.reason = v.reason;
    out += csv_line(row);
    if (v.telemetry) {
      out += telemetry_csv(v);
    }
  }
  for (const auto& t : r.single_stream) {
    for (const auto& row : t.rows) {
      CsvRow c = csv_row("single_stream", row.variant, detail::status_text(r, row.variant), t.benchmark, "",
                         "output_tok_s", std::nullopt);
      put_spread(c, row.tok_s);
      put_judgement(c, row.speedup, row.verdict, row.why, row.counts);
      out += csv_line(c);
      if (row.energy.sampled) {
        out += energy_csv(csv_row("single_stream", row.variant, c.status, t.benchmark, "", "", std::nullopt),
                          row.energy, false);
      }
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
        CsvRow base = csv_row(t.rate ? "rate" : "concurrency", row.variant, detail::status_text(r, row.variant),
                              t.benchmark, t.label(i), "", std::nullopt);
        CsvRow tok = base;
        tok.metric = "output_tok_s";
        put_spread(tok, f.tok_s);
        put_judgement(tok, f.speedup, f.verdict, f.why, f.counts);
        out += csv_line(tok);
        if (f.energy.sampled) {
          out += energy_csv(base, f.energy, t.repeats > 1);
        }
        for (auto [metric, value] :
             {std::pair{"ttft_p50_ms", f.ttft_p50_ms}, std::pair{"ttft_p99_ms", f.ttft_p99_ms},
              std::pair{"tpot_p50_ms", f.tpot_p50_ms}, std::pair{"tpot_p99_ms", f.tpot_p99_ms},
              std::pair{"accept_length", f.accept_length}, std::pair{"goodput_rps", f.goodput_rps}}) {
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
        out += csv_line(
            csv_row("command", variant, detail::status_text(r, variant), t.benchmark, "", t.metrics[i], values[i]));
      }
    }
  }
  // Per category: the benchmark's own section and level, the category in the metric's name.
  for (const auto& t : r.categories) {
    for (const auto& row : t.rows) {
      for (std::size_t i = 0; i < t.categories.size(); ++i) {
        const auto& f = row.categories[i];
        if (!f) {
          continue;
        }
        CsvRow tok = csv_row(t.kind, row.variant, detail::status_text(r, row.variant), t.benchmark, t.level,
                             "request_tok_s[" + t.categories[i] + "]", f->tok_s);
        tok.completed = f->counts.completed;
        tok.failed = f->counts.failed;
        out += csv_line(tok);
        if (f->accept_length) {
          out += csv_line(csv_row(t.kind, row.variant, tok.status, t.benchmark, t.level,
                                  "accept_length[" + t.categories[i] + "]", f->accept_length));
        }
      }
    }
  }
  for (const auto& n : r.noise) {
    CsvRow c = csv_row("noise", r.repeat, detail::status_text(r, r.repeat), n.benchmark, n.level, n.metric, n.again);
    c.expected = n.first;
    c.delta_pct = n.difference_pct;
    out += csv_line(c);
  }
  for (const auto& e : r.expectations) {
    CsvRow c = csv_row("expectation", e.variant, detail::status_text(r, e.variant), e.benchmark, e.level, e.metric,
                       e.measured);
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
  out["version"] = 2;
  out["experiment"] = r.experiment;
  out["description"] = r.description;
  out["started"] = r.started;
  out["specctl_version"] = r.specctl_version;
  out["baseline"] = r.baseline.empty() ? ojson(nullptr) : ojson(r.baseline);
  out["repeat"] = r.repeat.empty() ? ojson(nullptr) : ojson(r.repeat);
  out["max_failed_pct"] = r.max_failed_pct;
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
                               {"repeat_of", v.repeat_of.empty() ? ojson(nullptr) : ojson(v.repeat_of)},
                               {"flags", v.flags}});
    if (v.telemetry) {
      out["variants"].back()["telemetry"] = telemetry_json(*v.telemetry);
    }
  }
  out["single_stream"] = ojson::array();
  for (const auto& t : r.single_stream) {
    ojson rows = ojson::array();
    for (const auto& row : t.rows) {
      rows.push_back({{"variant", row.variant},
                      {"output_tok_s", spread_json(row.tok_s)},
                      {"requests", counts_json(row.counts)},
                      {"speedup", ratio_json(row.speedup)},
                      {"verdict", verdict_name(row.verdict)},
                      {"why", row.why},
                      {"accept_length", optional_number(row.accept_length)},
                      {"ttft_ms", optional_number(row.ttft_ms)},
                      {"tpot_ms", optional_number(row.tpot_ms)},
                      {"sources", sources_json(row.sources)}});
      if (detail::has_energy(t)) {
        rows.back()["energy"] = energy_json(row.energy);
      }
    }
    out["single_stream"].push_back(
        {{"benchmark", t.benchmark}, {"spec", t.spec}, {"sources", detail::sources_text(t)}, {"rows", rows}});
  }
  out["levels"] = ojson::array();
  for (const auto& t : r.levels) {
    ojson rows = ojson::array();
    for (const auto& row : t.rows) {
      ojson levels = ojson::array();
      for (std::size_t i = 0; i < t.levels.size(); ++i) {
        const auto& f = row.levels[i];
        levels.push_back({{"level", t.levels[i]},
                          {"label", t.label(i)},
                          {"output_tok_s", spread_json(f.tok_s)},
                          {"requests", counts_json(f.counts)},
                          {"speedup", ratio_json(f.speedup)},
                          {"verdict", verdict_name(f.verdict)},
                          {"why", f.why},
                          {"ttft_p50_ms", optional_number(f.ttft_p50_ms)},
                          {"ttft_p99_ms", optional_number(f.ttft_p99_ms)},
                          {"tpot_p50_ms", optional_number(f.tpot_p50_ms)},
                          {"tpot_p99_ms", optional_number(f.tpot_p99_ms)},
                          {"accept_length", optional_number(f.accept_length)},
                          {"sources", sources_json(f.sources)}});
        if (!t.slo.empty()) {
          levels.back()["goodput_rps"] = optional_number(f.goodput_rps);
          levels.back()["slo_met"] = f.slo_met ? ojson(*f.slo_met) : ojson(nullptr);
        }
        if (detail::has_energy(t)) {
          levels.back()["energy"] = energy_json(f.energy);
        }
      }
      ojson runs = ojson::array();
      for (const auto& run : row.crossover.runs) {
        runs.push_back(
            {{"verdict", verdict_name(run.verdict)}, {"from", t.levels[run.first]}, {"to", t.levels[run.last]}});
      }
      rows.push_back({{"variant", row.variant},
                      {"levels", levels},
                      {"crossover",
                       {{"text", detail::crossover_text(t, row.crossover)},
                        {"runs", runs},
                        {"estimate", optional_number(row.crossover.estimate)}}}});
      if (row.search) {
        rows.back()["slo_search"] = {{"max_rate", optional_number(row.search->max_rate)},
                                     {"missed_at", optional_number(row.search->missed_at)},
                                     {"steps", row.search->steps},
                                     {"why", row.search->why}};
      }
    }
    out["levels"].push_back({{"benchmark", t.benchmark},
                             {"spec", t.spec},
                             {"axis", t.rate ? "rate" : "concurrency"},
                             {"levels", t.levels},
                             {"repeats", t.repeats},
                             {"sources", detail::sources_text(t)},
                             {"rows", rows}});
    if (!t.slo.empty()) {
      out["levels"].back()["slo"] = ojson::object();
      for (const auto& [metric, bound] : t.slo) {
        out["levels"].back()["slo"][metric] = bound;
      }
    }
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
  out["categories"] = ojson::array();
  for (const auto& t : r.categories) {
    ojson rows = ojson::array();
    for (const auto& row : t.rows) {
      // Keyed by category in the workload's order (ordered_json keeps it).
      ojson figures = ojson::object();
      for (std::size_t i = 0; i < t.categories.size(); ++i) {
        const auto& f = row.categories[i];
        figures[t.categories[i]] = f ? ojson{{"requests", counts_json(f->counts)},
                                             {"tok_s", optional_number(f->tok_s)},
                                             {"accept_length", optional_number(f->accept_length)}}
                                     : ojson(nullptr);
      }
      rows.push_back({{"variant", row.variant},
                      {"accept_length_source",
                       row.accept_length_source.empty() ? ojson(nullptr) : ojson(row.accept_length_source)},
                      {"categories", figures}});
    }
    out["categories"].push_back({{"benchmark", t.benchmark},
                                 {"kind", t.kind},
                                 {"level", t.level.empty() ? ojson(nullptr) : ojson(t.level)},
                                 {"repeats", t.repeats},
                                 {"categories", t.categories},
                                 {"note", detail::category_note(t)},
                                 {"rows", rows}});
  }
  out["lengths"] = ojson::array();
  for (const auto& l : r.lengths) {
    auto histogram = [](const std::optional<LengthHistogram>& h) {
      return h ? ojson{{"lo", h->lo}, {"width", h->width}, {"counts", h->counts}, {"requests", h->requests}}
               : ojson(nullptr);
    };
    out["lengths"].push_back({{"benchmark", l.benchmark},
                              {"variant", l.variant},
                              {"input_tokens", histogram(l.input_tokens)},
                              {"output_tokens", histogram(l.output_tokens)},
                              {"same", l.same},
                              {"differing", l.differing}});
  }
  out["noise"] = ojson::array();
  for (const auto& n : r.noise) {
    out["noise"].push_back({{"benchmark", n.benchmark},
                            {"level", n.level.empty() ? ojson(nullptr) : ojson(n.level)},
                            {"metric", n.metric},
                            {"first", optional_number(n.first)},
                            {"again", optional_number(n.again)},
                            {"difference_pct", optional_number(n.difference_pct)}});
  }
  out["glossary"] = ojson::object();
  for (const auto& [term, definition] : detail::glossary()) {
    out["glossary"][term] = definition;
  }
  if (r.has_telemetry()) {
    for (const auto& [term, definition] : detail::telemetry_glossary()) {
      out["glossary"][term] = definition;
    }
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
