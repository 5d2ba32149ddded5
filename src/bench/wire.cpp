#include <specctl/bench/wire.hpp>

#include <cmath>
#include <fmt/format.h>
#include <limits>

namespace specctl::bench {

namespace {

using nlohmann::json;

// JSON has no NaN or infinity: they travel as text.
json real(double value) {
  if (std::isnan(value)) {
    return "nan";
  }
  if (std::isinf(value)) {
    return value > 0 ? "inf" : "-inf";
  }
  return value;
}

[[noreturn]] void bad(std::string_view key, std::string_view what) {
  throw Error(fmt::format("bench result: field \"{}\" {}", key, what));
}

const json& at(const json& object, std::string_view key) {
  if (!object.is_object()) {
    bad(key, "is in something that is not an object");
  }
  auto it = object.find(key);
  if (it == object.end()) {
    bad(key, "is missing");
  }
  return *it;
}

double real_of(const json& value, std::string_view key) {
  if (value.is_number()) {
    return value.get<double>();
  }
  if (value.is_string()) {
    const auto& text = value.get_ref<const std::string&>();
    if (text == "nan") {
      return std::numeric_limits<double>::quiet_NaN();
    }
    if (text == "inf") {
      return std::numeric_limits<double>::infinity();
    }
    if (text == "-inf") {
      return -std::numeric_limits<double>::infinity();
    }
  }
  bad(key, "is not a number");
}

double real_at(const json& object, std::string_view key) {
  return real_of(at(object, key), key);
}

template <typename Int> Int int_at(const json& object, std::string_view key) {
  const json& value = at(object, key);
  if (!value.is_number_integer()) {
    bad(key, "is not an integer");
  }
  return value.get<Int>();
}

bool bool_at(const json& object, std::string_view key) {
  const json& value = at(object, key);
  if (!value.is_boolean()) {
    bad(key, "is not true or false");
  }
  return value.get<bool>();
}

std::string string_at(const json& object, std::string_view key) {
  const json& value = at(object, key);
  if (!value.is_string()) {
    bad(key, "is not a string");
  }
  return value.get<std::string>();
}

std::vector<std::string> strings_at(const json& object, std::string_view key) {
  const json& value = at(object, key);
  if (!value.is_array()) {
    bad(key, "is not a list");
  }
  std::vector<std::string> out;
  for (const auto& item : value) {
    if (!item.is_string()) {
      bad(key, "holds something that is not a string");
    }
    out.push_back(item.get<std::string>());
  }
  return out;
}

const json& array_at(const json& object, std::string_view key) {
  const json& value = at(object, key);
  if (!value.is_array()) {
    bad(key, "is not a list");
  }
  return value;
}

// A Summary's figures by their names on the wire, beside its "count".
constexpr std::array<std::pair<const char*, double Summary::*>, 7> k_summary_figures{{{"mean", &Summary::mean},
                                                                                      {"p50", &Summary::p50},
                                                                                      {"p90", &Summary::p90},
                                                                                      {"p99", &Summary::p99},
                                                                                      {"stdev", &Summary::stdev},
                                                                                      {"min", &Summary::min},
                                                                                      {"max", &Summary::max}}};

json summary_wire(const Summary& s) {
  json out = {{"count", s.count}};
  for (const auto& [name, figure] : k_summary_figures) {
    out[name] = real(s.*figure);
  }
  return out;
}

Summary summary_from(const json& object, std::string_view key) {
  const json& s = at(object, key);
  Summary out;
  out.count = int_at<std::size_t>(s, "count");
  for (const auto& [name, figure] : k_summary_figures) {
    out.*figure = real_at(s, name);
  }
  return out;
}

std::optional<FailureKind> failure_from(const json& value) {
  if (value.is_null()) {
    return std::nullopt;
  }
  if (value.is_string()) {
    for (std::size_t k = 0; k < k_failure_kinds; ++k) {
      if (failure_name(static_cast<FailureKind>(k)) == value.get_ref<const std::string&>()) {
        return static_cast<FailureKind>(k);
      }
    }
  }
  bad("failure", "is not a failure kind");
}

} // namespace

std::string_view ended_name(Ended ended) {
  switch (ended) {
  case Ended::interrupted:
    return "interrupted";
  case Ended::timed_out:
    return "timed_out";
  case Ended::normally:
    break;
  }
  return "normally";
}

Ended ended_from_name(std::string_view name) {
  if (name == "interrupted") {
    return Ended::interrupted;
  }
  if (name == "timed_out") {
    return Ended::timed_out;
  }
  return Ended::normally;
}

json to_wire(const RequestRecord& r) {
  // Chunks flat, [at_us, tokens, at_us, tokens, ...]: a level holds many thousands.
  json chunks = json::array();
  for (const auto& chunk : r.chunks) {
    chunks.push_back(chunk.at_us);
    chunks.push_back(chunk.tokens);
  }
  return {{"index", r.index},
          {"prompt", r.prompt},
          {"prompt_id", r.prompt_id},
          {"category", r.category},
          {"input_tokens", r.input_tokens},
          {"max_tokens", r.max_tokens},
          {"start_s", real(r.start_s)},
          {"send_lag_ms", real(r.send_lag_ms)},
          {"failure", r.failure ? json(failure_name(*r.failure)) : json(nullptr)},
          {"error", r.error},
          {"http_status", r.http_status},
          {"response_id", r.response_id},
          {"finish_reason", r.finish_reason},
          {"output_tokens", r.output_tokens},
          {"token_source", r.token_source == TokenSource::usage ? "usage" : "chunks"},
          {"prompt_tokens", r.prompt_tokens},
          {"ttft_ms", real(r.ttft_ms)},
          {"e2e_ms", real(r.e2e_ms)},
          {"tpot_ms", real(r.tpot_ms)},
          {"chunks", std::move(chunks)},
          {"chunk_tokens_exact", r.chunk_tokens_exact},
          {"resends", r.resends},
          {"cached_tokens", r.cached_tokens},
          {"server_predicted_n", r.server_predicted_n},
          {"server_tok_s", real(r.server_tok_s)},
          {"draft_tokens", r.draft_tokens},
          {"draft_accepted", r.draft_accepted}};
}

RequestRecord record_from_wire(const json& j) {
  RequestRecord r;
  r.index = int_at<int>(j, "index");
  r.prompt = int_at<int>(j, "prompt");
  r.prompt_id = string_at(j, "prompt_id");
  r.category = string_at(j, "category");
  r.input_tokens = int_at<int>(j, "input_tokens");
  r.max_tokens = int_at<int>(j, "max_tokens");
  r.start_s = real_at(j, "start_s");
  r.send_lag_ms = real_at(j, "send_lag_ms");
  r.failure = failure_from(at(j, "failure"));
  r.error = string_at(j, "error");
  r.http_status = int_at<long>(j, "http_status");
  r.response_id = string_at(j, "response_id");
  r.finish_reason = string_at(j, "finish_reason");
  r.output_tokens = int_at<int>(j, "output_tokens");
  r.token_source = string_at(j, "token_source") == "chunks" ? TokenSource::chunks : TokenSource::usage;
  r.prompt_tokens = int_at<int>(j, "prompt_tokens");
  r.ttft_ms = real_at(j, "ttft_ms");
  r.e2e_ms = real_at(j, "e2e_ms");
  r.tpot_ms = real_at(j, "tpot_ms");
  const json& chunks = array_at(j, "chunks");
  if (chunks.size() % 2 != 0) {
    bad("chunks", "does not hold pairs");
  }
  r.chunks.reserve(chunks.size() / 2);
  for (std::size_t i = 0; i + 1 < chunks.size(); i += 2) {
    if (!chunks[i].is_number_unsigned() || !chunks[i + 1].is_number_unsigned()) {
      bad("chunks", "holds something that is not a count");
    }
    r.chunks.push_back({chunks[i].get<std::uint32_t>(), chunks[i + 1].get<std::uint32_t>()});
  }
  r.chunk_tokens_exact = bool_at(j, "chunk_tokens_exact");
  r.resends = int_at<int>(j, "resends");
  r.cached_tokens = int_at<int>(j, "cached_tokens");
  r.server_predicted_n = int_at<int>(j, "server_predicted_n");
  r.server_tok_s = real_at(j, "server_tok_s");
  r.draft_tokens = int_at<int>(j, "draft_tokens");
  r.draft_accepted = int_at<int>(j, "draft_accepted");
  return r;
}

json to_wire(const LevelResult& level) {
  json records = json::array();
  for (const auto& record : level.records) {
    records.push_back(to_wire(record));
  }
  return {{"concurrency", level.concurrency},
          {"rate", level.rate ? real(*level.rate) : json(nullptr)},
          {"burstiness", real(level.burstiness)},
          {"max_concurrency", level.max_concurrency ? json(*level.max_concurrency) : json(nullptr)},
          {"requests", level.requests},
          {"completed", level.completed},
          {"failed", level.failed},
          {"failures", level.failures},
          {"first_error", level.first_error},
          {"resent", level.resent},
          {"draft_tokens", level.draft_tokens},
          {"draft_accepted", level.draft_accepted},
          {"server_predicted_n", level.server_predicted_n},
          {"cached_prompt_tokens", level.cached_prompt_tokens},
          {"prompt_tokens", level.prompt_tokens},
          {"server_tok_s", real(level.server_tok_s)},
          {"interrupted", level.interrupted},
          {"timed_out", level.timed_out},
          {"duration_s", real(level.duration_s)},
          {"output_tokens", level.output_tokens},
          {"output_tok_s", real(level.output_tok_s)},
          {"request_s", real(level.request_s)},
          {"per_user_tok_s", real(level.per_user_tok_s)},
          {"ttft_ms", summary_wire(level.ttft_ms)},
          {"itl_ms", summary_wire(level.itl_ms)},
          {"tpot_ms", summary_wire(level.tpot_ms)},
          {"e2e_ms", summary_wire(level.e2e_ms)},
          {"token_latency_ms", summary_wire(level.token_latency_ms)},
          {"tokens_per_chunk", real(level.tokens_per_chunk)},
          {"tokens_from_chunks", level.tokens_from_chunks},
          {"client_cpu_s", real(level.client_cpu_s)},
          {"events", level.events},
          {"warnings", level.warnings},
          {"tunnel_rtt_ms", level.tunnel_rtt_ms ? real(*level.tunnel_rtt_ms) : json(nullptr)},
          {"remeasured", level.remeasured},
          {"records", std::move(records)}};
}

LevelResult level_from_wire(const json& j) {
  LevelResult level;
  level.concurrency = int_at<int>(j, "concurrency");
  if (const json& rate = at(j, "rate"); !rate.is_null()) {
    level.rate = real_of(rate, "rate");
  }
  level.burstiness = real_at(j, "burstiness");
  if (const json& cap = at(j, "max_concurrency"); !cap.is_null()) {
    level.max_concurrency = int_at<int>(j, "max_concurrency");
  }
  level.requests = int_at<int>(j, "requests");
  level.completed = int_at<int>(j, "completed");
  level.failed = int_at<int>(j, "failed");
  const json& failures = array_at(j, "failures");
  const json& first_error = array_at(j, "first_error");
  if (failures.size() != k_failure_kinds || first_error.size() != k_failure_kinds) {
    bad("failures", fmt::format("does not have one entry per failure kind ({})", k_failure_kinds));
  }
  for (std::size_t k = 0; k < k_failure_kinds; ++k) {
    if (!failures[k].is_number_integer() || !first_error[k].is_string()) {
      bad("failures", "holds something that is not a count or a message");
    }
    level.failures[k] = failures[k].get<int>();
    level.first_error[k] = first_error[k].get<std::string>();
  }
  level.resent = int_at<int>(j, "resent");
  level.draft_tokens = int_at<std::int64_t>(j, "draft_tokens");
  level.draft_accepted = int_at<std::int64_t>(j, "draft_accepted");
  level.server_predicted_n = int_at<std::int64_t>(j, "server_predicted_n");
  level.cached_prompt_tokens = int_at<std::int64_t>(j, "cached_prompt_tokens");
  level.prompt_tokens = int_at<std::int64_t>(j, "prompt_tokens");
  level.server_tok_s = real_at(j, "server_tok_s");
  level.interrupted = bool_at(j, "interrupted");
  level.timed_out = bool_at(j, "timed_out");
  level.duration_s = real_at(j, "duration_s");
  level.output_tokens = int_at<std::int64_t>(j, "output_tokens");
  level.output_tok_s = real_at(j, "output_tok_s");
  level.request_s = real_at(j, "request_s");
  level.per_user_tok_s = real_at(j, "per_user_tok_s");
  level.ttft_ms = summary_from(j, "ttft_ms");
  level.itl_ms = summary_from(j, "itl_ms");
  level.tpot_ms = summary_from(j, "tpot_ms");
  level.e2e_ms = summary_from(j, "e2e_ms");
  level.token_latency_ms = summary_from(j, "token_latency_ms");
  level.tokens_per_chunk = real_at(j, "tokens_per_chunk");
  level.tokens_from_chunks = int_at<int>(j, "tokens_from_chunks");
  level.client_cpu_s = real_at(j, "client_cpu_s");
  level.events = int_at<std::int64_t>(j, "events");
  level.warnings = strings_at(j, "warnings");
  if (const json& rtt = at(j, "tunnel_rtt_ms"); !rtt.is_null()) {
    level.tunnel_rtt_ms = real_of(rtt, "tunnel_rtt_ms");
  }
  level.remeasured = strings_at(j, "remeasured");
  for (const auto& record : array_at(j, "records")) {
    level.records.push_back(record_from_wire(record));
  }
  const auto since = std::chrono::duration<double>(std::isfinite(level.duration_s) ? level.duration_s : 0.0);
  level.started =
      std::chrono::steady_clock::now() - std::chrono::duration_cast<std::chrono::steady_clock::duration>(since);
  return level;
}

json to_wire(const SingleStreamResult& result) {
  json runs = json::array();
  for (const auto& run : result.runs) {
    runs.push_back({{"run", run.run},
                    {"ok", run.ok},
                    {"tok_s", real(run.tok_s)},
                    {"decode_tok_s", real(run.decode_tok_s)},
                    {"output_tokens", run.output_tokens},
                    {"ttft_ms", real(run.ttft_ms)},
                    {"e2e_ms", real(run.e2e_ms)}});
  }
  return {{"runs", std::move(runs)},     {"mean", real(result.mean)},      {"median", real(result.median)},
          {"stdev", real(result.stdev)}, {"level", to_wire(result.level)}, {"ended", ended_name(result.ended)}};
}

SingleStreamResult single_stream_from_wire(const json& j) {
  SingleStreamResult result;
  for (const auto& run : array_at(j, "runs")) {
    SingleStreamRun r;
    r.run = int_at<int>(run, "run");
    r.ok = bool_at(run, "ok");
    r.tok_s = real_at(run, "tok_s");
    r.decode_tok_s = real_at(run, "decode_tok_s");
    r.output_tokens = int_at<int>(run, "output_tokens");
    r.ttft_ms = real_at(run, "ttft_ms");
    r.e2e_ms = real_at(run, "e2e_ms");
    result.runs.push_back(r);
  }
  result.mean = real_at(j, "mean");
  result.median = real_at(j, "median");
  result.stdev = real_at(j, "stdev");
  result.level = level_from_wire(at(j, "level"));
  result.ended = ended_from_name(string_at(j, "ended"));
  return result;
}

namespace {

json levels_wire(const std::vector<LevelResult>& levels, Ended ended) {
  json out = json::array();
  for (const auto& level : levels) {
    out.push_back(to_wire(level));
  }
  return {{"levels", std::move(out)}, {"ended", ended_name(ended)}};
}

template <typename Result> Result levels_from(const json& j) {
  Result result;
  for (const auto& level : array_at(j, "levels")) {
    result.levels.push_back(level_from_wire(level));
  }
  result.ended = ended_from_name(string_at(j, "ended"));
  return result;
}

} // namespace

json to_wire(const ConcurrencyResult& result) {
  return levels_wire(result.levels, result.ended);
}

json to_wire(const RateResult& result) {
  return levels_wire(result.levels, result.ended);
}

ConcurrencyResult concurrency_from_wire(const json& j) {
  return levels_from<ConcurrencyResult>(j);
}

RateResult rate_from_wire(const json& j) {
  return levels_from<RateResult>(j);
}

json to_wire(const Progress& p) {
  return {{"phase", p.phase},       {"done", p.done},        {"total", p.total},
          {"failed", p.failed},     {"tokens", p.tokens},    {"elapsed_s", real(p.elapsed_s)},
          {"tok_s", real(p.tok_s)}, {"finished", p.finished}};
}

Progress progress_from_wire(const json& j) {
  Progress p;
  p.phase = string_at(j, "phase");
  p.done = int_at<int>(j, "done");
  p.total = int_at<int>(j, "total");
  p.failed = int_at<int>(j, "failed");
  p.tokens = int_at<std::int64_t>(j, "tokens");
  p.elapsed_s = real_at(j, "elapsed_s");
  p.tok_s = real_at(j, "tok_s");
  p.finished = bool_at(j, "finished");
  return p;
}

} // namespace specctl::bench
