// The readers of a result folder (`specctl report DIR`, `specctl compare A B`,
// the run's summary table): a copy of tests/data/report/sweep with one of its
// files replaced by the input. The first byte picks which: a variant's
// result.json (most inputs), experiment.json or run.json.

#include "fuzz_support.hpp"

#include <specctl/experiment/experiment.hpp>
#include <specctl/report/compare.hpp>
#include <specctl/report/report.hpp>
#include <specctl/report/results.hpp>
#include <specctl/util/error.hpp>

#include <array>
#include <fstream>
#include <sstream>

using namespace specctl;

namespace {

namespace fs = std::filesystem;

const fs::path k_fixture = fs::path(SPECCTL_SOURCE_DIR) / "tests/data/report/sweep";

// The fixture's files, relative to the folder; the input replaces one of them.
constexpr std::array<const char*, 6> k_files = {"variants/baseline/result.json",
                                                "variants/eagle3/result.json",
                                                "variants/eagle3-steps4/result.json",
                                                "variants/eagle3-nofusion/result.json",
                                                "experiment.json",
                                                "run.json"};

std::string read_all(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

// The sweep as the experiment file behind the fixture would load: every kind
// of benchmark, and expectations at a level and at a rate.
experiment::Experiment sweep_experiment() {
  experiment::Experiment e;
  e.name = "sweep";
  experiment::BenchmarkSpec single;
  single.name = "single-stream";
  experiment::BenchmarkSpec parallel;
  parallel.name = "parallel";
  parallel.kind = experiment::BenchmarkKind::concurrency;
  parallel.levels = {1, 8, 64};
  experiment::BenchmarkSpec rate;
  rate.name = "poisson";
  rate.kind = experiment::BenchmarkKind::rate;
  rate.rates = {0.5, 2};
  experiment::BenchmarkSpec accuracy;
  accuracy.name = "accuracy";
  accuracy.kind = experiment::BenchmarkKind::command;
  accuracy.extract = {{"accuracy", experiment::ExtractKind::regex, "acc=(\\S+)"}};
  e.benchmarks = {single, parallel, rate, accuracy};
  e.report.expect = {{"baseline", "single-stream", std::nullopt, std::nullopt, "output_tok_s", 100, 5, {}},
                     {"eagle3", "parallel", 64, std::nullopt, "output_tok_s", 1800, 10, {}},
                     {"eagle3", "poisson", std::nullopt, 2.0, "ttft_p99_ms", 80, 10, {}}};
  return e;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0 || size > fuzz::k_max_input) {
    return -1;
  }
  static const auto dir = fuzz::ScratchDir::path() / "run";
  static const auto originals = [] {
    std::array<std::string, k_files.size()> out;
    for (std::size_t i = 0; i < k_files.size(); ++i) {
      out[i] = read_all(k_fixture / k_files[i]);
    }
    return out;
  }();
  static const auto pristine = report::read_run(k_fixture);
  static const auto experiment = sweep_experiment();
  static const std::vector<std::string> variants = {"baseline", "eagle3", "eagle3-steps4", "eagle3-nofusion",
                                                    "never-ran"};

  // Mostly result.json files: they are what a run writes most of.
  const std::size_t replaced = data[0] < 0xC0 ? data[0] % 4 : data[0] < 0xE0 ? 4 : 5;
  for (std::size_t i = 0; i < k_files.size(); ++i) {
    fuzz::write_file(dir / k_files[i], i == replaced ? fuzz::as_text(data + 1, size - 1) : originals[i]);
  }

  report::ResultPaths paths{dir};
  for (const auto& name : variants) {
    if (auto result = report::read_result(paths, name)) {
      for (const auto& e : experiment.report.expect) {
        (void)report::find_metric(*result, e);
      }
    }
  }

  try {
    auto run = report::read_run(dir);
    auto built = report::build_report(run);
    (void)built.passed();
    (void)report::to_terminal(built);
    for (const auto& name : variants) {
      (void)report::terminal_figures(built, name);
    }
    for (const char* format : {"md", "csv", "json", "html", "junit"}) {
      (void)report::render(built, format);
    }
    auto comparison = report::compare_runs(pristine, run);
    (void)comparison.regressed();
    for (const char* format : {"md", "csv", "json", "junit"}) {
      (void)report::render(comparison, format);
    }
  } catch (const Error&) {
    // specctl's one error type is a clean refusal; anything else escapes and is a finding.
  }
  return 0;
}
