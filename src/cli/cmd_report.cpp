#include "commands.hpp"

#include <specctl/report/compare.hpp>
#include <specctl/report/report.hpp>
#include <specctl/util/atomic_file.hpp>
#include <specctl/util/error.hpp>

#include <fmt/format.h>
#include <iostream>
#include <memory>

namespace specctl::cli {

namespace {

const std::vector<std::string> k_report_formats = {"md", "csv", "json", "html", "junit"};
const std::vector<std::string> k_compare_formats = {"md", "csv", "json", "junit"};

// Writes to --out when given, else to stdout.
void emit(const std::string& content, const std::string& out) {
  if (out.empty()) {
    std::cout << content << std::flush;
    return;
  }
  if (auto written = util::write_file_atomic(out, content); !written) {
    throw Error(fmt::format("{}: cannot write: {}", out, written.error().what()));
  }
}

struct ReportOptions {
  std::string dir;
  std::string format;
  std::string baseline;
  std::string out;
};

int report(const ReportOptions& o) {
  auto data = report::read_run(o.dir);
  report::ReportOptions options;
  if (!o.baseline.empty()) {
    options.baseline = o.baseline;
  }
  auto made = report::build_report(data, options);
  if (!o.format.empty()) {
    emit(report::render(made, o.format), o.out);
  } else {
    // Regenerate the run's own files, in the formats its experiment asked for.
    std::vector<std::string> formats = k_report_formats;
    if (auto it = data.experiment.find("report_formats"); it != data.experiment.end() && it->is_array()) {
      formats = it->get<std::vector<std::string>>();
    }
    auto written = report::write_reports(made, o.dir, formats);
    emit(report::to_markdown(made), o.out);
    for (const auto& path : written) {
      std::cerr << fmt::format("wrote {}\n", path.string());
    }
  }
  return made.passed() ? k_exit_ok : k_exit_failures;
}

struct CompareOptions {
  std::string before;
  std::string after;
  std::string format = "md";
  std::string out;
};

int compare(const CompareOptions& o) {
  auto comparison = report::compare_runs(report::read_run(o.before), report::read_run(o.after));
  emit(report::render(comparison, o.format), o.out);
  return comparison.regressed() ? k_exit_failures : k_exit_ok;
}

} // namespace

Action setup_report(CLI::App& command) {
  auto options = std::make_shared<ReportOptions>();
  command.add_option("dir", options->dir, "A result folder of specctl run (complete, partial or resumed)")
      ->required()
      ->check(CLI::ExistingDirectory);
  command
      .add_option("--format", options->format,
                  "Print this format instead of rewriting the folder's report files: md, csv, json, html, junit")
      ->check(CLI::IsMember(k_report_formats));
  command.add_option("--baseline", options->baseline,
                     "Compare against this variant instead of the experiment's baseline");
  command.add_option("-o,--out", options->out, "Write the printed report to this file instead of stdout");
  command.footer("Without --format, rewrites report.md, report.csv, report.json, report.html and junit.xml in DIR "
                 "(the formats the experiment asks for) and prints the Markdown. Exit code 1 when a variant "
                 "failed or an expectation was missed.");
  return [options] { return report(*options); };
}

Action setup_compare(CLI::App& command) {
  auto options = std::make_shared<CompareOptions>();
  command.add_option("before", options->before, "Result folder of the earlier run")
      ->required()
      ->check(CLI::ExistingDirectory);
  command.add_option("after", options->after, "Result folder of the later run")
      ->required()
      ->check(CLI::ExistingDirectory);
  command.add_option("--format", options->format, "md, csv, json or junit")->check(CLI::IsMember(k_compare_formats));
  command.add_option("-o,--out", options->out, "Write to this file instead of stdout");
  command.footer("Exit code 1 when a variant regressed: ok before and not after, or slower (95% interval below 1.0; "
                 "for single measurements, more than 5% slower).");
  return [options] { return compare(*options); };
}

} // namespace specctl::cli
