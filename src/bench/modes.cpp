#include "engine.hpp"

#include <specctl/bench/bench.hpp>
#include <specctl/util/hash.hpp>

#include <algorithm>
#include <cmath>
#include <fmt/format.h>
#include <random>

namespace specctl::bench {

namespace {

void check_common(const RunOptions& options) {
  if (auto problem = check_requests(options.request, options.prompts); !problem.empty()) {
    throw Error(problem, ErrorKind::bad_input);
  }
  if (options.request.max_tokens < 1) {
    throw Error(fmt::format("max_tokens must be at least 1, not {}", options.request.max_tokens), ErrorKind::bad_input);
  }
  if (options.warmup < 0) {
    throw Error(fmt::format("warmup must be 0 or more, not {}", options.warmup), ErrorKind::bad_input);
  }
}

// Warm-up requests are sent all at once and thrown away: they open
// connections and wake the server's caches before anything is measured.
void warm_up(detail::Engine& engine, const RunOptions& options) {
  if (options.warmup > 0) {
    engine.run_level(detail::LevelPlan{detail::k_warmup_phase, options.warmup, options.warmup, {}});
  }
  if (options.on_measured_start) {
    options.on_measured_start();
  }
}

std::string format_rate(double rate) {
  return fmt::format("rate {:g}/s", rate);
}

} // namespace

std::string unique_prefix(std::string_view tag, std::string_view phase, int index) {
  std::string label = tag.empty() ? fmt::format("{} #{}", phase, index) : fmt::format("{} {} #{}", tag, phase, index);
  // A prefix cache matches tokens from the start: a readable label alone shares its
  // first tokens with every other request ("[bench single-stream #"), which llama.cpp
  // served from its cache (25 of 92 prompt tokens). Eight hex digits of the label's
  // hash first leave no more than the first token or two in common.
  return fmt::format("{} [{}] ", util::fingerprint(label).substr(0, 8), label);
}

int default_requests(int level) {
  return std::max(2 * level, 10);
}

std::vector<double> arrival_times(double rate, double burstiness, double duration_s, std::uint64_t seed) {
  std::vector<double> times;
  if (!(rate > 0) || !(burstiness > 0) || !(duration_s > 0) || !std::isfinite(rate)) {
    return times;
  }
  std::mt19937_64 random(seed);
  // Gamma(shape k, scale 1/(rate k)) gaps have mean 1/rate; k = 1 is the exponential (Poisson) case.
  std::gamma_distribution<double> gap(burstiness, 1.0 / (rate * burstiness));
  double t = 0;
  while (true) {
    t += gap(random);
    if (t >= duration_s) {
      break;
    }
    times.push_back(t);
  }
  return times;
}

SingleStreamResult run_single_stream(const Target& target, const SingleStreamOptions& options) {
  check_common(options.common);
  if (options.runs < 1) {
    throw Error(fmt::format("runs must be at least 1, not {}", options.runs), ErrorKind::bad_input);
  }
  const Target resolved = resolve_target(target);
  detail::Engine engine(resolved, options.common, std::max(1, options.common.warmup));
  warm_up(engine, options.common);
  SingleStreamResult result;
  if (engine.stopped()) {
    result.ended = engine.ended();
    return result;
  }
  if (options.common.preconnect) {
    engine.preconnect(1);
  }
  result.level = engine.run_level(detail::LevelPlan{"single-stream", options.runs, 1, {}});
  result.ended = engine.ended();
  summarize_runs(result);
  return result;
}

void summarize_runs(SingleStreamResult& result) {
  result.runs.clear();
  std::vector<double> speeds;
  for (const auto& record : result.level.records) {
    SingleStreamRun run;
    run.run = record.index + 1;
    run.ok = record.ok();
    run.output_tokens = record.output_tokens;
    run.ttft_ms = record.ttft_ms;
    run.e2e_ms = record.e2e_ms;
    if (run.ok && record.e2e_ms > 0) {
      run.tok_s = record.output_tokens / (record.e2e_ms / 1000.0);
      speeds.push_back(run.tok_s);
    }
    if (run.ok && record.output_tokens > 1 && record.e2e_ms > record.ttft_ms) {
      run.decode_tok_s = (record.output_tokens - 1) / ((record.e2e_ms - record.ttft_ms) / 1000.0);
    }
    result.runs.push_back(run);
  }
  result.mean = speeds.empty() ? 0 : mean(speeds);
  result.median = speeds.empty() ? 0 : median(speeds);
  result.stdev = speeds.empty() ? 0 : sample_stdev(speeds);
}

ConcurrencyResult run_concurrency(const Target& target, const ConcurrencyOptions& options) {
  check_common(options.common);
  if (options.levels.empty()) {
    throw Error("no concurrency levels given", ErrorKind::bad_input);
  }
  for (int level : options.levels) {
    if (level < 1) {
      throw Error(fmt::format("concurrency levels must be at least 1, not {}", level), ErrorKind::bad_input);
    }
  }
  if (options.requests && *options.requests < 1) {
    throw Error(fmt::format("requests per level must be at least 1, not {}", *options.requests), ErrorKind::bad_input);
  }
  const Target resolved = resolve_target(target);
  const int widest = *std::max_element(options.levels.begin(), options.levels.end());
  detail::Engine engine(resolved, options.common, std::max(widest, options.common.warmup));
  warm_up(engine, options.common);
  ConcurrencyResult result;
  for (int level : options.levels) {
    if (engine.stopped()) {
      break;
    }
    const int count = options.requests.value_or(default_requests(level));
    if (options.common.preconnect) {
      engine.preconnect(std::min(level, count));
    }
    LevelResult measured = engine.run_level(detail::LevelPlan{fmt::format("concurrency {}", level), count, level, {}});
    measured.concurrency = level;
    result.levels.push_back(std::move(measured));
  }
  result.ended = engine.ended();
  return result;
}

RateResult run_rate(const Target& target, const RateOptions& options) {
  check_common(options.common);
  if (options.rates.empty()) {
    throw Error("no request rates given", ErrorKind::bad_input);
  }
  for (double rate : options.rates) {
    if (!(rate > 0) || !std::isfinite(rate)) {
      throw Error(fmt::format("a request rate must be a positive number of requests per second, not {}", rate),
                  ErrorKind::bad_input);
    }
  }
  if (!(options.burstiness > 0)) {
    throw Error(fmt::format("burstiness must be positive, not {}", options.burstiness), ErrorKind::bad_input);
  }
  if (options.duration <= std::chrono::milliseconds::zero()) {
    throw Error("the duration of a rate level must be positive", ErrorKind::bad_input);
  }
  if (options.max_concurrency && *options.max_concurrency < 1) {
    throw Error("max concurrency must be at least 1", ErrorKind::bad_input);
  }
  const double duration_s = std::chrono::duration<double>(options.duration).count();
  std::vector<std::vector<double>> plans;
  int widest = std::max(1, options.common.warmup);
  for (std::size_t i = 0; i < options.rates.size(); ++i) {
    plans.push_back(arrival_times(options.rates[i], options.burstiness, duration_s, options.seed + i));
    widest = std::max(widest, options.max_concurrency.value_or(static_cast<int>(plans.back().size())));
  }
  const Target resolved = resolve_target(target);
  // Without a cap, an open loop has as many streams as the server is slow: size for the worst case if allowed.
  detail::Engine engine(resolved, options.common, widest,
                        options.max_concurrency ? http::FdLimit::required : http::FdLimit::best_effort);
  warm_up(engine, options.common);
  RateResult result;
  for (std::size_t i = 0; i < options.rates.size(); ++i) {
    if (engine.stopped()) {
      break;
    }
    LevelResult measured;
    if (!plans[i].empty()) {
      const int count = static_cast<int>(plans[i].size());
      if (options.common.preconnect && options.max_concurrency) {
        engine.preconnect(std::min(*options.max_concurrency, count));
      }
      measured = engine.run_level(
          detail::LevelPlan{format_rate(options.rates[i]), count, options.max_concurrency.value_or(0), plans[i]});
    } else {
      measured.warnings.push_back("no request arrived within the duration: raise the rate or the duration");
    }
    measured.rate = options.rates[i];
    measured.burstiness = options.burstiness;
    measured.max_concurrency = options.max_concurrency;
    result.levels.push_back(std::move(measured));
  }
  result.ended = engine.ended();
  return result;
}

} // namespace specctl::bench
