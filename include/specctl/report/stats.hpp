#pragma once

// Statistics for comparing a few runs: Student's t quantiles and the 95%
// confidence interval of a ratio of two means.

#include <optional>
#include <vector>

namespace specctl::report {

// The p-quantile (0 < p < 1) of Student's t distribution with df degrees of
// freedom (df > 0, not necessarily whole); the normal quantile for infinite df.
double student_t_quantile(double p, double df);

// Run-to-run figures of a metric: mean, sample stdev, number of runs.
struct Spread {
  double mean = 0;
  double stdev = 0;
  int n = 0;
};

Spread spread_of(const std::vector<double>& samples);

struct RatioInterval {
  double ratio = 0;
  double low = 0;
  double high = 0;
  // Welch–Satterthwaite degrees of freedom; infinite when neither side varies.
  double df = 0;
};

// mean(a) / mean(b) with its confidence interval, by the delta method:
//   se = ratio * sqrt(s_a² / (n_a m_a²) + s_b² / (n_b m_b²))
//   ratio ± t(1 - (1 - confidence) / 2, df) * se
// with Welch–Satterthwaite degrees of freedom over the two relative variances.
// nullopt when a side has fewer than 2 samples or a mean that is not positive.
std::optional<RatioInterval> ratio_interval(const Spread& a, const Spread& b, double confidence = 0.95);

} // namespace specctl::report
