#include <specctl/sim/batch_engine.hpp>

#include <algorithm>
#include <cmath>

namespace specctl::sim {
namespace {

// A request is due when model time reaches its not_before (within rounding).
constexpr double k_time_epsilon_s = 1e-9;

// Consecutive accept lengths of one request walk the golden-ratio sequence
// through the inverse CDF: each draw still varies between 1 and steps + 1, but
// a request's mean accept length is within O(log n / n) of the model's mean
// instead of O(1/sqrt n), so calibration does not depend on luck.
constexpr double k_golden_ratio_conjugate = 0.6180339887498949;

constexpr double k_ms_per_s = 1000.0;

} // namespace

std::string_view request_kind_name(RequestKind kind) {
  switch (kind) {
  case RequestKind::user:
    return "user";
  case RequestKind::warmup:
    return "warmup";
  case RequestKind::health:
    return "health";
  }
  return "user";
}

int BatchEngine::max_running() const {
  const int limit = m_model.variant().max_running;
  return limit > 0 ? limit : m_model.profile().max_running_requests;
}

BatchEngine::BatchEngine(PerfModel model, std::uint64_t seed) : m_model(std::move(model)), m_rng(seed) {}

void BatchEngine::enable_prefix_cache(PrefixCacheConfig config) {
  m_cache.emplace(config);
}

void BatchEngine::add(RequestId id, int prompt_tokens, int target_tokens, double arrival_s, double not_before_s,
                      RequestKind kind, PromptShape shape) {
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  m_waiting.push_back(Entry{.id = id,
                            .prompt_tokens = std::max(1, prompt_tokens),
                            .target_tokens = std::max(1, target_tokens),
                            .arrival_s = arrival_s,
                            .not_before_s = not_before_s,
                            .accept_phase = unit(m_rng),
                            .kind = kind,
                            .shape = std::move(shape)});
}

bool BatchEngine::cancel(RequestId id) {
  const auto waiting = std::ranges::find(m_waiting, id, &Entry::id);
  if (waiting != m_waiting.end()) {
    m_waiting.erase(waiting);
    return true;
  }
  const auto running = std::ranges::find(m_running, id, &Entry::id);
  if (running != m_running.end()) {
    m_running.erase(running);
    return true;
  }
  return false;
}

long BatchEngine::kv_tokens() const {
  long total = 0;
  for (const auto& entry : m_running) {
    total += entry.prompt_tokens + entry.generated;
  }
  return total;
}

std::optional<double> BatchEngine::next_wakeup_s() const {
  std::optional<double> earliest;
  for (const auto& entry : m_waiting) {
    if (!earliest || entry.not_before_s < *earliest) {
      earliest = entry.not_before_s;
    }
  }
  return earliest;
}

StepResult BatchEngine::step(double now_s) {
  const int limit = max_running();
  const bool due =
      std::ranges::any_of(m_waiting, [now_s](const Entry& e) { return e.not_before_s <= now_s + k_time_epsilon_s; });
  const int running_before = running();
  StepResult result;
  if (due && running() < limit) {
    result = prefill(now_s);
  } else if (!m_running.empty()) {
    result = decode(now_s);
  }
  result.running_before = running_before;
  result.running_after = running();
  result.waiting_after = waiting();
  return result;
}

StepResult BatchEngine::prefill(double now_s) {
  const auto& profile = m_model.profile();
  const int room = max_running() - running();
  std::vector<Entry> picked;
  int tokens = 0;
  for (auto it = m_waiting.begin(); it != m_waiting.end() && static_cast<int>(picked.size()) < room;) {
    if (it->not_before_s > now_s + k_time_epsilon_s) {
      ++it;
      continue;
    }
    // The cache is looked up when the request is scheduled, as the engines do;
    // only the uncached tokens count against the prefill budget.
    const int cached = m_cache && it->shape.keys ? std::min(m_cache->match(*it->shape.keys), it->prompt_tokens - 1) : 0;
    const int computed = it->prompt_tokens - std::max(0, cached);
    if (!picked.empty() && tokens + computed > profile.chunked_prefill_tokens) {
      break;
    }
    tokens += computed;
    it->cached_tokens = std::max(0, cached);
    if (m_cache && it->shape.keys) {
      m_cache->insert(it->shape.keys);
    }
    picked.push_back(*it);
    it = m_waiting.erase(it);
  }
  StepResult result{.kind = StepKind::prefill};
  result.batch = static_cast<int>(picked.size());
  result.prefill_tokens = tokens;
  result.duration_s = m_model.prefill_ms(tokens, result.batch) / k_ms_per_s;
  apply_power(result);
  const double end_s = now_s + result.duration_s;
  for (auto& entry : picked) {
    // The prefill pass samples the first output token.
    entry.generated = 1;
    entry.first_token_s = end_s;
    const bool finished = entry.generated >= entry.target_tokens;
    result.cached_tokens += entry.cached_tokens;
    result.emissions.push_back(Emission{.id = entry.id,
                                        .tokens = 1,
                                        .first = true,
                                        .finished = finished,
                                        .arrival_s = entry.arrival_s,
                                        .cached_tokens = entry.cached_tokens});
    result.tokens += 1;
    if (finished) {
      result.completed.push_back(completed(entry, end_s));
    } else {
      m_running.push_back(entry);
    }
  }
  return result;
}

StepResult BatchEngine::decode(double now_s) {
  StepResult result{.kind = StepKind::decode};
  result.batch = running();
  result.duration_s = m_model.step_ms(result.batch) / k_ms_per_s;
  apply_power(result);
  const double end_s = now_s + result.duration_s;
  const bool speculative = m_model.speculative();
  std::erase_if(m_running, [&](Entry& entry) {
    int tokens = speculative ? draw_accept_length(entry) : 1;
    tokens = std::min(tokens, entry.target_tokens - entry.generated);
    entry.generated += tokens;
    result.tokens += tokens;
    if (speculative) {
      result.verify_passes += 1;
      entry.spec_tokens += tokens;
    }
    const bool finished = entry.generated >= entry.target_tokens;
    result.emissions.push_back(Emission{.id = entry.id,
                                        .tokens = tokens,
                                        .first = false,
                                        .finished = finished,
                                        .arrival_s = entry.arrival_s,
                                        .verify_passes = speculative ? 1 : 0});
    if (finished) {
      result.completed.push_back(completed(entry, end_s));
    }
    return finished;
  });
  return result;
}

long BatchEngine::forward_tokens(const StepResult& step) const {
  switch (step.kind) {
  case StepKind::prefill:
    return std::max(1, step.prefill_tokens);
  case StepKind::decode: {
    const auto& spec = m_model.variant().spec;
    return static_cast<long>(step.batch) * (spec ? spec->draft_tokens : 1);
  }
  case StepKind::idle:
    break;
  }
  return 0;
}

void BatchEngine::apply_power(StepResult& result) const {
  const PassPower pass = limit_pass(pass_power_w(forward_tokens(result), m_power), m_power.limit_w, m_power);
  result.duration_s *= pass.slowdown;
  result.power_w = pass.power_w;
  result.sm_mhz = pass.sm_mhz;
  result.power_capped = pass.capped;
}

int BatchEngine::draw_accept_length(Entry& entry) {
  const double position = entry.accept_phase + static_cast<double>(entry.verify_passes) * k_golden_ratio_conjugate;
  entry.verify_passes += 1;
  return m_model.accept_length_for(position - std::floor(position), entry.shape.category);
}

CompletedRequest BatchEngine::completed(const Entry& entry, double finish_s) {
  return CompletedRequest{.id = entry.id,
                          .prompt_tokens = entry.prompt_tokens,
                          .completion_tokens = entry.generated,
                          .arrival_s = entry.arrival_s,
                          .first_token_s = entry.first_token_s,
                          .finish_s = finish_s,
                          .kind = entry.kind,
                          .verify_passes = entry.verify_passes,
                          .spec_tokens = entry.spec_tokens,
                          .cached_tokens = entry.cached_tokens,
                          .category = entry.shape.category};
}

WaveResult simulate_wave(const PerfModel& model, int concurrency, int prompt_tokens, int max_tokens,
                         std::uint64_t seed) {
  BatchEngine engine(model, seed);
  for (int i = 0; i < concurrency; ++i) {
    engine.add(static_cast<RequestId>(i + 1), prompt_tokens, max_tokens, 0.0, 0.0);
  }
  WaveResult wave;
  double now_s = 0.0;
  double ttft_sum = 0.0;
  double rate_sum = 0.0;
  long verify_passes = 0;
  long spec_tokens = 0;
  while (engine.running() > 0 || engine.waiting() > 0) {
    StepResult step = engine.step(now_s);
    if (step.kind == StepKind::idle) {
      break;
    }
    now_s += step.duration_s;
    if (step.kind == StepKind::decode) {
      verify_passes += step.verify_passes;
      spec_tokens += step.tokens;
    }
    for (const auto& done : step.completed) {
      wave.completion_tokens += done.completion_tokens;
      ttft_sum += done.first_token_s - done.arrival_s;
      rate_sum += done.completion_tokens / (done.finish_s - done.arrival_s);
    }
  }
  wave.duration_s = now_s;
  wave.output_tok_s = static_cast<double>(wave.completion_tokens) / now_s;
  wave.per_request_tok_s = rate_sum / concurrency;
  wave.mean_ttft_s = ttft_sum / concurrency;
  wave.mean_accept_length =
      verify_passes > 0 ? static_cast<double>(spec_tokens) / static_cast<double>(verify_passes) : 1.0;
  return wave;
}

} // namespace specctl::sim
