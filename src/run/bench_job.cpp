#include "server_watch.hpp"

#include <specctl/bench/wire.hpp>
#include <specctl/bench/workload.hpp>
#include <specctl/http/get.hpp>
#include <specctl/remote/local_host.hpp>
#include <specctl/report/result_writer.hpp>
#include <specctl/run/bench_job.hpp>
#include <specctl/util/atomic_file.hpp>

#include <fmt/format.h>
#include <fstream>
#include <sstream>

namespace specctl::run {

namespace {

using nlohmann::json;

// 3: prompts are workload requests (id, category, prompt or messages, lengths), not texts.
constexpr int k_job_version = 3;

const char* mode_name(BenchJob::Mode mode) {
  switch (mode) {
  case BenchJob::Mode::single_stream:
    return "single_stream";
  case BenchJob::Mode::rate:
    return "rate";
  case BenchJob::Mode::concurrency:
    break;
  }
  return "concurrency";
}

template <typename T> T field(const json& j, const char* key) {
  try {
    return j.at(key).get<T>();
  } catch (const json::exception& e) {
    throw Error(fmt::format("bench job: field \"{}\": {}", key, e.what()), ErrorKind::bad_input);
  }
}

json prompts_json(const std::vector<bench::WorkloadRequest>& prompts) {
  json out = json::array();
  for (const auto& p : prompts) {
    out.push_back(bench::request_to_json(p));
  }
  return out;
}

// The result document's frame; the mode's figures are added to it.
json result_frame(const BenchJob& job) {
  return {{"format", k_bench_job_result_format}, {"version", k_job_version}, {"mode", mode_name(job.mode)},
          {"specctl_version", SPECCTL_VERSION},  {"window", json::object()}, {"server_death", nullptr}};
}

void write_result(const BenchJob& job, const json& result) {
  if (auto written =
          util::write_file_atomic(job.result_file, result.dump(-1, ' ', false, json::error_handler_t::replace));
      !written) {
    throw written.error();
  }
}

// Calls `copy` with each field a job shares with bench::RunOptions and its
// counterpart there: the one list of them, read both ways.
template <typename Job, typename Common, typename Copy> void shared_fields(Job& job, Common& common, Copy copy) {
  copy(job.request, common.request);
  copy(job.prompts, common.prompts);
  copy(job.unique_prompts, common.unique_prompts);
  copy(job.prompt_tag, common.prompt_tag);
  copy(job.warmup, common.warmup);
  copy(job.preconnect, common.preconnect);
}

} // namespace

void set_common(BenchJob& job, const bench::RunOptions& common) {
  shared_fields(job, common, [](auto& to, const auto& from) { to = from; });
}

json to_json(const BenchJob& job) {
  return {{"format", k_bench_job_format},
          {"version", k_job_version},
          {"mode", mode_name(job.mode)},
          {"url", job.url},
          {"model", job.model},
          {"request",
           {{"endpoint", bench::endpoint_name(job.request.endpoint)},
            {"max_tokens", job.request.max_tokens},
            {"ignore_eos", job.request.ignore_eos},
            {"temperature", job.request.temperature},
            {"include_usage", job.request.include_usage},
            {"continuous_usage", job.request.continuous_usage},
            {"timeout_ms", job.request.timeout.count()},
            {"connect_timeout_ms", job.request.connect_timeout.count()},
            {"idle_timeout_ms", job.request.idle_timeout.count()}}},
          {"prompts", prompts_json(job.prompts)},
          {"unique_prompts", job.unique_prompts},
          {"prompt_tag", job.prompt_tag},
          {"warmup", job.warmup},
          {"preconnect", job.preconnect},
          {"deadline_s", job.deadline_s ? json(*job.deadline_s) : json(nullptr)},
          {"runs", job.runs},
          {"levels", job.levels},
          {"requests", job.requests ? json(*job.requests) : json(nullptr)},
          {"rates", job.rates},
          {"duration_ms", job.duration.count()},
          {"max_concurrency", job.max_concurrency ? json(*job.max_concurrency) : json(nullptr)},
          {"burstiness", job.burstiness},
          {"seed", job.seed},
          {"server", {{"dir", job.server_dir}, {"pid", job.server_pid}, {"log", job.server_log}}},
          {"metrics_path", job.metrics_path},
          {"progress_file", job.progress_file},
          {"result_file", job.result_file}};
}

BenchJob bench_job_from_json(const json& j) {
  if (!j.is_object() || j.value("format", "") != k_bench_job_format) {
    throw Error("not a specctl bench job", ErrorKind::bad_input);
  }
  if (j.value("version", 0) != k_job_version) {
    throw Error(
        fmt::format("bench job version {} (this specctl reads version {})", j.value("version", 0), k_job_version),
        ErrorKind::bad_input);
  }
  BenchJob job;
  const auto mode = field<std::string>(j, "mode");
  job.mode = mode == "single_stream" ? BenchJob::Mode::single_stream
             : mode == "rate"        ? BenchJob::Mode::rate
                                     : BenchJob::Mode::concurrency;
  job.url = field<std::string>(j, "url");
  job.model = field<std::string>(j, "model");
  const json& request = j.at("request");
  job.request.endpoint =
      field<std::string>(request, "endpoint") == "chat" ? bench::Endpoint::chat : bench::Endpoint::completions;
  job.request.max_tokens = field<int>(request, "max_tokens");
  job.request.ignore_eos = field<bool>(request, "ignore_eos");
  job.request.temperature = field<double>(request, "temperature");
  job.request.include_usage = field<bool>(request, "include_usage");
  job.request.continuous_usage = field<bool>(request, "continuous_usage");
  job.request.timeout = std::chrono::milliseconds(field<std::int64_t>(request, "timeout_ms"));
  job.request.connect_timeout = std::chrono::milliseconds(field<std::int64_t>(request, "connect_timeout_ms"));
  job.request.idle_timeout = std::chrono::milliseconds(field<std::int64_t>(request, "idle_timeout_ms"));
  const json& prompts = j.at("prompts");
  if (!prompts.is_array()) {
    throw Error("the bench job's \"prompts\" is not a list", ErrorKind::bad_input);
  }
  for (const json& p : prompts) {
    job.prompts.push_back(bench::request_from_json(p));
  }
  job.unique_prompts = field<bool>(j, "unique_prompts");
  job.prompt_tag = field<std::string>(j, "prompt_tag");
  job.warmup = field<int>(j, "warmup");
  job.preconnect = field<bool>(j, "preconnect");
  if (!j.at("deadline_s").is_null()) {
    job.deadline_s = field<double>(j, "deadline_s");
  }
  job.runs = field<int>(j, "runs");
  job.levels = field<std::vector<int>>(j, "levels");
  if (!j.at("requests").is_null()) {
    job.requests = field<int>(j, "requests");
  }
  job.rates = field<std::vector<double>>(j, "rates");
  job.duration = std::chrono::milliseconds(field<std::int64_t>(j, "duration_ms"));
  if (!j.at("max_concurrency").is_null()) {
    job.max_concurrency = field<int>(j, "max_concurrency");
  }
  job.burstiness = field<double>(j, "burstiness");
  job.seed = field<std::uint64_t>(j, "seed");
  const json& server = j.at("server");
  job.server_dir = field<std::string>(server, "dir");
  job.server_pid = field<int>(server, "pid");
  job.server_log = field<std::string>(server, "log");
  job.metrics_path = field<std::string>(j, "metrics_path");
  job.progress_file = field<std::string>(j, "progress_file");
  job.result_file = field<std::string>(j, "result_file");
  return job;
}

int run_bench_job(const std::filesystem::path& file, const std::atomic<bool>* stop) {
  std::ifstream in(file);
  if (!in) {
    throw Error(fmt::format("cannot read the bench job {}", file.string()), ErrorKind::bad_input);
  }
  std::stringstream text;
  text << in.rdbuf();
  const json parsed = json::parse(text.str(), nullptr, false);
  if (parsed.is_discarded()) {
    throw Error(fmt::format("{}: not JSON", file.string()), ErrorKind::bad_input);
  }
  const BenchJob job = bench_job_from_json(parsed);
  json result = result_frame(job);
  try {
    // The server watched from here, as specctl run watches it from afar.
    remote::LocalHost local;
    std::optional<detail::ServerWatch> watch;
    if (job.server_pid > 0) {
      watch.emplace(local, remote::RunFiles{job.server_dir}, job.server_pid, stop, /*heartbeat=*/false);
    }
    std::ofstream progress(job.progress_file, std::ios::app);
    bench::RunOptions common;
    shared_fields(job, common, [](const auto& from, auto& to) { to = from; });
    common.stop = watch ? watch->stop_flag() : stop;
    if (watch) {
      common.hold = watch->hold_flag();
      common.on_request_failed = [&](bench::FailureKind kind) { watch->poke(kind); };
    }
    if (job.deadline_s) {
      common.deadline =
          std::chrono::steady_clock::now() + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                                 std::chrono::duration<double>(*job.deadline_s));
    }
    common.on_progress = [&](const bench::Progress& p) { progress << bench::to_wire(p).dump() << '\n' << std::flush; };
    common.on_measured_start = [&] {
      json window = json::object();
      std::error_code ec;
      auto size = job.server_log.empty() ? 0 : std::filesystem::file_size(job.server_log, ec);
      window["log_from"] = job.server_log.empty() || ec ? json(nullptr) : json(size);
      window["metrics_before"] = nullptr;
      if (!job.metrics_path.empty()) {
        auto response = http::get(job.url + job.metrics_path);
        if (response && response->status == 200) {
          window["metrics_before"] = std::move(response->body);
        }
      }
      result["window"] = std::move(window);
    };
    const bench::Target target{job.url, job.model, ""};
    switch (job.mode) {
    case BenchJob::Mode::single_stream:
      result["single_stream"] = bench::to_wire(bench::run_single_stream(target, {common, job.runs}));
      break;
    case BenchJob::Mode::concurrency:
      result["concurrency"] = bench::to_wire(bench::run_concurrency(target, {common, job.levels, job.requests}));
      break;
    case BenchJob::Mode::rate:
      result["rate"] = bench::to_wire(
          bench::run_rate(target, {common, job.rates, job.duration, job.max_concurrency, job.burstiness, job.seed}));
      break;
    }
    if (watch) {
      if (auto death = watch->death()) {
        result["server_death"] = {{"exit_code", death->exit_code ? json(*death->exit_code) : json(nullptr)},
                                  {"after_s", death->after_s}};
      }
    }
  } catch (const Error& e) {
    result["error"] = {{"message", e.what()}, {"kind", report::error_kind_name(e.kind())}};
  } catch (const std::exception& e) {
    result["error"] = {{"message", fmt::format("internal error: {}", e.what())},
                       {"kind", report::error_kind_name(ErrorKind::failed)}};
  }
  write_result(job, result);
  return 0;
}

} // namespace specctl::run
