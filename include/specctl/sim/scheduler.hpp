#pragma once

#include <specctl/sim/batch_engine.hpp>
#include <specctl/sim/log.hpp>
#include <specctl/sim/metrics.hpp>
#include <specctl/sim/options.hpp>
#include <specctl/sim/power_meter.hpp>

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>

#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

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

// The power-cap fault's window: from the arrival of user generation request `first`
// (counted from 1) until `last` of them have ended.
struct PowerCapWindow {
  int first = 0;
  int last = 0;
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
  // The GPUs' power: steps are priced under `spec`'s limit (half of it while the
  // power-cap fault's window is open) and reported to `meter` (null: no GPUs).
  void set_power(const PowerSpec& spec, PowerMeter* meter, std::optional<PowerCapWindow> cap);
  // For /sim/truth: the power-cap fault's counts and the intervals it held (unix ms);
  // null without the fault.
  nlohmann::ordered_json power_cap_truth() const;
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
  void user_request_ended(RequestId id);
  void set_capped(bool capped);
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

  // The GPUs' power and the power-cap fault: user generation requests received and
  // ended (finished, or cancelled by a client gone) since boot.
  PowerMeter* m_power = nullptr;
  double m_power_limit_w = 0.0;
  std::optional<PowerCapWindow> m_cap;
  bool m_capped = false;
  int m_user_received = 0;
  int m_user_ended = 0;
  std::unordered_set<RequestId> m_open_user;
  std::vector<std::pair<std::int64_t, std::optional<std::int64_t>>> m_cap_intervals;

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
