#pragma once

// The layout of a run's result folder and the figures in it, shared by
// `specctl run` (which writes them) and the report (which reads them).
//
//   DIR/run.json                       what ran: experiment, its content hash, variants
//   DIR/experiment.yaml                the experiment file as given
//   DIR/experiment.json                the resolved experiment (the plan)
//   DIR/journal.jsonl                  every phase, appended and fsynced
//   DIR/provenance.json                specctl version, hosts, exact commands, templates
//   DIR/report.md, report.csv, report.json, report.html, junit.xml   the report (report.hpp)
//   DIR/calibration/MODEL.json         token counts the model's server gave, reused by later variants
//   DIR/variants/NAME/result.json      one variant, written atomically
//   DIR/variants/NAME/server.log       its server's log, copied back
//   DIR/variants/NAME/requests-BENCH.jsonl   every request of a built-in benchmark
//   DIR/variants/NAME/vllm-BENCH-TAG.json    each of its levels as vLLM's --save-result writes it

#include <specctl/bench/result.hpp>
#include <specctl/experiment/experiment.hpp>
#include <specctl/report/variant_status.hpp>

#include <filesystem>
#include <initializer_list>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

namespace specctl::report {

inline constexpr const char* k_run_format = "specctl-run";
inline constexpr const char* k_result_format = "specctl-variant-result";
// Bumped whenever a field changes meaning or disappears; adding fields keeps it.
inline constexpr int k_results_version = 1;

struct ResultPaths {
  std::filesystem::path dir;

  std::filesystem::path run_info() const { return dir / "run.json"; }
  std::filesystem::path experiment_copy() const { return dir / "experiment.yaml"; }
  std::filesystem::path resolved() const { return dir / "experiment.json"; }
  std::filesystem::path provenance() const { return dir / "provenance.json"; }
  std::filesystem::path variant_dir(const std::string& variant) const { return dir / "variants" / variant; }
  std::filesystem::path result(const std::string& variant) const { return variant_dir(variant) / "result.json"; }
  std::filesystem::path server_log(const std::string& variant) const { return variant_dir(variant) / "server.log"; }
  std::filesystem::path requests(const std::string& variant, const std::string& benchmark) const {
    return variant_dir(variant) / ("requests-" + benchmark + ".jsonl");
  }
  // The token counts a model's server gave when prompts were fitted to their target
  // lengths (bench::TokenCounts per endpoint); `slug` names the model in a file name.
  std::filesystem::path calibration(const std::string& slug) const { return dir / "calibration" / (slug + ".json"); }
  // One measured level in vLLM's `bench serve --save-result` shape; tag "single", "c10", "r2" (and "-rep2").
  std::filesystem::path vllm(const std::string& variant, const std::string& benchmark, const std::string& tag) const {
    return variant_dir(variant) / ("vllm-" + benchmark + "-" + tag + ".json");
  }
};

// j[k1][k2]... without creating anything: null when any step is missing.
const nlohmann::json& dig(const nlohmann::json& j, std::initializer_list<std::string_view> keys);

// NaN and infinity are not JSON: a figure that could not be measured is null.
nlohmann::json finite_or_null(double value);

// A variant's result.json, or nullopt when it is missing or unreadable (a
// run killed before writing it).
std::optional<nlohmann::json> read_result(const ResultPaths& paths, const std::string& variant);

// What is wrong with a variant's result.json that is there but cannot be read:
// "variants/x/result.json: damaged at byte 812: syntax error ..."; nullopt when
// the file is missing or sound.
std::optional<std::string> result_damage(const ResultPaths& paths, const std::string& variant);

// The figures expectations and tables use, by the names of experiment::metrics_of.
nlohmann::json single_stream_metrics(const bench::SingleStreamResult& result);
nlohmann::json level_metrics(const bench::LevelResult& level);

// The measured value an expectation is about, from a variant's result.json.
std::optional<double> find_metric(const nlohmann::json& result, const experiment::Expectation& expectation);

// A benchmark with more than this share of its requests failed is not measured.
inline constexpr double k_default_max_failed_pct = 5.0;

// "18 of 20 requests failed (90%, more than 5%)" when failed / requests is above
// max_failed_pct, else nullopt: the rule that refuses a benchmark its verdicts.
std::optional<std::string> too_many_failed(int requests, int failed, double max_failed_pct);

// The requests behind a figure.
struct Counts {
  int requests = 0;
  int completed = 0;
  int failed = 0;
  double error_rate() const { return requests > 0 ? static_cast<double>(failed) / requests : 0.0; }
  Counts& operator+=(const Counts& other);
};

// The requests of one level measurement of a result.json, or of a single-stream
// benchmark's runs; all 0 when it does not say.
Counts counts_of(const nlohmann::json& holder);
// Over every level and repeat of a benchmark entry (or its runs).
Counts benchmark_counts(const nlohmann::json& entry);
// too_many_failed over a benchmark entry's requests: the one judgment of the
// failure share, which fails a variant (ResultWriter), refuses a benchmark its
// verdicts (the report) and makes --resume measure it again.
std::optional<std::string> too_many_failed(const nlohmann::json& entry, double max_failed_pct);

} // namespace specctl::report
