#include <specctl/bench/stats.hpp>

#include <algorithm>
#include <cmath>
#include <limits>

namespace specctl::bench {

namespace {

constexpr double k_nan = std::numeric_limits<double>::quiet_NaN();

double sum_squares(const std::vector<double>& samples, double centre) {
  double total = 0;
  for (double x : samples) {
    total += (x - centre) * (x - centre);
  }
  return total;
}

} // namespace

double mean(const std::vector<double>& samples) {
  if (samples.empty()) {
    return k_nan;
  }
  double total = 0;
  for (double x : samples) {
    total += x;
  }
  return total / static_cast<double>(samples.size());
}

double percentile(const std::vector<double>& sorted, double p) {
  if (sorted.empty()) {
    return k_nan;
  }
  const double rank = std::clamp(p, 0.0, 100.0) / 100.0 * static_cast<double>(sorted.size() - 1);
  const auto low = static_cast<std::size_t>(std::floor(rank));
  const std::size_t high = std::min(low + 1, sorted.size() - 1);
  const double fraction = rank - static_cast<double>(low);
  return sorted[low] + (sorted[high] - sorted[low]) * fraction;
}

double median(std::vector<double> samples) {
  std::sort(samples.begin(), samples.end());
  return percentile(samples, 50);
}

double population_stdev(const std::vector<double>& samples) {
  if (samples.empty()) {
    return k_nan;
  }
  return std::sqrt(sum_squares(samples, mean(samples)) / static_cast<double>(samples.size()));
}

double sample_stdev(const std::vector<double>& samples) {
  if (samples.size() < 2) {
    return 0;
  }
  return std::sqrt(sum_squares(samples, mean(samples)) / static_cast<double>(samples.size() - 1));
}

Summary summarize(std::vector<double>& samples) {
  std::sort(samples.begin(), samples.end());
  Summary s;
  s.count = samples.size();
  s.mean = mean(samples);
  s.p50 = percentile(samples, 50);
  s.p90 = percentile(samples, 90);
  s.p99 = percentile(samples, 99);
  s.stdev = population_stdev(samples);
  s.min = samples.empty() ? k_nan : samples.front();
  s.max = samples.empty() ? k_nan : samples.back();
  return s;
}

} // namespace specctl::bench
