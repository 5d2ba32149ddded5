#pragma once

// A built-in benchmark run on the GPU node itself: `specctl run` writes a job
// file into the server's run directory, starts `specctl bench-job JOB.json`
// there detached (like the server), and reads back what it wrote. The SSH link
// then carries nothing that is measured; a dropped or stalled connection only
// delays reading the result.

#include <specctl/bench/bench.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace specctl::run {

inline constexpr const char* k_bench_job_format = "specctl-bench-job";
inline constexpr const char* k_bench_job_result_format = "specctl-bench-job-result";

struct BenchJob {
  enum class Mode { single_stream, concurrency, rate };
  Mode mode = Mode::concurrency;
  // The server as the host sees it ("http://127.0.0.1:30000"), and its model
  // (empty: the first of /v1/models).
  std::string url;
  std::string model;
  bench::RequestOptions request;
  std::vector<bench::WorkloadRequest> prompts;
  // bench::RunOptions::unique_prompts and prompt_tag.
  bool unique_prompts = true;
  std::string prompt_tag;
  int warmup = 0;
  bool preconnect = true;
  // Seconds from the job's start to the benchmark's time limit; unset: none.
  std::optional<double> deadline_s;
  // single_stream
  int runs = 1;
  // concurrency
  std::vector<int> levels;
  std::optional<int> requests;
  // rate
  std::vector<double> rates;
  std::chrono::milliseconds duration{0};
  std::optional<int> max_concurrency;
  double burstiness = 1.0;
  std::uint64_t seed = 0;
  // The server, watched from the host as `specctl run` watches it: the job
  // stops when it dies, and holds new requests while a refused one is checked.
  std::string server_dir;
  int server_pid = 0;
  // Read when the measured requests begin, for the server's figures over the
  // window: the server log's size, and its Prometheus text at this path ("" none).
  std::string server_log;
  std::string metrics_path;
  // Where the job writes: one JSON line of bench::Progress per update, and
  // the result (written once, atomically, also when stopped by SIGTERM).
  std::string progress_file;
  std::string result_file;
};

// Copies what a job shares with bench::RunOptions (the request, prompts,
// warmup, preconnect) from the options of the benchmark it stands for.
void set_common(BenchJob& job, const bench::RunOptions& common);

nlohmann::json to_json(const BenchJob& job);
// Throws specctl::Error (bad_input) naming what is wrong.
BenchJob bench_job_from_json(const nlohmann::json& json);

// Runs the job in `file` (its result and progress go where it says) until it
// ends or `stop` is set (requests in flight are recorded as interrupted).
// 0 once the result is written, whatever the benchmark measured; otherwise an
// exit code, after writing what it can.
int run_bench_job(const std::filesystem::path& file, const std::atomic<bool>* stop);

} // namespace specctl::run
