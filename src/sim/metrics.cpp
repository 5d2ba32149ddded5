#include <specctl/sim/log.hpp>
#include <specctl/sim/metrics.hpp>

#include <fmt/format.h>

#include <algorithm>

namespace specctl::sim {
namespace {

// SGLang's default latency buckets (seconds).
const std::vector<double> k_latency_buckets{0.1, 0.2,  0.4,  0.6,  0.8,  1.0,  2.0,   4.0,   6.0,
                                            8.0, 10.0, 20.0, 40.0, 60.0, 80.0, 100.0, 200.0, 400.0};

std::string label_escape(std::string_view text) {
  std::string out;
  for (char c : text) {
    if (c == '\\' || c == '"') {
      out += '\\';
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

void append_metric(std::string& out, std::string_view name, std::string_view type, std::string_view help,
                   std::string_view labels, double value) {
  out += fmt::format("# HELP {0} {1}\n# TYPE {0} {2}\n{0}{{{3}}} {4}\n", name, help, type, labels, python_float(value));
}

void append_histogram(std::string& out, std::string_view name, std::string_view help, std::string_view labels,
                      const Histogram& histogram) {
  out += fmt::format("# HELP {0} {1}\n# TYPE {0} histogram\n", name, help);
  long cumulative = 0;
  for (std::size_t i = 0; i < histogram.bounds.size(); ++i) {
    cumulative += histogram.counts[i];
    out += fmt::format("{}_bucket{{{},le=\"{}\"}} {}\n", name, labels, python_float(histogram.bounds[i]),
                       python_float(static_cast<double>(cumulative)));
  }
  out +=
      fmt::format("{}_bucket{{{},le=\"+Inf\"}} {}\n", name, labels, python_float(static_cast<double>(histogram.count)));
  out += fmt::format("{}_count{{{}}} {}\n", name, labels, python_float(static_cast<double>(histogram.count)));
  out += fmt::format("{}_sum{{{}}} {}\n", name, labels, python_float(histogram.sum));
}

} // namespace

Histogram::Histogram(std::vector<double> upper_bounds) : bounds(std::move(upper_bounds)), counts(bounds.size(), 0) {}

void Histogram::observe(double value) {
  const auto it = std::ranges::lower_bound(bounds, value);
  if (it != bounds.end()) {
    counts[static_cast<std::size_t>(it - bounds.begin())] += 1;
  }
  sum += value;
  count += 1;
}

double ServingStats::spec_accept_length_since_boot() const {
  return spec_verify_passes > 0 ? static_cast<double>(spec_tokens) / static_cast<double>(spec_verify_passes) : 0.0;
}

namespace {

// prometheus_client's exposition of a Counter created as NAME: the sample is
// NAME_total, and a NAME_created gauge follows (exposition.py generate_latest).
// Labels come sorted.
void append_vllm_counter(std::string& out, std::string_view name, std::string_view help, std::string_view labels,
                         double value, double created) {
  out += fmt::format("# HELP {0}_total {1}\n# TYPE {0}_total counter\n{0}_total{{{2}}} {3}\n", name, help, labels,
                     python_float(value));
  out += fmt::format("# HELP {0}_created {1}\n# TYPE {0}_created gauge\n{0}_created{{{2}}} {3}\n", name, help, labels,
                     python_float(created));
}

void append_vllm_gauge(std::string& out, std::string_view name, std::string_view help, std::string_view labels,
                       double value) {
  out += fmt::format("# HELP {0} {1}\n# TYPE {0} gauge\n{0}{{{2}}} {3}\n", name, help, labels, python_float(value));
}

} // namespace

std::string render_vllm_metrics(const ServingStats& stats, std::string_view model_name, bool speculative,
                                double created_unix_s) {
  const std::string labels = fmt::format("engine=\"0\",model_name=\"{}\"", label_escape(model_name));
  std::string out;
  append_vllm_gauge(out, "vllm:num_requests_running", "Number of requests in model execution batches.", labels,
                    stats.running);
  append_vllm_gauge(out, "vllm:num_requests_waiting", "Number of requests waiting to be processed.", labels,
                    stats.queued);
  append_vllm_gauge(out, "vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.", labels,
                    stats.token_usage);
  append_vllm_counter(out, "vllm:prompt_tokens", "Number of prefill tokens processed.", labels,
                      static_cast<double>(stats.prompt_tokens_total), created_unix_s);
  append_vllm_counter(out, "vllm:generation_tokens", "Number of generation tokens processed.", labels,
                      static_cast<double>(stats.generation_tokens_total), created_unix_s);
  if (speculative) {
    append_vllm_counter(out, "vllm:spec_decode_num_drafts", "Number of spec decoding drafts.", labels,
                        static_cast<double>(stats.spec_verify_passes), created_unix_s);
    append_vllm_counter(out, "vllm:spec_decode_num_draft_tokens", "Number of draft tokens.", labels,
                        static_cast<double>(stats.spec_draft_tokens), created_unix_s);
    append_vllm_counter(out, "vllm:spec_decode_num_accepted_tokens", "Number of accepted tokens.", labels,
                        static_cast<double>(stats.spec_accepted()), created_unix_s);
    // One child per position: the samples first, then every _created (generate_latest groups them).
    const std::string name = "vllm:spec_decode_num_accepted_tokens_per_pos";
    const std::string help = "Accepted tokens per draft position.";
    out += fmt::format("# HELP {0}_total {1}\n# TYPE {0}_total counter\n", name, help);
    for (std::size_t pos = 0; pos < stats.spec_accepted_per_pos.size(); ++pos) {
      out += fmt::format("{}_total{{{},position=\"{}\"}} {}\n", name, labels, pos,
                         python_float(static_cast<double>(stats.spec_accepted_per_pos[pos])));
    }
    out += fmt::format("# HELP {0}_created {1}\n# TYPE {0}_created gauge\n", name, help);
    for (std::size_t pos = 0; pos < stats.spec_accepted_per_pos.size(); ++pos) {
      out += fmt::format("{}_created{{{},position=\"{}\"}} {}\n", name, labels, pos, python_float(created_unix_s));
    }
  }
  return out;
}

ServingStats::ServingStats() : time_to_first_token(k_latency_buckets), e2e_request_latency(k_latency_buckets) {}

std::string render_metrics(const ServingStats& stats, std::string_view model_name, bool speculative) {
  const std::string labels = fmt::format("model_name=\"{}\"", label_escape(model_name));
  std::string out;
  append_metric(out, "sglang:num_running_reqs", "gauge", "The number of running requests.", labels, stats.running);
  append_metric(out, "sglang:num_queue_reqs", "gauge", "The number of requests in the waiting queue.", labels,
                stats.queued);
  append_metric(out, "sglang:token_usage", "gauge", "The token usage.", labels, stats.token_usage);
  append_metric(out, "sglang:gen_throughput", "gauge", "The generation throughput (token/s).", labels,
                stats.gen_throughput);
  if (speculative) {
    append_metric(out, "sglang:spec_accept_length", "gauge", "The average acceptance length of speculative decoding.",
                  labels, stats.spec_accept_length);
    append_metric(out, "sglang:spec_accept_rate", "gauge", "The average acceptance rate of speculative decoding.",
                  labels, stats.spec_accept_rate);
  }
  append_metric(out, "sglang:prompt_tokens_total", "counter", "Number of prefill tokens processed.", labels,
                static_cast<double>(stats.prompt_tokens_total));
  append_metric(out, "sglang:generation_tokens_total", "counter", "Number of generation tokens processed.", labels,
                static_cast<double>(stats.generation_tokens_total));
  append_metric(out, "sglang:num_requests_total", "counter", "Number of requests processed.", labels,
                static_cast<double>(stats.requests_total));
  append_histogram(out, "sglang:time_to_first_token_seconds", "Histogram of time to first token in seconds.", labels,
                   stats.time_to_first_token);
  append_histogram(out, "sglang:e2e_request_latency_seconds", "Histogram of End-to-end request latency in seconds",
                   labels, stats.e2e_request_latency);
  return out;
}

} // namespace specctl::sim
