#include <specctl/bench/report.hpp>

#include <specctl/http/curl.hpp>

#include <cmath>
#include <fmt/format.h>
#include <unistd.h>

namespace specctl::bench {

namespace {

// NaN and infinity become null: JSON has neither.
nlohmann::json number(double value) {
  return std::isfinite(value) ? nlohmann::json(value) : nlohmann::json(nullptr);
}

nlohmann::json failures_json(const LevelResult& level) {
  nlohmann::json out = nlohmann::json::object();
  for (std::size_t k = 0; k < k_failure_kinds; ++k) {
    if (level.failures[k] > 0) {
      out[std::string(failure_name(static_cast<FailureKind>(k)))] = level.failures[k];
    }
  }
  return out;
}

// Milliseconds with the precision a reader can use.
std::string ms(double value) {
  if (!std::isfinite(value)) {
    return "-";
  }
  if (value < 10) {
    return fmt::format("{:.2f}", value);
  }
  if (value < 1000) {
    return fmt::format("{:.1f}", value);
  }
  return fmt::format("{:.0f}", value);
}

std::string rate_text(double value) {
  if (!std::isfinite(value)) {
    return "-";
  }
  return value < 100 ? fmt::format("{:.2f}", value) : fmt::format("{:.1f}", value);
}

std::string pair(const Summary& s) {
  return fmt::format("{} / {}", ms(s.p50), ms(s.p99));
}

// Right-aligned columns under a header row, two spaces apart.
std::string render(const std::vector<std::vector<std::string>>& rows) {
  std::vector<std::size_t> widths;
  for (const auto& row : rows) {
    widths.resize(std::max(widths.size(), row.size()));
    for (std::size_t c = 0; c < row.size(); ++c) {
      widths[c] = std::max(widths[c], row[c].size());
    }
  }
  std::string out;
  for (const auto& row : rows) {
    std::string line;
    for (std::size_t c = 0; c < row.size(); ++c) {
      line += fmt::format("  {:>{}}", row[c], widths[c]);
    }
    while (!line.empty() && line.back() == ' ') {
      line.pop_back();
    }
    out += line + '\n';
  }
  return out;
}

} // namespace

nlohmann::json to_json(const Summary& s) {
  if (s.count == 0) {
    return {{"mean", nullptr},  {"p50", nullptr}, {"p90", nullptr}, {"p99", nullptr},
            {"stdev", nullptr}, {"min", nullptr}, {"max", nullptr}, {"count", 0}};
  }
  return {{"mean", number(s.mean)},   {"p50", number(s.p50)}, {"p90", number(s.p90)}, {"p99", number(s.p99)},
          {"stdev", number(s.stdev)}, {"min", number(s.min)}, {"max", number(s.max)}, {"count", s.count}};
}

nlohmann::json to_json(const LevelResult& level) {
  nlohmann::json out = {
      {"concurrency", level.concurrency},
      {"requests", level.requests},
      {"completed", level.completed},
      {"failed", level.failed},
      {"failures", failures_json(level)},
      {"interrupted", level.interrupted},
      {"timed_out", level.timed_out},
      {"duration_s", number(level.duration_s)},
      {"output_tokens", level.output_tokens},
      {"output_tok_s", number(level.output_tok_s)},
      {"request_s", number(level.request_s)},
      {"per_user_tok_s", number(level.per_user_tok_s)},
      {"ttft_ms", to_json(level.ttft_ms)},
      {"itl_ms", to_json(level.itl_ms)},
      {"tpot_ms", to_json(level.tpot_ms)},
      {"e2e_ms", to_json(level.e2e_ms)},
      {"token_latency_ms", to_json(level.token_latency_ms)},
      {"tokens_per_chunk", number(level.tokens_per_chunk)},
      {"token_source", token_source(level)},
      {"client",
       {{"cpu_s", number(level.client_cpu_s)},
        {"events", level.events},
        {"cpu_us_per_event",
         number(level.events > 0 ? level.client_cpu_s * 1e6 / static_cast<double>(level.events) : NAN)}}},
      {"warnings", level.warnings},
      {"resent", level.resent},
  };
  // What the server said of the requests itself (llama.cpp timings, prefix-cache
  // hits), only when it said it: a figure from the server is named as such.
  nlohmann::json server = nlohmann::json::object();
  const auto put = [&](const char* key, std::int64_t value) {
    if (value >= 0) {
      server[key] = value;
    }
  };
  put("draft_tokens", level.draft_tokens);
  put("draft_accepted", level.draft_accepted);
  put("predicted_tokens", level.server_predicted_n);
  put("cached_prompt_tokens", level.cached_prompt_tokens);
  put("prompt_tokens", level.prompt_tokens);
  if (level.server_tok_s > 0) {
    server["decode_tok_s_mean"] = level.server_tok_s;
  }
  if (!server.empty()) {
    out["server_reported"] = server;
  }
  if (level.rate) {
    out["rate"] = number(*level.rate);
    out["burstiness"] = level.burstiness;
    out["max_concurrency"] = level.max_concurrency ? nlohmann::json(*level.max_concurrency) : nlohmann::json(nullptr);
  }
  nlohmann::json errors = nlohmann::json::object();
  for (std::size_t k = 0; k < k_failure_kinds; ++k) {
    if (level.failures[k] > 0) {
      errors[std::string(failure_name(static_cast<FailureKind>(k)))] = level.first_error[k];
    }
  }
  out["first_errors"] = errors;
  // What the path to the server cost, and levels measured again: set by specctl run only.
  if (level.tunnel_rtt_ms) {
    out["tunnel_rtt_ms"] = number(*level.tunnel_rtt_ms);
  }
  if (!level.remeasured.empty()) {
    out["remeasured"] = level.remeasured;
  }
  return out;
}

nlohmann::json to_json(const SingleStreamResult& result) {
  nlohmann::json runs = nlohmann::json::array();
  for (const auto& run : result.runs) {
    runs.push_back({{"run", run.run},
                    {"ok", run.ok},
                    {"tok_s", number(run.ok ? run.tok_s : NAN)},
                    {"decode_tok_s", number(run.ok ? run.decode_tok_s : NAN)},
                    {"output_tokens", run.output_tokens},
                    {"ttft_ms", number(run.ttft_ms)},
                    {"e2e_ms", number(run.e2e_ms)}});
  }
  const bool any = std::any_of(result.runs.begin(), result.runs.end(), [](const auto& r) { return r.ok; });
  return {{"runs", runs},
          {"mean", any ? number(result.mean) : nullptr},
          {"median", any ? number(result.median) : nullptr},
          {"stdev", any ? number(result.stdev) : nullptr},
          {"level", to_json(result.level)}};
}

nlohmann::json to_json(const Document& document) {
  nlohmann::json out = {
      {"format", "specctl-bench"},
      {"version", k_document_version},
      {"specctl_version", SPECCTL_VERSION},
      {"target",
       {{"url", http::redact_url(document.target.url)},
        {"model", document.target.model},
        {"endpoint", endpoint_name(document.request.endpoint)}}},
      {"request",
       {{"max_tokens", document.request.max_tokens},
        {"ignore_eos", document.request.ignore_eos},
        {"temperature", document.request.temperature},
        {"include_usage", document.request.include_usage},
        {"continuous_usage", document.request.continuous_usage},
        {"timeout_ms", document.request.timeout.count()}}},
      {"prompts", document.prompts},
      {"output", document.output.empty() ? nlohmann::json(nullptr) : nlohmann::json(document.output)},
      {"warmup", document.warmup},
  };
  if (document.single_stream) {
    out["single_stream"] = to_json(*document.single_stream);
  }
  if (document.concurrency) {
    nlohmann::json levels = nlohmann::json::array();
    for (const auto& level : document.concurrency->levels) {
      levels.push_back(to_json(level));
    }
    out["levels"] = levels;
  }
  if (document.rate) {
    nlohmann::json rates = nlohmann::json::array();
    for (const auto& level : document.rate->levels) {
      rates.push_back(to_json(level));
    }
    out["rates"] = rates;
  }
  return out;
}

nlohmann::json request_to_json(const RequestRecord& r, std::string_view phase) {
  nlohmann::json chunks = nlohmann::json::array();
  for (const auto& chunk : r.chunks) {
    chunks.push_back(nlohmann::json::array({chunk.at_us / 1000.0, chunk.tokens}));
  }
  return {
      {"phase", phase},
      {"index", r.index},
      {"prompt", r.prompt},
      {"prompt_id", r.prompt_id},
      {"category", r.category.empty() ? nlohmann::json(nullptr) : nlohmann::json(r.category)},
      {"input_tokens", r.input_tokens > 0 ? nlohmann::json(r.input_tokens) : nlohmann::json(nullptr)},
      {"max_tokens", r.max_tokens},
      {"start_s", number(r.start_s)},
      {"send_lag_ms", number(r.send_lag_ms)},
      {"ok", r.ok()},
      {"failure", r.failure ? nlohmann::json(failure_name(*r.failure)) : nlohmann::json(nullptr)},
      {"error", r.error},
      {"http_status", r.http_status},
      {"id", r.response_id},
      {"finish_reason", r.finish_reason},
      {"output_tokens", r.output_tokens},
      {"token_source", r.token_source == TokenSource::usage ? "usage" : "chunks"},
      {"prompt_tokens", r.prompt_tokens >= 0 ? nlohmann::json(r.prompt_tokens) : nlohmann::json(nullptr)},
      {"ttft_ms", number(r.ttft_ms)},
      {"e2e_ms", number(r.e2e_ms)},
      {"tpot_ms", number(r.tpot_ms)},
      {"chunk_tokens_exact", r.chunk_tokens_exact},
      {"resends", r.resends},
      {"cached_tokens", r.cached_tokens >= 0 ? nlohmann::json(r.cached_tokens) : nlohmann::json(nullptr)},
      {"server_tok_s", r.server_tok_s >= 0 ? nlohmann::json(r.server_tok_s) : nlohmann::json(nullptr)},
      {"draft_tokens", r.draft_tokens >= 0 ? nlohmann::json(r.draft_tokens) : nlohmann::json(nullptr)},
      {"draft_accepted", r.draft_accepted >= 0 ? nlohmann::json(r.draft_accepted) : nlohmann::json(nullptr)},
      {"predicted_tokens", r.server_predicted_n >= 0 ? nlohmann::json(r.server_predicted_n) : nlohmann::json(nullptr)},
      {"chunks", chunks}};
}

std::string format_single_stream(const SingleStreamResult& result) {
  int ok = 0;
  for (const auto& run : result.runs) {
    ok += run.ok ? 1 : 0;
  }
  std::string out;
  if (ok > 0) {
    out = fmt::format("Single stream: {} of {} runs, {} tok/s mean, {} median, {} stdev\n", ok, result.runs.size(),
                      rate_text(result.mean), rate_text(result.median), rate_text(result.stdev));
  } else {
    out = fmt::format("Single stream: all {} runs failed\n", result.runs.size());
  }
  std::vector<std::vector<std::string>> rows = {{"run", "tok/s", "decode tok/s", "tokens", "TTFT ms", "E2E ms"}};
  for (std::size_t i = 0; i < result.runs.size(); ++i) {
    const auto& run = result.runs[i];
    if (!run.ok) {
      const auto& record = result.level.records[i];
      rows.push_back({std::to_string(run.run), "failed", std::string(failure_name(*record.failure)), "", "", ""});
      continue;
    }
    rows.push_back({std::to_string(run.run), rate_text(run.tok_s), rate_text(run.decode_tok_s),
                    std::to_string(run.output_tokens), ms(run.ttft_ms), ms(run.e2e_ms)});
  }
  return out + render(rows);
}

std::string format_levels(const std::vector<LevelResult>& levels, std::string_view title) {
  const bool open_loop = !levels.empty() && levels.front().rate.has_value();
  std::string out = fmt::format("{} (latencies p50 / p99)\n", title);
  std::vector<std::string> header = {"conc",    "done",   "failed",  "out tok/s", "req/s",    "user tok/s",
                                     "TTFT ms", "ITL ms", "TPOT ms", "E2E ms",    "tok/chunk"};
  if (open_loop) {
    header.insert(header.begin(), "rate/s");
  }
  std::vector<std::vector<std::string>> rows = {header};
  for (const auto& level : levels) {
    std::vector<std::string> row = {std::to_string(level.concurrency),
                                    std::to_string(level.completed),
                                    std::to_string(level.failed),
                                    rate_text(level.output_tok_s),
                                    rate_text(level.request_s),
                                    rate_text(level.per_user_tok_s),
                                    pair(level.ttft_ms),
                                    pair(level.itl_ms),
                                    pair(level.tpot_ms),
                                    pair(level.e2e_ms),
                                    level.completed > 0 ? fmt::format("{:.2f}", level.tokens_per_chunk) : "-"};
    if (open_loop) {
      row.insert(row.begin(), fmt::format("{:g}", level.rate.value_or(0)));
    }
    rows.push_back(std::move(row));
  }
  return out + render(rows);
}

std::string format_problems(const std::vector<const LevelResult*>& levels) {
  std::string out;
  for (const LevelResult* level : levels) {
    std::string where =
        level->rate ? fmt::format("rate {:g}/s", *level->rate) : fmt::format("concurrency {}", level->concurrency);
    for (std::size_t k = 0; k < k_failure_kinds; ++k) {
      if (level->failures[k] > 0) {
        out += fmt::format("  {}: {} failed with {}, first: {}\n", where, level->failures[k],
                           failure_name(static_cast<FailureKind>(k)), level->first_error[k]);
      }
    }
    for (const auto& warning : level->warnings) {
      out += fmt::format("  {}: warning: {}\n", where, warning);
    }
  }
  return out;
}

std::string format_document(const Document& document) {
  std::string out =
      fmt::format("specctl bench: {} model \"{}\", {}, {}, prompts {}\n", http::redact_url(document.target.url),
                  document.target.model, endpoint_name(document.request.endpoint),
                  document.output.empty() ? fmt::format("max_tokens {}", document.request.max_tokens) : document.output,
                  document.prompts);
  std::vector<const LevelResult*> all;
  if (document.single_stream) {
    out += '\n' + format_single_stream(*document.single_stream);
    all.push_back(&document.single_stream->level);
  }
  if (document.concurrency && !document.concurrency->levels.empty()) {
    out += '\n' + format_levels(document.concurrency->levels, "Concurrency");
    for (const auto& level : document.concurrency->levels) {
      all.push_back(&level);
    }
  }
  if (document.rate && !document.rate->levels.empty()) {
    out += '\n' + format_levels(document.rate->levels, "Request rate (open loop, latency from the scheduled send)");
    for (const auto& level : document.rate->levels) {
      all.push_back(&level);
    }
  }
  if (std::string problems = format_problems(all); !problems.empty()) {
    out += "\nProblems:\n" + problems;
  }
  return out;
}

ProgressPrinter::Style ProgressPrinter::detect(std::FILE* out) {
  return isatty(fileno(out)) != 0 ? Style::terminal : Style::plain;
}

std::string ProgressPrinter::line(const Progress& p) {
  // Completed requests only: a failed request is not progress.
  return fmt::format("{}: {}/{} requests ok, {} failed, {:.0f} tok/s, {:.1f}s", p.phase, p.completed(), p.total,
                     p.failed, p.tok_s, p.elapsed_s);
}

void ProgressPrinter::update(const Progress& progress) {
  if (m_style == Style::terminal) {
    std::fputs(fmt::format("\r{}\x1b[K", line(progress)).c_str(), m_out);
    m_line_open = true;
    if (progress.finished) {
      std::fputc('\n', m_out);
      m_line_open = false;
    }
    std::fflush(m_out);
    return;
  }
  if (progress.phase != m_last_phase) {
    m_last_phase = progress.phase;
    m_last_plain_s = -1;
  }
  const bool due =
      m_last_plain_s < 0 || progress.elapsed_s - m_last_plain_s >= static_cast<double>(k_plain_interval.count());
  if (progress.finished || due) {
    std::fputs((line(progress) + '\n').c_str(), m_out);
    std::fflush(m_out);
    m_last_plain_s = progress.elapsed_s;
  }
}

void ProgressPrinter::clear() {
  if (m_line_open) {
    std::fputs("\r\x1b[K", m_out);
    std::fflush(m_out);
    m_line_open = false;
  }
}

} // namespace specctl::bench
