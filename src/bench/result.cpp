#include <specctl/bench/result.hpp>

#include <limits>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <fmt/format.h>
#include <map>

namespace specctl::bench {

double tpot_ms(double ttft_ms, double e2e_ms, int output_tokens) {
  return output_tokens > 1 ? (e2e_ms - ttft_ms) / (output_tokens - 1) : std::numeric_limits<double>::quiet_NaN();
}

double per_user_tok_s(double tpot_ms) {
  return tpot_ms > 0 ? 1000.0 / tpot_ms : std::numeric_limits<double>::quiet_NaN();
}

namespace {

// Above this share of the wall time spent on the client's CPU, the client may be what was measured.
constexpr double k_busy_client_share = 0.7;
// Shorter levels are mostly set-up: their CPU share says nothing about the client's limits.
constexpr std::chrono::seconds k_min_busy_check{1};
// A prefix cache may serve a shared system prompt or template; more than this share of
// the prompt tokens is the benchmark's own prompts being served again.
constexpr double k_max_cached_share = 0.10;
// Repeats of a prompt that all accept at least this share of the drafted tokens, the
// same count each time, are the draft model reciting text it has seen.
constexpr double k_recited_accept_share = 0.9;

// Calls visit(record, i, gap_ms) for every gap before chunk i of every completed request.
template <typename Visit> void for_each_gap(const std::vector<RequestRecord>& records, Visit&& visit) {
  for (const auto& r : records) {
    if (!r.ok()) {
      continue;
    }
    for (std::size_t i = 1; i < r.chunks.size(); ++i) {
      visit(r, i, (r.chunks[i].at_us - r.chunks[i - 1].at_us) / 1000.0);
    }
  }
}

} // namespace

std::string_view failure_name(FailureKind kind) {
  switch (kind) {
  case FailureKind::connect:
    return "connect";
  case FailureKind::http_status:
    return "http_status";
  case FailureKind::timeout:
    return "timeout";
  case FailureKind::malformed_event:
    return "malformed_event";
  case FailureKind::cut_stream:
    return "cut_stream";
  case FailureKind::server_error:
    return "server_error";
  case FailureKind::protocol:
    return "protocol";
  case FailureKind::interrupted:
    return "interrupted";
  case FailureKind::closed_before_send:
    return "closed_before_send";
  case FailureKind::no_response:
    return "no_response";
  case FailureKind::stalled:
    return "stalled";
  }
  return "protocol";
}

void aggregate(LevelResult& level) {
  level.requests = static_cast<int>(level.records.size());
  level.completed = 0;
  level.failed = 0;
  level.failures = {};
  level.first_error = {};
  level.output_tokens = 0;
  level.tokens_from_chunks = 0;
  level.resent = 0;
  level.draft_tokens = -1;
  level.draft_accepted = -1;
  level.server_predicted_n = -1;
  level.cached_prompt_tokens = -1;
  level.prompt_tokens = -1;
  level.server_tok_s = 0;
  const auto add = [](std::int64_t& sum, int value) {
    if (value >= 0) {
      sum = std::max<std::int64_t>(sum, 0) + value;
    }
  };
  std::vector<double> server_speed;
  std::vector<double> ttft;
  std::vector<double> tpot;
  std::vector<double> e2e;
  std::vector<double> user_speed;
  std::int64_t chunk_count = 0;
  for (const auto& r : level.records) {
    level.resent += r.resends;
    if (!r.ok()) {
      ++level.failed;
      const auto k = static_cast<std::size_t>(*r.failure);
      if (level.failures[k]++ == 0) {
        level.first_error[k] = r.error;
      }
      continue;
    }
    ++level.completed;
    level.output_tokens += r.output_tokens;
    add(level.draft_tokens, r.draft_tokens);
    add(level.draft_accepted, r.draft_accepted);
    add(level.server_predicted_n, r.server_predicted_n);
    add(level.cached_prompt_tokens, r.cached_tokens);
    add(level.prompt_tokens, r.prompt_tokens);
    if (r.server_tok_s >= 0) {
      server_speed.push_back(r.server_tok_s);
    }
    if (r.token_source == TokenSource::chunks) {
      ++level.tokens_from_chunks;
    }
    if (!std::isnan(r.ttft_ms)) {
      ttft.push_back(r.ttft_ms);
    }
    if (!std::isnan(r.e2e_ms)) {
      e2e.push_back(r.e2e_ms);
      if (r.e2e_ms > 0) {
        user_speed.push_back(r.output_tokens / (r.e2e_ms / 1000.0));
      }
    }
    if (!std::isnan(r.tpot_ms)) {
      tpot.push_back(r.tpot_ms);
    }
    chunk_count += static_cast<std::int64_t>(r.chunks.size());
  }
  level.ttft_ms = summarize(ttft);
  level.tpot_ms = summarize(tpot);
  level.e2e_ms = summarize(e2e);
  // One sample per chunk gap (or per token) is the largest buffer of a big
  // level: the two per-gap metrics are built one after the other in it.
  std::vector<double> samples;
  samples.reserve(static_cast<std::size_t>(std::max<std::int64_t>(chunk_count, 0)));
  for_each_gap(level.records, [&](const RequestRecord&, std::size_t, double gap) { samples.push_back(gap); });
  level.itl_ms = summarize(samples);
  samples.clear();
  for_each_gap(level.records, [&](const RequestRecord& r, std::size_t i, double gap) {
    if (r.chunk_tokens_exact) {
      const std::uint32_t k = r.chunks[i].tokens;
      for (std::uint32_t t = 0; t < k; ++t) {
        samples.push_back(gap / k);
      }
      return;
    }
    // Without per-chunk counts, every chunk is taken to carry the request's mean.
    samples.push_back(gap / std::max(1.0, static_cast<double>(r.output_tokens) / static_cast<double>(r.chunks.size())));
  });
  level.token_latency_ms = summarize(samples);
  level.per_user_tok_s = user_speed.empty() ? 0.0 : mean(user_speed);
  level.server_tok_s = server_speed.empty() ? 0.0 : mean(server_speed);
  level.tokens_per_chunk =
      chunk_count > 0 ? static_cast<double>(level.output_tokens) / static_cast<double>(chunk_count) : 0.0;
  if (level.duration_s > 0) {
    level.output_tok_s = static_cast<double>(level.output_tokens) / level.duration_s;
    level.request_s = level.completed / level.duration_s;
  } else {
    level.output_tok_s = 0;
    level.request_s = 0;
  }
  level.warnings.clear();
  if (level.tokens_from_chunks > 0) {
    level.warnings.push_back(
        fmt::format("{} of {} completed requests sent no usage: their tokens were counted from content chunks, a lower "
                    "bound when a chunk carries several tokens",
                    level.tokens_from_chunks, level.completed));
  }
  if (level.duration_s >= std::chrono::duration<double>(k_min_busy_check).count() &&
      level.client_cpu_s > k_busy_client_share * level.duration_s) {
    level.warnings.push_back(fmt::format("the client's event loop was busy {:.0f}% of the time: it may have limited "
                                         "what was measured",
                                         100.0 * level.client_cpu_s / level.duration_s));
  }
}

std::string token_source(const LevelResult& level) {
  if (level.tokens_from_chunks == 0) {
    return "usage";
  }
  return level.tokens_from_chunks == level.completed ? "chunks" : "mixed";
}

std::optional<std::string> prefix_cache_flag(std::string_view benchmark, std::int64_t prompt_tokens,
                                             std::int64_t cached_tokens) {
  if (prompt_tokens <= 0 || cached_tokens < 0 ||
      !(static_cast<double>(cached_tokens) > k_max_cached_share * static_cast<double>(prompt_tokens))) {
    return std::nullopt;
  }
  return fmt::format("benchmark \"{}\": {:.0f}% of prompt tokens ({} of {}) came from the server's prefix cache: TTFT "
                     "and throughput are flattered; give every request a distinct prompt (unique_prompts: true)",
                     benchmark, 100.0 * static_cast<double>(cached_tokens) / static_cast<double>(prompt_tokens),
                     cached_tokens, prompt_tokens);
}

// Repeats accepting this many times the first sends' tokens, and this many more a request, learned them.
constexpr double k_learned_accept_factor = 1.5;
constexpr double k_learned_accept_margin = 16;

std::optional<std::string> repeated_acceptance_flag(std::string_view benchmark,
                                                    const std::vector<RequestRecord>& records) {
  // By base prompt: the (drafted, accepted) pairs of its completed requests.
  std::map<int, std::vector<std::pair<int, int>>> by_prompt;
  for (const auto& r : records) {
    if (r.ok() && r.draft_tokens >= 0 && r.draft_accepted >= 0) {
      by_prompt[r.prompt].emplace_back(r.draft_tokens, r.draft_accepted);
    }
  }
  std::int64_t drafted = 0;
  std::int64_t accepted = 0;
  bool any_repeated = false;
  bool recited = true;
  // Accepted tokens of each repeated prompt's first send, and of its later sends.
  std::int64_t first_accepted_sum = 0;
  std::int64_t later_accepted_sum = 0;
  std::int64_t firsts = 0;
  std::int64_t laters = 0;
  for (const auto& [prompt, pairs] : by_prompt) {
    if (pairs.size() < 2) {
      continue;
    }
    any_repeated = true;
    const auto [first_drafted, first_accepted] = pairs.front();
    const bool same = std::all_of(pairs.begin(), pairs.end(), [&](const auto& p) { return p == pairs.front(); });
    if (!same || first_drafted <= 0 ||
        static_cast<double>(first_accepted) < k_recited_accept_share * static_cast<double>(first_drafted)) {
      recited = false;
    }
    drafted += static_cast<std::int64_t>(first_drafted) * static_cast<std::int64_t>(pairs.size());
    accepted += static_cast<std::int64_t>(first_accepted) * static_cast<std::int64_t>(pairs.size());
    first_accepted_sum += first_accepted;
    ++firsts;
    for (std::size_t i = 1; i < pairs.size(); ++i) {
      later_accepted_sum += pairs[i].second;
      ++laters;
    }
  }
  if (!any_repeated) {
    return std::nullopt;
  }
  if (recited) {
    return fmt::format("benchmark \"{}\": every repeat of a prompt accepted the same drafted tokens ({} of {}): the "
                       "accept length reflects repeated prompts, not the workload",
                       benchmark, accepted, drafted);
  }
  // A speculator that learns from earlier requests (llama.cpp's n-gram ones) accepts
  // far more on a prompt it has answered before: 112 against 51 tokens a request with
  // ngram-mod, accept length 49.
  const double first_mean = static_cast<double>(first_accepted_sum) / static_cast<double>(firsts);
  const double later_mean = static_cast<double>(later_accepted_sum) / static_cast<double>(laters);
  if (later_mean >= k_learned_accept_factor * first_mean && later_mean - first_mean >= k_learned_accept_margin) {
    return fmt::format("benchmark \"{}\": repeats of a prompt accepted {:.0f} drafted tokens a request against {:.0f} "
                       "on its first send: the speculator learned the answers from earlier requests, and the accept "
                       "length reflects repeated prompts, not the workload",
                       benchmark, later_mean, first_mean);
  }
  return std::nullopt;
}

} // namespace specctl::bench
