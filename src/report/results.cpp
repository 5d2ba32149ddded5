#include <specctl/report/results.hpp>
#include <specctl/util/bounded_read.hpp>

#include <specctl/report/report.hpp>
#include <specctl/util/error.hpp>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <fmt/format.h>
#include <fstream>

namespace specctl::report {

namespace {

std::optional<double> as_number(const nlohmann::json& value) {
  if (value.is_number()) {
    return value.get<double>();
  }
  return std::nullopt;
}

// The array at j[key], or an empty one.
const nlohmann::json& array_of(const nlohmann::json& j, std::string_view key) {
  static const nlohmann::json k_empty = nlohmann::json::array();
  const auto& at = dig(j, {key});
  return at.is_array() ? at : k_empty;
}

// Every measurement (repeat) of the level an expectation is about.
std::vector<const nlohmann::json*> find_levels(const nlohmann::json& benchmark, const experiment::Expectation& e) {
  std::vector<const nlohmann::json*> out;
  for (const auto& level : array_of(benchmark, "levels")) {
    if (!level.is_object()) {
      continue;
    }
    if (e.level && dig(level, {"concurrency"}).is_number_integer() && dig(level, {"concurrency"}) == *e.level) {
      out.push_back(&level);
    } else if (auto rate = as_number(dig(level, {"rate"})); e.rate && rate && std::abs(*rate - *e.rate) < 1e-9) {
      out.push_back(&level);
    }
  }
  return out;
}

nlohmann::json read_json_file(const std::filesystem::path& path, std::string_view what) {
  auto text = util::read_regular_file(path, util::k_max_result_bytes, "a result file");
  if (!text) {
    throw Error(text.error().error == ENOENT
                    ? fmt::format("{}: cannot read {} (is \"{}\" a specctl result folder?)", path.string(), what,
                                  path.parent_path().string())
                    : fmt::format("{}: cannot read {}: {}", path.string(), what, text.error().reason),
                ErrorKind::bad_input);
  }
  auto doc = nlohmann::json::parse(*text, nullptr, false);
  if (doc.is_discarded() || !doc.is_object()) {
    throw Error(fmt::format("{}: not valid JSON", path.string()), ErrorKind::bad_input);
  }
  return doc;
}

} // namespace

const nlohmann::json& dig(const nlohmann::json& j, std::initializer_list<std::string_view> keys) {
  static const nlohmann::json k_null;
  const nlohmann::json* at = &j;
  for (auto key : keys) {
    if (!at->is_object()) {
      return k_null;
    }
    auto it = at->find(key);
    if (it == at->end()) {
      return k_null;
    }
    at = &*it;
  }
  return *at;
}

nlohmann::json finite_or_null(double value) {
  return std::isfinite(value) ? nlohmann::json(value) : nlohmann::json(nullptr);
}

std::optional<nlohmann::json> read_result(const ResultPaths& paths, const std::string& variant) {
  auto text = util::read_regular_file(paths.result(variant), util::k_max_result_bytes, "a result file");
  if (!text) {
    return std::nullopt;
  }
  auto result = nlohmann::json::parse(*text, nullptr, false);
  if (result.is_discarded() || !result.is_object() || dig(result, {"format"}) != k_result_format) {
    return std::nullopt;
  }
  return result;
}

std::optional<std::string> result_damage(const ResultPaths& paths, const std::string& variant) {
  auto path = paths.result(variant);
  auto read = util::read_regular_file(path, util::k_max_result_bytes, "a result file");
  if (!read) {
    if (read.error().error == ENOENT) {
      return std::nullopt;
    }
    return fmt::format("{}: damaged: {}", path.string(), read.error().reason);
  }
  std::string text = std::move(*read);
  try {
    auto result = nlohmann::json::parse(text);
    if (!result.is_object() || dig(result, {"format"}) != k_result_format) {
      return fmt::format("{}: damaged: not a specctl result (no \"format\": \"{}\")", path.string(), k_result_format);
    }
  } catch (const nlohmann::json::parse_error& e) {
    std::string why = e.what();
    // "[json.exception.parse_error.101] parse error at line 3, column 5: syntax error ..."
    if (auto close = why.find("] "); why.starts_with("[json.exception") && close != std::string::npos) {
      why = why.substr(close + 2);
    }
    // e.byte counts from 1, and is one past the end when the file ends too soon.
    return fmt::format("{}: damaged at byte {} of {}: {}", path.string(), std::min<std::size_t>(e.byte, text.size()),
                       text.size(), why);
  }
  return std::nullopt;
}

namespace {

// The counts behind a level's figures, and where its tokens came from, so a reader can judge them.
void put_counts(nlohmann::json& out, const bench::LevelResult& level) {
  out["error_rate"] = finite_or_null(level.requests > 0 ? static_cast<double>(level.failed) / level.requests : NAN);
  out["requests"] = level.requests;
  out["completed"] = level.completed;
  out["failed"] = level.failed;
  out["prompt_tokens"] = level.prompt_tokens >= 0 ? nlohmann::json(level.prompt_tokens) : nlohmann::json(nullptr);
  out["cached_tokens"] =
      level.cached_prompt_tokens >= 0 ? nlohmann::json(level.cached_prompt_tokens) : nlohmann::json(nullptr);
  out["token_source"] = bench::token_source(level);
}

} // namespace

nlohmann::json single_stream_metrics(const bench::SingleStreamResult& result) {
  const auto& level = result.level;
  // The decode speed without the prefill, to hold against the server's own figure.
  double decode_sum = 0;
  int decode_runs = 0;
  for (const auto& run : result.runs) {
    if (run.ok && std::isfinite(run.decode_tok_s)) {
      decode_sum += run.decode_tok_s;
      ++decode_runs;
    }
  }
  nlohmann::json out = {
      {"output_tok_s", finite_or_null(result.mean)},
      {"output_tok_s_median", finite_or_null(result.median)},
      {"output_tok_s_stdev", finite_or_null(result.stdev)},
      {"runs", result.runs.size()},
      {"ttft_ms", finite_or_null(level.ttft_ms.mean)},
      {"tpot_ms", finite_or_null(level.tpot_ms.mean)},
      {"e2e_ms", finite_or_null(level.e2e_ms.mean)},
      {"decode_tok_s", finite_or_null(decode_runs > 0 ? decode_sum / decode_runs : NAN)},
  };
  put_counts(out, level);
  if (level.server_tok_s > 0) {
    // The server's own decode speed over the same requests (llama.cpp's timings.predicted_per_second).
    out["server_decode_tok_s"] = level.server_tok_s;
  }
  if (level.tunnel_rtt_ms) {
    // Beside TTFT: the SSH tunnel's round trip, which every TTFT measured through it holds.
    out["tunnel_rtt_ms"] = finite_or_null(*level.tunnel_rtt_ms);
  }
  return out;
}

nlohmann::json level_metrics(const bench::LevelResult& level) {
  nlohmann::json out = {
      {"output_tok_s", finite_or_null(level.output_tok_s)},
      {"request_s", finite_or_null(level.request_s)},
  };
  put_counts(out, level);
  const std::pair<const char*, const bench::Summary*> latencies[] = {
      {"ttft", &level.ttft_ms}, {"tpot", &level.tpot_ms}, {"itl", &level.itl_ms}, {"e2e", &level.e2e_ms}};
  for (const auto& [name, summary] : latencies) {
    out[fmt::format("{}_p50_ms", name)] = finite_or_null(summary->p50);
    out[fmt::format("{}_p90_ms", name)] = finite_or_null(summary->p90);
    out[fmt::format("{}_p99_ms", name)] = finite_or_null(summary->p99);
  }
  if (level.tunnel_rtt_ms) {
    out["tunnel_rtt_ms"] = finite_or_null(*level.tunnel_rtt_ms);
  }
  return out;
}

std::optional<std::string> too_many_failed(int requests, int failed, double max_failed_pct) {
  if (requests <= 0 || !(100.0 * failed / requests > max_failed_pct)) {
    return std::nullopt;
  }
  return fmt::format("{} of {} requests failed ({:.3g}%, more than {:g}%)", failed, requests, 100.0 * failed / requests,
                     max_failed_pct);
}

std::optional<std::string> too_many_failed(const nlohmann::json& entry, double max_failed_pct) {
  auto counts = benchmark_counts(entry);
  return too_many_failed(counts.requests, counts.failed, max_failed_pct);
}

Counts& Counts::operator+=(const Counts& other) {
  requests += other.requests;
  completed += other.completed;
  failed += other.failed;
  return *this;
}

// The requests behind one level measurement, or a single-stream benchmark's runs.
Counts counts_of(const nlohmann::json& holder) {
  const auto& m = dig(holder, {"metrics"});
  const auto& r = dig(holder, {"result"});
  auto count = [&](std::string_view what) -> std::optional<int> {
    for (const auto* at : {&dig(m, {what}), &dig(r, {what}), &dig(r, {"level", what})}) {
      if (at->is_number()) {
        return at->get<int>();
      }
    }
    return std::nullopt;
  };
  if (auto requests = count("requests")) {
    return {*requests, count("completed").value_or(0), count("failed").value_or(0)};
  }
  Counts out;
  for (const auto& run : array_of(dig(holder, {"result"}), "runs")) {
    ++out.requests;
    ++(dig(run, {"ok"}) == true ? out.completed : out.failed);
  }
  return out;
}

// Over every level and repeat of a benchmark (or its runs).
Counts benchmark_counts(const nlohmann::json& entry) {
  const auto& levels = array_of(entry, "levels");
  if (levels.empty()) {
    return counts_of(entry);
  }
  Counts out;
  for (const auto& level : levels) {
    out += counts_of(level);
  }
  return out;
}

std::optional<double> find_metric(const nlohmann::json& result, const experiment::Expectation& e) {
  const auto& benchmark = dig(result, {"benchmarks", e.benchmark});
  if (!e.level && !e.rate) {
    return as_number(dig(benchmark, {"metrics", e.metric}));
  }
  // A level measured several times (repeats): the mean of its measurements.
  double sum = 0;
  int n = 0;
  for (const auto* level : find_levels(benchmark, e)) {
    if (auto v = as_number(dig(*level, {"metrics", e.metric})); v && std::isfinite(*v)) {
      sum += *v;
      ++n;
    }
  }
  return n > 0 ? std::optional(sum / n) : std::nullopt;
}

RunData read_run(const std::filesystem::path& dir) {
  ResultPaths paths{dir};
  RunData data;
  data.dir = dir;
  data.run = read_json_file(paths.run_info(), "run.json");
  if (dig(data.run, {"format"}) != k_run_format) {
    throw Error(fmt::format("{}: not a specctl run (format is not \"{}\")", paths.run_info().string(), k_run_format),
                ErrorKind::bad_input);
  }
  data.experiment = read_json_file(paths.resolved(), "experiment.json");
  if (auto tune = util::read_regular_file(dir / "tune.json", util::k_max_result_bytes, "a result file")) {
    // A tuning's answer; one that cannot be read leaves the report without it.
    auto answer = nlohmann::json::parse(*tune, nullptr, false);
    if (answer.is_object() && answer.value("format", "") == "specctl-tune-answer") {
      data.tune = std::move(answer);
    }
  }
  for (const auto& v : array_of(data.run, "variants")) {
    if (v.is_string()) {
      if (auto result = read_result(paths, v.get<std::string>())) {
        data.results[v.get<std::string>()] = std::move(*result);
      } else if (auto damage = result_damage(paths, v.get<std::string>())) {
        data.damaged[v.get<std::string>()] = std::move(*damage);
      }
    }
  }
  return data;
}

} // namespace specctl::report
