#pragma once

#include <specctl/sim/batch_engine.hpp>
#include <specctl/sim/log.hpp>
#include <specctl/sim/metrics.hpp>
#include <specctl/sim/options.hpp>

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>

#include <chrono>
#include <deque>
#include <memory>
#include <unordered_map>

namespace specctl::sim {

// Receives a request's tokens as the scheduler produces them.
class TokenSink {
public:
  virtual ~TokenSink() = default;
  // `tokens` more tokens (one verify step's worth with speculation).
  virtual void on_tokens(int tokens, bool finished) = 0;
  // The same with the verify passes behind them; sinks that count drafts override it.
  virtual void on_emission(const Emission& emission) { on_tokens(emission.tokens, emission.finished); }
};

struct SchedulerConfig {
  double speed = 1.0;
  int decode_log_interval = 40;
  std::uint64_t seed = 0;
  long kv_capacity_tokens = 1;
  Engine engine = Engine::sglang;
  // vLLM's stats log interval (VLLM_LOG_STATS_INTERVAL, 10 s), in wall seconds
  // at speed 1; divided by the speed like every simulated duration.
  double stats_interval_s = 10.0;
  // llama.cpp's slots (-np), for the slot id of its per-request lines.
  int slots = 4;
  // The engine's prefix cache; capacity 0: off.
  PrefixCacheConfig prefix_cache{};
};

// Steps the BatchEngine in real time on the server's event loop: each step's
// tokens are delivered when its (speed-scaled) duration has passed. Steps are
// scheduled against absolute deadlines, so a late wake-up shortens the next
// wait instead of slowing the simulated GPU; model time (the sum of step
// durations) is what the calibration and /sim/requests report.
class Scheduler {
public:
  Scheduler(boost::asio::io_context& io, PerfModel model, SchedulerConfig config, const Log& log, ServingStats& stats);

  // Queues a request; the sink hears every token. first_token_delay is model
  // time (the slow-first-token fault).
  void submit(RequestId id, int prompt_tokens, int target_tokens, std::chrono::milliseconds first_token_delay,
              std::shared_ptr<TokenSink> sink, RequestKind kind = RequestKind::user, PromptShape shape = {});
  // Forgets a request whose client went away.
  void cancel(RequestId id);

  const PerfModel& model() const { return m_engine.model(); }
  // The most recent finished requests, model seconds (for /sim/requests).
  const std::deque<CompletedRequest>& recent() const { return m_recent; }
  double model_now_s() const { return m_model_now_s; }

private:
  enum class State { idle, stepping, waiting };
  using Clock = std::chrono::steady_clock;

  void start_step();
  void finish_step();
  void deliver(const StepResult& step);
  void log_step(const StepResult& step);
  void log_sglang_step(const StepResult& step);
  void log_completed(const CompletedRequest& done);
  void schedule_stats_log();
  void log_vllm_stats();
  Clock::time_point deadline_for(double model_s) const;
  double model_time_at(Clock::time_point when) const;

  boost::asio::steady_timer m_timer;
  BatchEngine m_engine;
  SchedulerConfig m_config;
  const Log& m_log;
  ServingStats& m_stats;
  State m_state = State::idle;
  std::uint64_t m_wait_generation = 0;
  Clock::time_point m_anchor_real;
  double m_anchor_model_s = 0.0;
  double m_model_now_s = 0.0;
  double m_step_end_s = 0.0;
  StepResult m_in_flight;
  std::unordered_map<RequestId, std::shared_ptr<TokenSink>> m_sinks;
  std::deque<CompletedRequest> m_recent;

  // Since the last decode log line.
  int m_interval_steps = 0;
  long m_interval_tokens = 0;
  double m_interval_model_s = 0.0;
  long m_interval_spec_tokens = 0;
  long m_interval_verify_passes = 0;

  // Since vLLM's last stats line (wall clock, like its logger).
  boost::asio::steady_timer m_stats_timer;
  Clock::time_point m_stats_since;
  long m_stats_prompt_tokens = 0;
  long m_stats_generation_tokens = 0;
  long m_stats_drafts = 0;
  long m_stats_draft_tokens = 0;
  long m_stats_accepted = 0;
  std::vector<long> m_stats_accepted_per_pos;
  bool m_stats_last_busy = false;
};

} // namespace specctl::sim
