#include <specctl/bench/vllm_json.hpp>

#include <specctl/bench/goodput.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <ctime>

namespace specctl::bench {

namespace {

constexpr double k_ms_per_s = 1000.0;

double mean_of(const std::vector<double>& values) {
  if (values.empty()) {
    return 0.0;
  }
  double sum = 0.0;
  for (const double value : values) {
    sum += value;
  }
  return sum / static_cast<double>(values.size());
}

double median_of(std::vector<double> values) {
  if (values.empty()) {
    return 0.0;
  }
  std::sort(values.begin(), values.end());
  const std::size_t middle = values.size() / 2;
  return values.size() % 2 == 1 ? values[middle] : (values[middle - 1] + values[middle]) / 2.0;
}

// vLLM names a percentile's key by its value: "p99", "p99.9" (Python's str of a float).
std::string percentile_word(double p) {
  if (p == std::floor(p)) {
    return fmt::format("{}", static_cast<long long>(p));
  }
  return fmt::format("{}", p);
}

void add_metric(nlohmann::ordered_json& json, std::string_view name, const std::vector<double>& values_ms,
                const std::vector<double>& percentiles) {
  json[fmt::format("mean_{}_ms", name)] = mean_of(values_ms);
  json[fmt::format("median_{}_ms", name)] = median_of(values_ms);
  json[fmt::format("std_{}_ms", name)] = numpy_std(values_ms);
  for (const double p : percentiles) {
    json[fmt::format("p{}_{}_ms", percentile_word(p), name)] = numpy_percentile(values_ms, p);
  }
}

// vLLM's calculate_metrics: token arrivals in one-second buckets from the first
// send, and the most requests in flight at once.
std::pair<double, int> peaks(const std::vector<VllmRequestRecord>& requests) {
  std::vector<const VllmRequestRecord*> done;
  for (const VllmRequestRecord& request : requests) {
    if (request.ok) {
      done.push_back(&request);
    }
  }
  if (done.empty()) {
    return {0.0, 0};
  }
  double first_start = done.front()->start_ms / k_ms_per_s;
  double last_end = (done.front()->start_ms + done.front()->e2e_ms) / k_ms_per_s;
  for (const VllmRequestRecord* request : done) {
    first_start = std::min(first_start, request->start_ms / k_ms_per_s);
    last_end = std::max(last_end, (request->start_ms + request->e2e_ms) / k_ms_per_s);
  }
  const auto buckets = static_cast<std::size_t>(std::ceil(last_end - first_start)) + 1;
  std::vector<double> tokens(buckets, 0.0);
  const auto count = [&](double at) {
    // Python's int(): truncation toward zero.
    const auto bucket = static_cast<long long>(at - first_start);
    if (bucket >= 0 && static_cast<std::size_t>(bucket) < buckets) {
      tokens[static_cast<std::size_t>(bucket)] += 1;
    }
  };
  std::vector<std::pair<double, int>> events;
  for (const VllmRequestRecord* request : done) {
    double at = (request->start_ms + request->ttft_ms) / k_ms_per_s;
    count(at);
    for (const double gap : request->itl_ms) {
      at += gap / k_ms_per_s;
      count(at);
    }
    events.emplace_back(request->start_ms / k_ms_per_s, 1);
    events.emplace_back((request->start_ms + request->e2e_ms) / k_ms_per_s, -1);
  }
  // Half-open intervals: at a tie, an end comes before a start.
  std::sort(events.begin(), events.end());
  int in_flight = 0;
  int peak = 0;
  for (const auto& [at, delta] : events) {
    in_flight += delta;
    peak = std::max(peak, in_flight);
  }
  return {*std::max_element(tokens.begin(), tokens.end()), peak};
}

std::size_t good_requests(const VllmLevel& level) {
  const RequestBounds bounds{level.goodput_ttft_ms, level.goodput_tpot_ms, level.goodput_e2el_ms};
  std::size_t good = 0;
  for (const VllmRequestRecord& request : level.requests) {
    if (request.ok && meets_bounds(bounds, request.ttft_ms, request.e2e_ms, request.output_tokens)) {
      ++good;
    }
  }
  return good;
}

} // namespace

double numpy_percentile(std::vector<double> values, double p) {
  if (values.empty()) {
    return 0.0;
  }
  std::sort(values.begin(), values.end());
  const double index = (p / 100.0) * static_cast<double>(values.size() - 1);
  const auto below = static_cast<std::size_t>(std::floor(index));
  const std::size_t above = std::min(below + 1, values.size() - 1);
  const double t = index - static_cast<double>(below);
  const double a = values[below];
  const double b = values[above];
  // numpy's _lerp: from the nearer end, which keeps the result monotonic in t.
  return t >= 0.5 ? b - (b - a) * (1.0 - t) : a + (b - a) * t;
}

double numpy_std(const std::vector<double>& values) {
  if (values.empty()) {
    return 0.0;
  }
  const double mean = mean_of(values);
  double squares = 0.0;
  for (const double value : values) {
    squares += (value - mean) * (value - mean);
  }
  return std::sqrt(squares / static_cast<double>(values.size()));
}

std::string vllm_date(std::chrono::system_clock::time_point when) {
  const std::time_t seconds = std::chrono::system_clock::to_time_t(when);
  std::tm local{};
  localtime_r(&seconds, &local);
  return fmt::format("{:04}{:02}{:02}-{:02}{:02}{:02}", local.tm_year + 1900, local.tm_mon + 1, local.tm_mday,
                     local.tm_hour, local.tm_min, local.tm_sec);
}

nlohmann::ordered_json vllm_result_json(const VllmLevel& level) {
  const auto optional_string = [](const std::optional<std::string>& value) {
    return value ? nlohmann::ordered_json(*value) : nlohmann::ordered_json(nullptr);
  };
  nlohmann::ordered_json json;
  json["date"] = level.date;
  json["endpoint_type"] = level.backend;
  json["backend"] = level.backend;
  json["label"] = optional_string(level.label);
  json["model_id"] = level.model_id;
  json["tokenizer_id"] = optional_string(level.tokenizer_id);
  json["num_prompts"] = level.num_prompts;
  json["request_rate"] = level.request_rate ? nlohmann::ordered_json(*level.request_rate) : "inf";
  json["burstiness"] = level.burstiness;
  json["max_concurrency"] =
      level.max_concurrency ? nlohmann::ordered_json(*level.max_concurrency) : nlohmann::ordered_json(nullptr);

  std::size_t completed = 0;
  long long total_input = 0;
  long long total_output = 0;
  std::vector<double> ttfts;
  std::vector<double> tpots;
  std::vector<double> itls;
  std::vector<double> e2els;
  for (const VllmRequestRecord& request : level.requests) {
    if (!request.ok) {
      continue;
    }
    ++completed;
    total_input += request.input_tokens;
    total_output += request.output_tokens;
    ttfts.push_back(request.ttft_ms);
    if (double tpot = tpot_ms(request.ttft_ms, request.e2e_ms, request.output_tokens); !std::isnan(tpot)) {
      tpots.push_back(tpot);
    }
    itls.insert(itls.end(), request.itl_ms.begin(), request.itl_ms.end());
    e2els.push_back(request.e2e_ms);
  }
  const double duration = level.duration_s;
  const auto per_second = [&](double amount) { return duration > 0 ? amount / duration : 0.0; };
  const bool goodput = level.goodput_ttft_ms || level.goodput_tpot_ms || level.goodput_e2el_ms;

  json["duration"] = duration;
  json["completed"] = completed;
  json["failed"] = level.requests.size() - completed;
  json["total_input_tokens"] = total_input;
  json["total_output_tokens"] = total_output;
  json["request_throughput"] = per_second(static_cast<double>(completed));
  json["request_goodput"] =
      goodput ? nlohmann::ordered_json(per_second(static_cast<double>(good_requests(level)))) : nullptr;
  json["output_throughput"] = per_second(static_cast<double>(total_output));
  json["total_token_throughput"] = per_second(static_cast<double>(total_input + total_output));

  const bool full = level.detail == VllmLevel::Detail::full;
  auto array = [] { return nlohmann::ordered_json::array(); };
  nlohmann::ordered_json input_lens = array(), output_lens = array(), ttft_list = array(), itl_lists = array(),
                         latencies = array(), start_times = array(), texts = array(), errors = array();
  for (const VllmRequestRecord& request : level.requests) {
    input_lens.push_back(request.input_tokens);
    output_lens.push_back(request.ok ? request.output_tokens : 0);
    ttft_list.push_back(request.ttft_ms / k_ms_per_s);
    nlohmann::ordered_json gaps = array();
    for (const double gap : request.itl_ms) {
      gaps.push_back(gap / k_ms_per_s);
    }
    itl_lists.push_back(std::move(gaps));
    latencies.push_back(request.e2e_ms / k_ms_per_s);
    start_times.push_back(request.start_ms / k_ms_per_s);
    texts.push_back(request.generated_text);
    errors.push_back(request.error);
  }
  if (full) {
    json["input_lens"] = std::move(input_lens);
    json["output_lens"] = std::move(output_lens);
    json["ttfts"] = std::move(ttft_list);
    json["itls"] = std::move(itl_lists);
  }
  json["latencies"] = std::move(latencies);
  if (full) {
    json["start_times"] = std::move(start_times);
    json["generated_texts"] = std::move(texts);
    json["errors"] = std::move(errors);
  }
  const auto [tokens_per_s, concurrent] = peaks(level.requests);
  json["max_output_tokens_per_s"] = tokens_per_s;
  json["max_concurrent_requests"] = concurrent;
  json["rtfx"] = 0.0;

  add_metric(json, "ttft", ttfts, level.percentiles);
  add_metric(json, "tpot", tpots, level.percentiles);
  add_metric(json, "itl", itls, level.percentiles);
  add_metric(json, "e2el", e2els, level.percentiles);
  return json;
}

VllmLevel vllm_level_of(const LevelResult& level, const std::string& model, Endpoint endpoint,
                        std::chrono::system_clock::time_point when) {
  VllmLevel v;
  v.date = vllm_date(when);
  v.backend = endpoint == Endpoint::chat ? "openai-chat" : "openai";
  v.model_id = model;
  v.num_prompts = static_cast<int>(level.records.size());
  if (level.rate && std::isfinite(*level.rate)) {
    v.request_rate = *level.rate;
  }
  v.burstiness = level.rate ? level.burstiness : 1.0;
  v.max_concurrency = level.rate ? level.max_concurrency : std::optional<int>(level.concurrency);
  v.duration_s = level.duration_s;
  v.requests.reserve(level.records.size());
  for (const auto& r : level.records) {
    VllmRequestRecord out;
    out.ok = r.ok();
    out.input_tokens = std::max(r.prompt_tokens, 0);
    out.output_tokens = r.output_tokens;
    out.ttft_ms = std::isnan(r.ttft_ms) ? 0 : r.ttft_ms;
    out.e2e_ms = std::isnan(r.e2e_ms) ? 0 : r.e2e_ms;
    out.start_ms = r.start_s * 1000.0;
    for (std::size_t i = 1; i < r.chunks.size(); ++i) {
      out.itl_ms.push_back((r.chunks[i].at_us - r.chunks[i - 1].at_us) / 1000.0);
    }
    out.error = r.ok() ? std::string() : (r.error.empty() ? std::string("failed") : r.error);
    v.requests.push_back(std::move(out));
  }
  return v;
}

} // namespace specctl::bench
