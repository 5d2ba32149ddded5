#include <specctl/run/server_metrics.hpp>

#include <specctl/server/log_watch.hpp>

#include <algorithm>
#include <map>

namespace specctl::run {

namespace {

struct Accumulator {
  int samples = 0;
  double sum = 0;
  double min = 0;
  double max = 0;
  double last = 0;

  void add(double value) {
    min = samples == 0 ? value : std::min(min, value);
    max = samples == 0 ? value : std::max(max, value);
    sum += value;
    last = value;
    ++samples;
  }
};

} // namespace

std::vector<ServerMetric> scan_server_metrics(const server::LogPatterns& patterns, std::string_view log_window) {
  const server::LogMatcher matcher(patterns);
  server::LogLines splitter;
  std::map<std::string, Accumulator, std::less<>> seen;
  // feed() returns finished lines only; the unfinished last one stays inside and is dropped.
  for (const auto& line : splitter.feed(log_window)) {
    for (const auto& [name, value] : matcher.classify(line).metrics) {
      seen[name].add(value);
    }
  }
  std::vector<ServerMetric> out;
  for (const auto& [name, pattern] : patterns.metrics) {
    auto it = seen.find(name);
    if (it == seen.end()) {
      continue;
    }
    const Accumulator& acc = it->second;
    out.push_back({name, acc.samples, acc.sum / acc.samples, acc.min, acc.max, acc.last});
  }
  return out;
}

const ServerMetric* find_server_metric(const std::vector<ServerMetric>& metrics, std::string_view name) {
  auto it = std::find_if(metrics.begin(), metrics.end(), [&](const ServerMetric& m) { return m.name == name; });
  return it == metrics.end() ? nullptr : &*it;
}

bool speculation_ineffective(double accept_length) {
  return accept_length < k_ineffective_accept_length;
}

} // namespace specctl::run
