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
      m_anchor_real(Clock::now()) {}

Scheduler::Clock::time_point Scheduler::deadline_for(double model_s) const {
  const std::chrono::duration<double> real((model_s - m_anchor_model_s) / m_config.speed);
  return m_anchor_real + std::chrono::duration_cast<Clock::duration>(real);
}

double Scheduler::model_time_at(Clock::time_point when) const {
  return m_anchor_model_s + std::chrono::duration<double>(when - m_anchor_real).count() * m_config.speed;
}

void Scheduler::submit(RequestId id, int prompt_tokens, int target_tokens, std::chrono::milliseconds first_token_delay,
                       std::shared_ptr<TokenSink> sink) {
  // A request that arrives during a step joins at the step's end, as in SGLang.
  if (m_state != State::stepping) {
    m_model_now_s = std::max(m_model_now_s, model_time_at(Clock::now()));
  }
  const double arrival_s = m_state == State::stepping ? m_step_end_s : m_model_now_s;
  const double delay_s = std::chrono::duration<double>(first_token_delay).count();
  m_engine.add(id, prompt_tokens, target_tokens, arrival_s, arrival_s + delay_s);
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
  m_engine.cancel(id);
  m_sinks.erase(id);
  m_stats.running = m_engine.running();
  m_stats.queued = m_engine.waiting();
}

void Scheduler::start_step() {
  m_in_flight = m_engine.step(m_model_now_s);
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
  m_stats.running = step.running_after;
  m_stats.queued = m_engine.waiting();
  m_stats.token_usage = static_cast<double>(m_engine.kv_tokens()) / static_cast<double>(m_config.kv_capacity_tokens);
  for (const auto& done : step.completed) {
    m_stats.e2e_request_latency.observe((done.finish_s - done.arrival_s) / m_config.speed);
    m_recent.push_back(done);
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
    sink->on_tokens(emission.tokens, emission.finished);
  }
}

void Scheduler::log_step(const StepResult& step) {
  m_interval_tokens += step.tokens;
  m_interval_model_s += step.duration_s;
  const double usage = m_stats.token_usage;
  if (step.kind == StepKind::prefill) {
    m_log.scheduler(LogLevel::info,
                    fmt::format("Prefill batch, #new-seq: {}, #new-token: {}, #cached-token: 0, token usage: {:.2f}, "
                                "#running-req: {}, #queue-req: {}, ",
                                step.batch, step.prefill_tokens, usage, step.running_before, step.waiting_after));
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
