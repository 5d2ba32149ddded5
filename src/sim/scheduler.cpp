#include <specctl/sim/scheduler.hpp>

#include <fmt/format.h>

#include <algorithm>

namespace specctl::sim {
namespace {

// Finished requests kept for /sim/requests.
constexpr std::size_t k_recent_requests = 4096;

// If the machine stalls for longer than this (a stopped process, a swapped
// box), the schedule restarts from now instead of replaying the backlog.
constexpr std::chrono::seconds k_max_lag{2};

} // namespace

Scheduler::Scheduler(boost::asio::io_context& io, PerfModel model, SchedulerConfig config, const Log& log,
                     ServingStats& stats)
    : m_timer(io), m_engine(std::move(model), config.seed), m_config(config), m_log(log), m_stats(stats),
      m_anchor_real(Clock::now()), m_stats_timer(io), m_stats_since(Clock::now()) {
  const auto depth = static_cast<std::size_t>(m_engine.draft_depth());
  m_stats.spec_accepted_per_pos.assign(depth, 0);
  m_stats_accepted_per_pos.assign(depth, 0);
  if (m_config.prefix_cache.capacity_tokens > 0) {
    m_engine.enable_prefix_cache(m_config.prefix_cache);
  }
  if (m_config.engine == Engine::vllm) {
    schedule_stats_log();
  }
}

Scheduler::Clock::time_point Scheduler::deadline_for(double model_s) const {
  const std::chrono::duration<double> real((model_s - m_anchor_model_s) / m_config.speed);
  return m_anchor_real + std::chrono::duration_cast<Clock::duration>(real);
}

double Scheduler::model_time_at(Clock::time_point when) const {
  return m_anchor_model_s + std::chrono::duration<double>(when - m_anchor_real).count() * m_config.speed;
}

void Scheduler::set_power(const PowerSpec& spec, PowerMeter* meter, std::optional<PowerCapWindow> cap) {
  m_engine.set_power(spec);
  m_power = meter;
  m_power_limit_w = spec.limit_w;
  m_cap = cap;
}

void Scheduler::set_capped(bool capped) {
  m_capped = capped;
  // The fault halves the enforced limit, as `nvidia-smi -pl` or a site's power manager would.
  const double limit = capped ? m_power_limit_w / 2.0 : m_power_limit_w;
  m_engine.set_power_limit(limit);
  if (m_power != nullptr) {
    m_power->set_limit(limit);
  }
  const auto now = unix_ms(std::chrono::system_clock::now());
  if (capped) {
    m_cap_intervals.emplace_back(now, std::nullopt);
  } else if (!m_cap_intervals.empty()) {
    m_cap_intervals.back().second = now;
  }
}

void Scheduler::user_request_ended(RequestId id) {
  if (m_open_user.erase(id) == 0) {
    return;
  }
  m_user_ended += 1;
  if (m_cap && m_capped && m_user_ended >= m_cap->last) {
    set_capped(false);
  }
}

nlohmann::ordered_json Scheduler::power_cap_truth() const {
  if (!m_cap) {
    return nullptr;
  }
  nlohmann::ordered_json intervals = nlohmann::ordered_json::array();
  for (const auto& [from, until] : m_cap_intervals) {
    intervals.push_back(
        {{"from_unix_ms", from}, {"until_unix_ms", until ? nlohmann::ordered_json(*until) : nlohmann::ordered_json()}});
  }
  return {{"first_request", m_cap->first},    {"last_request", m_cap->last}, {"limit_w", m_power_limit_w / 2.0},
          {"received", m_user_received},      {"ended", m_user_ended},       {"capped", m_capped},
          {"intervals", std::move(intervals)}};
}

void Scheduler::submit(RequestId id, int prompt_tokens, int target_tokens, std::chrono::milliseconds first_token_delay,
                       std::shared_ptr<TokenSink> sink, RequestKind kind, PromptShape shape) {
  if (kind == RequestKind::user) {
    m_user_received += 1;
    m_open_user.insert(id);
    if (m_cap && m_user_received == m_cap->first) {
      set_capped(true);
    }
  }
  // A request that arrives during a step joins at the step's end, as in SGLang.
  if (m_state != State::stepping) {
    m_model_now_s = std::max(m_model_now_s, model_time_at(Clock::now()));
  }
  const double arrival_s = m_state == State::stepping ? m_step_end_s : m_model_now_s;
  const double delay_s = std::chrono::duration<double>(first_token_delay).count();
  m_engine.add(id, prompt_tokens, target_tokens, arrival_s, arrival_s + delay_s, kind, std::move(shape));
  m_sinks[id] = std::move(sink);
  m_stats.requests_total += 1;
  m_stats.prompt_tokens_total += std::max(1, prompt_tokens);
  m_stats.queued = m_engine.waiting();
  if (m_state == State::waiting) {
    m_timer.cancel();
    m_state = State::idle;
  }
  if (m_state == State::idle) {
    start_step();
  }
}

void Scheduler::cancel(RequestId id) {
  if (m_engine.cancel(id)) {
    user_request_ended(id);
  }
  m_sinks.erase(id);
  m_stats.running = m_engine.running();
  m_stats.queued = m_engine.waiting();
}

void Scheduler::start_step() {
  m_in_flight = m_engine.step(m_model_now_s);
  if (m_power != nullptr) {
    if (m_in_flight.kind == StepKind::idle) {
      m_power->on_idle();
    } else {
      m_power->on_step(m_in_flight.power_w, m_in_flight.sm_mhz, m_in_flight.power_capped);
    }
  }
  if (m_in_flight.kind == StepKind::idle) {
    const auto wakeup = m_engine.next_wakeup_s();
    if (!wakeup) {
      m_state = State::idle;
      return;
    }
    m_state = State::waiting;
    m_timer.expires_at(deadline_for(*wakeup));
    // A wake-up already queued when submit() cancels it must not start a second step chain.
    const std::uint64_t wait = ++m_wait_generation;
    m_timer.async_wait([this, wake = *wakeup, wait](const boost::system::error_code& error) {
      if (error || m_state != State::waiting || wait != m_wait_generation) {
        return;
      }
      m_state = State::idle;
      m_model_now_s = std::max(m_model_now_s, wake);
      start_step();
    });
    return;
  }
  m_state = State::stepping;
  m_step_end_s = m_model_now_s + m_in_flight.duration_s;
  auto deadline = deadline_for(m_step_end_s);
  const auto now = Clock::now();
  if (now - deadline > k_max_lag) {
    m_anchor_real = now;
    m_anchor_model_s = m_step_end_s;
    deadline = now;
  }
  m_timer.expires_at(deadline);
  m_timer.async_wait([this](const boost::system::error_code& error) {
    if (!error) {
      finish_step();
    }
  });
}

void Scheduler::finish_step() {
  m_model_now_s = m_step_end_s;
  const StepResult step = std::move(m_in_flight);
  m_in_flight = StepResult{};
  deliver(step);
  log_step(step);
  start_step();
}

void Scheduler::deliver(const StepResult& step) {
  m_stats.generation_tokens_total += step.tokens;
  m_stats_generation_tokens += step.tokens;
  if (step.kind == StepKind::prefill) {
    m_stats_prompt_tokens += step.prefill_tokens + step.cached_tokens;
  }
  if (step.kind == StepKind::decode && step.verify_passes > 0) {
    const long drafted = static_cast<long>(step.verify_passes) * m_engine.draft_depth();
    m_stats.spec_verify_passes += step.verify_passes;
    m_stats.spec_tokens += step.tokens;
    m_stats.spec_draft_tokens += drafted;
    m_stats_drafts += step.verify_passes;
    m_stats_draft_tokens += drafted;
    m_stats_accepted += step.tokens - step.verify_passes;
    for (const auto& emission : step.emissions) {
      const auto accepted = static_cast<std::size_t>(emission.tokens - emission.verify_passes);
      for (std::size_t pos = 0; pos < accepted && pos < m_stats.spec_accepted_per_pos.size(); ++pos) {
        m_stats.spec_accepted_per_pos[pos] += 1;
        m_stats_accepted_per_pos[pos] += 1;
      }
    }
  }
  m_stats.running = step.running_after;
  m_stats.queued = m_engine.waiting();
  m_stats.token_usage = static_cast<double>(m_engine.kv_tokens()) / static_cast<double>(m_config.kv_capacity_tokens);
  for (const auto& done : step.completed) {
    user_request_ended(done.id);
    m_stats.e2e_request_latency.observe((done.finish_s - done.arrival_s) / m_config.speed);
    m_recent.push_back(done);
    log_completed(done);
    if (m_recent.size() > k_recent_requests) {
      m_recent.pop_front();
    }
  }
  for (const auto& emission : step.emissions) {
    const auto it = m_sinks.find(emission.id);
    if (it == m_sinks.end()) {
      continue;
    }
    if (emission.first) {
      m_stats.time_to_first_token.observe((m_model_now_s - emission.arrival_s) / m_config.speed);
    }
    // The sink may cancel or submit; keep it alive and look it up again after.
    const std::shared_ptr<TokenSink> sink = it->second;
    if (emission.finished) {
      m_sinks.erase(it);
    }
    sink->on_emission(emission);
  }
}

void Scheduler::log_step(const StepResult& step) {
  // vLLM logs on a timer and llama.cpp per request; only SGLang logs per step.
  if (m_config.engine == Engine::sglang) {
    log_sglang_step(step);
  }
}

// llama.cpp's server_slot::print_timings (tools/server/server-context.cpp),
// printed when a slot finishes a task, with the slot's own counters: mean
// len = 1 + accepted / verify steps.
void Scheduler::log_completed(const CompletedRequest& done) {
  if (m_config.engine != Engine::llamacpp) {
    return;
  }
  const double prompt_ms = (done.first_token_s - done.arrival_s) / m_config.speed * 1000.0;
  const double gen_ms = std::max(0.001, (done.finish_s - done.first_token_s) / m_config.speed * 1000.0);
  const long steps = std::max(0, done.completion_tokens - 1);
  const std::string head =
      fmt::format("slot print_timing: id {:2d} | task {} | ",
                  static_cast<int>((done.id - 1) % static_cast<RequestId>(m_config.slots)), done.id);
  m_log.llama(LogLevel::info, head + fmt::format("prompt eval time = {:10.2f} ms / {:5d} tokens ({:8.2f} ms per token, "
                                                 "{:8.2f} tokens per second)",
                                                 prompt_ms, done.prompt_tokens, prompt_ms / done.prompt_tokens,
                                                 prompt_ms > 0.0 ? 1e3 / prompt_ms * done.prompt_tokens : 0.0));
  m_log.llama(LogLevel::info,
              head + fmt::format("       eval time = {:10.2f} ms / {:5d} tokens ({:8.2f} ms per token, "
                                 "{:8.2f} tokens per second)",
                                 gen_ms, done.completion_tokens, steps > 0 ? gen_ms / static_cast<double>(steps) : 0.0,
                                 1e3 / gen_ms * static_cast<double>(steps)));
  m_log.llama(LogLevel::info, head + fmt::format("      total time = {:10.2f} ms / {:5d} tokens", prompt_ms + gen_ms,
                                                 done.prompt_tokens + done.completion_tokens));
  m_log.llama(LogLevel::info, head + fmt::format("   graphs reused = {:10d}", steps));
  const long drafted = done.verify_passes * m_engine.draft_depth();
  if (drafted > 0) {
    const long accepted = done.spec_tokens - done.verify_passes;
    m_log.llama(LogLevel::info,
                head + fmt::format("draft acceptance = {:0.5f} ({:5d} accepted / {:5d} generated), mean len = {:5.2f}",
                                   static_cast<double>(accepted) / static_cast<double>(drafted), accepted, drafted,
                                   1.0 + static_cast<double>(accepted) / static_cast<double>(done.verify_passes)));
  }
}

void Scheduler::schedule_stats_log() {
  const std::chrono::duration<double> interval(m_config.stats_interval_s / m_config.speed);
  m_stats_timer.expires_after(std::chrono::duration_cast<Clock::duration>(interval));
  m_stats_timer.async_wait([this](const boost::system::error_code& error) {
    if (error) {
      return;
    }
    log_vllm_stats();
    schedule_stats_log();
  });
}

// vLLM's LoggingStatLogger.log (vllm/v1/metrics/loggers.py) and
// SpecDecodingLogging.log (vllm/v1/spec_decode/metrics.py): throughputs over
// the interval, at DEBUG when this and the last interval were idle.
void Scheduler::log_vllm_stats() {
  const auto now = Clock::now();
  const double elapsed = std::max(1e-9, std::chrono::duration<double>(now - m_stats_since).count());
  const double prompt_tps = static_cast<double>(m_stats_prompt_tokens) / elapsed;
  const double gen_tps = static_cast<double>(m_stats_generation_tokens) / elapsed;
  const bool busy = m_stats_prompt_tokens > 0 || m_stats_generation_tokens > 0;
  const LogLevel level = busy || m_stats_last_busy ? LogLevel::info : LogLevel::debug;
  m_stats_last_busy = busy;
  m_log.vllm(level, "loggers.py:257",
             fmt::format("Engine 000: Avg prompt throughput: {:.1f} tokens/s, Avg generation throughput: {:.1f} "
                         "tokens/s, Running: {} reqs, Waiting: {} reqs, GPU KV cache usage: {:.1f}%, Prefix cache hit "
                         "rate: 0.0%",
                         prompt_tps, gen_tps, m_engine.running(), m_engine.waiting(), m_stats.token_usage * 100.0));
  if (m_stats_drafts > 0) {
    std::string rates;
    for (const long count : m_stats_accepted_per_pos) {
      rates += fmt::format("{}{:.3f}", rates.empty() ? "" : ", ",
                           static_cast<double>(count) / static_cast<double>(m_stats_drafts));
    }
    m_log.vllm(
        level, "metrics.py:97",
        fmt::format("SpecDecoding metrics: Mean acceptance length: {:.2f}, Accepted throughput: {:.2f} "
                    "tokens/s, Drafted throughput: {:.2f} tokens/s, Accepted: {} tokens, Drafted: {} tokens, "
                    "Per-position acceptance rate: {}, Avg Draft acceptance rate: {:.1f}%",
                    1.0 + static_cast<double>(m_stats_accepted) / static_cast<double>(m_stats_drafts),
                    static_cast<double>(m_stats_accepted) / elapsed,
                    static_cast<double>(m_stats_draft_tokens) / elapsed, m_stats_accepted, m_stats_draft_tokens, rates,
                    m_stats_draft_tokens > 0
                        ? 100.0 * static_cast<double>(m_stats_accepted) / static_cast<double>(m_stats_draft_tokens)
                        : 0.0));
  }
  m_stats_since = now;
  m_stats_prompt_tokens = 0;
  m_stats_generation_tokens = 0;
  m_stats_drafts = 0;
  m_stats_draft_tokens = 0;
  m_stats_accepted = 0;
  std::ranges::fill(m_stats_accepted_per_pos, 0);
}

void Scheduler::log_sglang_step(const StepResult& step) {
  m_interval_tokens += step.tokens;
  m_interval_model_s += step.duration_s;
  const double usage = m_stats.token_usage;
  if (step.kind == StepKind::prefill) {
    m_log.scheduler(LogLevel::info,
                    fmt::format("Prefill batch, #new-seq: {}, #new-token: {}, #cached-token: {}, token usage: {:.2f}, "
                                "#running-req: {}, #queue-req: {}, ",
                                step.batch, step.prefill_tokens, step.cached_tokens, usage, step.running_before,
                                step.waiting_after));
    return;
  }
  if (step.kind != StepKind::decode) {
    return;
  }
  m_interval_steps += 1;
  m_interval_spec_tokens += step.tokens;
  m_interval_verify_passes += step.verify_passes;
  if (m_interval_steps < m_config.decode_log_interval) {
    return;
  }
  const double real_s = m_interval_model_s / m_config.speed;
  m_stats.gen_throughput = real_s > 0.0 ? static_cast<double>(m_interval_tokens) / real_s : 0.0;
  std::string spec;
  if (m_engine.model().speculative() && m_interval_verify_passes > 0) {
    const double accept_length =
        static_cast<double>(m_interval_spec_tokens) / static_cast<double>(m_interval_verify_passes);
    const int steps = m_engine.model().variant().spec->steps;
    m_stats.spec_accept_length = accept_length;
    m_stats.spec_accept_rate = (accept_length - 1.0) / steps;
    spec = fmt::format("accept len: {:.2f}, accept rate: {:.2f}, ", accept_length, m_stats.spec_accept_rate);
  }
  m_log.scheduler(LogLevel::info,
                  fmt::format("Decode batch, #running-req: {}, #token: {}, token usage: {:.2f}, {}cuda graph: {}, "
                              "gen throughput (token/s): {:.2f}, #queue-req: {}, ",
                              step.batch, m_engine.kv_tokens(), usage, spec,
                              m_engine.model().graph_for(step.batch) ? "True" : "False", m_stats.gen_throughput,
                              step.waiting_after));
  m_interval_steps = 0;
  m_interval_tokens = 0;
  m_interval_model_s = 0.0;
  m_interval_spec_tokens = 0;
  m_interval_verify_passes = 0;
}

} // namespace specctl::sim
