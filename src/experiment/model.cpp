#include <specctl/experiment/experiment.hpp>

#include <specctl/bench/workload.hpp>
#include <specctl/util/text.hpp>

#include <algorithm>
#include <fmt/format.h>

namespace specctl::experiment {

namespace {

constexpr int k_min_requests_per_level = 10;

std::vector<std::string> levels_text(const std::vector<int>& levels) {
  std::vector<std::string> out;
  for (int level : levels) {
    out.push_back(std::to_string(level));
  }
  return out;
}

} // namespace

int BenchmarkSpec::requests_at(int level) const {
  // Enough requests that every stream finishes at least twice: a steady state, not a ramp.
  return requests.value_or(std::max(2 * level, k_min_requests_per_level));
}

bool PromptSpec::chat() const {
  return loaded && std::any_of(loaded->requests.begin(), loaded->requests.end(),
                               [](const bench::WorkloadRequest& r) { return !r.messages.empty(); });
}

int PromptSpec::longest_output(int max_tokens) const {
  return loaded ? bench::longest_output(loaded->requests, max_tokens) : max_tokens;
}

std::string BenchmarkSpec::output_text() const {
  return prompts.loaded ? bench::describe_output(prompts.loaded->requests, max_tokens)
                        : fmt::format("{} tokens", max_tokens);
}

std::string PromptSpec::describe() const {
  if (workload) {
    return bench::describe(*workload);
  }
  if (!inline_prompts.empty()) {
    return fmt::format("{} prompts given inline", inline_prompts.size());
  }
  if (file) {
    return fmt::format("prompts from {}", *file);
  }
  if (synthetic_input_tokens) {
    return fmt::format("synthetic prompts of {} tokens", *synthetic_input_tokens);
  }
  return builtin == "seeds" ? "the 3 seed prompts" : fmt::format("the built-in \"{}\" prompts", builtin);
}

std::string BenchmarkSpec::measures_text() const {
  std::string out;
  if (repeats > 1) {
    out += fmt::format(", x{} repeats", repeats);
  }
  if (!unique_prompts) {
    out += ", prompts sent verbatim";
  }
  if (!slo.empty()) {
    std::vector<std::string> bounds;
    for (const auto& [metric, bound] : slo) {
      bounds.push_back(fmt::format("{} <= {:g}", metric, bound));
    }
    out += fmt::format(", SLO {}", util::join(bounds, ", "));
  }
  if (bisect > 0) {
    out += fmt::format(", then up to {} rate{} bisected for the highest that meets it", bisect, bisect == 1 ? "" : "s");
  }
  return out;
}

std::string BenchmarkSpec::describe() const {
  switch (kind) {
  case BenchmarkKind::single_stream:
    return fmt::format("single_stream: {} runs x {}, {}, {} warmup{}", runs, output_text(), prompts.describe(), warmup,
                       measures_text());
  case BenchmarkKind::concurrency: {
    std::string requests_text =
        requests ? fmt::format("{} requests per level", *requests) : "max(2 x level, 10) requests per level";
    return fmt::format("concurrency {}: {}, {}, {}{}", util::join(levels_text(levels), ","), requests_text,
                       output_text(), prompts.describe(), measures_text());
  }
  case BenchmarkKind::rate: {
    std::vector<std::string> rates_text;
    for (double r : rates) {
      rates_text.push_back(fmt::format("{}", r));
    }
    return fmt::format("rate {} req/s for {} each, {}{}{}", util::join(rates_text, ","),
                       util::format_duration(duration), output_text(),
                       max_concurrency ? fmt::format(", at most {} in flight", *max_concurrency) : "", measures_text());
  }
  case BenchmarkKind::command: {
    std::vector<std::string> metrics;
    for (const auto& e : extract) {
      metrics.push_back(e.metric);
    }
    return fmt::format("command on {}: {} -> {}", run_on == CommandWhere::host ? "the host" : "this machine", run,
                       util::join(metrics, ", "));
  }
  }
  return {};
}

std::vector<std::string> metrics_of(const BenchmarkSpec& benchmark) {
  if (benchmark.kind == BenchmarkKind::command) {
    std::vector<std::string> out;
    for (const auto& e : benchmark.extract) {
      out.push_back(e.metric);
    }
    return out;
  }
  std::vector<std::string> out = {"output_tok_s", "accept_length"};
  // Where GPU telemetry was sampled (docs/report.md): tok_per_j, output tokens per
  // joule of all the variant's GPUs (tok/J, higher is better), and power_w, their
  // summed mean power (W, lower is better).
  const std::initializer_list<const char*> telemetry = {"tok_per_j", "power_w"};
  if (benchmark.kind == BenchmarkKind::single_stream) {
    out.insert(out.end(), {"ttft_ms", "tpot_ms", "e2e_ms"});
    out.insert(out.end(), telemetry.begin(), telemetry.end());
    return out;
  }
  out.insert(out.end(), {"request_s", "error_rate"});
  if (!benchmark.slo.empty()) {
    out.push_back("goodput_rps");
  }
  for (const char* latency : {"ttft", "tpot", "itl", "e2e"}) {
    for (const char* p : {"p50", "p90", "p99"}) {
      out.push_back(fmt::format("{}_{}_ms", latency, p));
    }
  }
  out.insert(out.end(), telemetry.begin(), telemetry.end());
  return out;
}

const Variant* Experiment::find_variant(const std::string& variant_name) const {
  auto it = std::find_if(variants.begin(), variants.end(), [&](const Variant& v) { return v.name == variant_name; });
  return it == variants.end() ? nullptr : &*it;
}

const BenchmarkSpec* Experiment::find_benchmark(const std::string& benchmark_name) const {
  auto it = std::find_if(benchmarks.begin(), benchmarks.end(),
                         [&](const BenchmarkSpec& b) { return b.name == benchmark_name; });
  return it == benchmarks.end() ? nullptr : &*it;
}

} // namespace specctl::experiment
