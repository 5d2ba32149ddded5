#include <specctl/run/server_metrics.hpp>

#include <specctl/server/log_watch.hpp>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <fmt/format.h>
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

std::optional<double> prometheus_value(std::string_view text, std::string_view name) {
  std::optional<double> total;
  const std::string with_total = std::string(name) + "_total";
  std::size_t at = 0;
  while (at < text.size()) {
    std::size_t end = text.find('\n', at);
    if (end == std::string_view::npos) {
      end = text.size();
    }
    std::string_view line = text.substr(at, end - at);
    at = end + 1;
    if (line.empty() || line.front() == '#') {
      continue;
    }
    // "name{labels} value [timestamp]" or "name value [timestamp]".
    std::size_t name_end = line.find_first_of("{ ");
    if (name_end == std::string_view::npos) {
      continue;
    }
    std::string_view sample = line.substr(0, name_end);
    if (sample != name && sample != with_total) {
      continue;
    }
    std::size_t value_at = name_end;
    if (line[name_end] == '{') {
      // Label values may hold '}' inside quotes: the value follows the last '}'.
      value_at = line.rfind('}');
      if (value_at == std::string_view::npos) {
        continue;
      }
      ++value_at;
    }
    std::string_view rest = line.substr(value_at);
    rest.remove_prefix(std::min(rest.find_first_not_of(' '), rest.size()));
    rest = rest.substr(0, rest.find(' '));
    double value = 0;
    auto [ptr, ec] = std::from_chars(rest.data(), rest.data() + rest.size(), value);
    if (ec != std::errc() || ptr != rest.data() + rest.size() || !std::isfinite(value)) {
      continue;
    }
    total = total.value_or(0) + value;
  }
  return total;
}

namespace {

std::optional<AcceptLength> from_prometheus(const server::AcceptSource& source, const AcceptWindow& w) {
  if (!w.metrics_before || !w.metrics_after) {
    return std::nullopt;
  }
  auto drafts_before = prometheus_value(*w.metrics_before, source.drafts);
  auto drafts_after = prometheus_value(*w.metrics_after, source.drafts);
  auto accepted_before = prometheus_value(*w.metrics_before, source.accepted);
  auto accepted_after = prometheus_value(*w.metrics_after, source.accepted);
  if (!drafts_before || !drafts_after || !accepted_before || !accepted_after) {
    return std::nullopt;
  }
  const double drafts = *drafts_after - *drafts_before;
  const double accepted = *accepted_after - *accepted_before;
  if (drafts <= 0 || accepted < 0) {
    return std::nullopt;
  }
  return AcceptLength{
      1.0 + accepted / drafts, source.kind,
      fmt::format("prometheus {}: 1 + \u0394{} / \u0394{}", source.path, source.accepted, source.drafts), drafts};
}

std::optional<AcceptLength> from_log(const server::AcceptSource& source, const server::LogPatterns& patterns,
                                     std::string_view log) {
  const server::LogMatcher matcher(patterns);
  server::LogLines splitter;
  double sum = 0;
  double weights = 0;
  for (const auto& line : splitter.feed(log)) {
    std::optional<double> value;
    std::optional<double> weight;
    std::optional<double> accepted;
    for (const auto& [name, v] : matcher.classify(line).metrics) {
      if (name == source.metric) {
        value = v;
      } else if (!source.weight.empty() && name == source.weight) {
        weight = v;
      } else if (!source.accepted.empty() && name == source.accepted) {
        accepted = v;
      }
    }
    if (!value) {
      continue;
    }
    double w = 1.0;
    if (!source.weight.empty()) {
      if (!weight) {
        continue;
      }
      w = *weight;
    } else if (!source.accepted.empty()) {
      if (!accepted) {
        continue;
      }
      // Passes are whole: rounding undoes the printed accept length's two decimals.
      w = *value > 1.0 ? std::round(*accepted / (*value - 1.0)) : 0.0;
      if (w <= 0) {
        continue;
      }
      // The line's own accepted tokens over its passes, not its rounded mean.
      sum += w + *accepted;
      weights += w;
      continue;
    }
    sum += *value * w;
    weights += w;
  }
  if (weights <= 0) {
    return std::nullopt;
  }
  std::string how = !source.weight.empty() ? fmt::format("log: \"{}\" weighted by \"{}\"", source.metric, source.weight)
                    : !source.accepted.empty()
                        ? fmt::format("log: 1 + accepted / passes, passes = \"{}\" / (\"{}\" - 1) per line",
                                      source.accepted, source.metric)
                        : fmt::format("log: mean of \"{}\" over its lines", source.metric);
  return AcceptLength{sum / weights, source.kind, how, weights};
}

std::optional<AcceptLength> from_responses(const server::AcceptSource& source, const AcceptWindow& w) {
  if (w.draft_accepted < 0 || w.predicted_tokens < 0 || w.completed <= 0) {
    return std::nullopt;
  }
  // A request's first token comes from its prompt pass; every later step verifies
  // a draft and yields its accepted tokens plus one: steps = tokens - 1 - accepted.
  const double steps = static_cast<double>(w.predicted_tokens - w.completed - w.draft_accepted);
  if (steps <= 0) {
    return std::nullopt;
  }
  return AcceptLength{1.0 + static_cast<double>(w.draft_accepted) / steps, source.kind,
                      "responses: 1 + accepted / (predicted - 1 - accepted) per request (timings)", steps};
}

} // namespace

std::optional<AcceptLength> accept_length_of(const std::vector<server::AcceptSource>& sources,
                                             const server::LogPatterns& patterns, const AcceptWindow& window) {
  if (sources.empty()) {
    return from_log(server::AcceptSource{}, patterns, window.log);
  }
  for (const auto& source : sources) {
    std::optional<AcceptLength> found;
    switch (source.kind) {
    case server::AcceptSource::Kind::prometheus:
      found = from_prometheus(source, window);
      break;
    case server::AcceptSource::Kind::log:
      found = from_log(source, patterns, window.log);
      break;
    case server::AcceptSource::Kind::responses:
      found = from_responses(source, window);
      break;
    }
    if (found) {
      return found;
    }
  }
  return std::nullopt;
}

bool speculation_ineffective(double accept_length) {
  return accept_length < k_ineffective_accept_length;
}

} // namespace specctl::run
