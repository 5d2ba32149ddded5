#include <specctl/report/stats.hpp>

#include <specctl/bench/stats.hpp>

#include <cmath>
#include <limits>

namespace specctl::report {

namespace {

// The regularized incomplete beta function I_x(a, b), by its continued
// fraction (modified Lentz), used on the side where it converges fast.
double beta_continued_fraction(double a, double b, double x) {
  constexpr int k_max_terms = 300;
  constexpr double k_epsilon = 1e-15;
  constexpr double k_tiny = 1e-300;
  double c = 1.0;
  double d = 1.0 - (a + b) * x / (a + 1.0);
  d = std::abs(d) < k_tiny ? k_tiny : d;
  d = 1.0 / d;
  double f = d;
  for (int m = 1; m <= k_max_terms; ++m) {
    for (int step = 0; step < 2; ++step) {
      double numerator = step == 0 ? m * (b - m) * x / ((a + 2.0 * m - 1.0) * (a + 2.0 * m))
                                   : -(a + m) * (a + b + m) * x / ((a + 2.0 * m) * (a + 2.0 * m + 1.0));
      d = 1.0 + numerator * d;
      d = std::abs(d) < k_tiny ? k_tiny : d;
      c = 1.0 + numerator / c;
      c = std::abs(c) < k_tiny ? k_tiny : c;
      d = 1.0 / d;
      f *= c * d;
      if (step == 1 && std::abs(c * d - 1.0) < k_epsilon) {
        return f;
      }
    }
  }
  return f;
}

double incomplete_beta(double a, double b, double x) {
  if (x <= 0) {
    return 0;
  }
  if (x >= 1) {
    return 1;
  }
  double log_front = std::lgamma(a + b) - std::lgamma(a) - std::lgamma(b) + a * std::log(x) + b * std::log1p(-x);
  if (x < (a + 1.0) / (a + b + 2.0)) {
    return std::exp(log_front) * beta_continued_fraction(a, b, x) / a;
  }
  return 1.0 - std::exp(log_front) * beta_continued_fraction(b, a, 1.0 - x) / b;
}

double student_t_cdf(double t, double df) {
  double x = df / (df + t * t);
  double tail = 0.5 * incomplete_beta(df / 2.0, 0.5, x);
  return t >= 0 ? 1.0 - tail : tail;
}

double normal_quantile(double p) {
  // Bisection on erfc: slow but exact to double precision, and called rarely.
  double low = -40;
  double high = 40;
  for (int i = 0; i < 200; ++i) {
    double mid = (low + high) / 2;
    (0.5 * std::erfc(-mid / std::sqrt(2.0)) < p ? low : high) = mid;
  }
  return (low + high) / 2;
}

} // namespace

double student_t_quantile(double p, double df) {
  if (!(p > 0 && p < 1) || !(df > 0)) {
    return std::numeric_limits<double>::quiet_NaN();
  }
  if (std::isinf(df)) {
    return normal_quantile(p);
  }
  // The cdf is monotonic: bisect. Quantiles of interest lie well inside ±1e6
  // (df = 1, p = 0.9999995 is about 6.4e5).
  double low = -1e7;
  double high = 1e7;
  for (int i = 0; i < 200 && high - low > 1e-12 * std::max(1.0, std::abs(low)); ++i) {
    double mid = (low + high) / 2;
    (student_t_cdf(mid, df) < p ? low : high) = mid;
  }
  return (low + high) / 2;
}

Spread spread_of(const std::vector<double>& samples) {
  return {bench::mean(samples), bench::sample_stdev(samples), static_cast<int>(samples.size())};
}

std::optional<RatioInterval> ratio_interval(const Spread& a, const Spread& b, double confidence) {
  if (a.n < 2 || b.n < 2 || !(a.mean > 0) || !(b.mean > 0)) {
    return std::nullopt;
  }
  double n_a = a.n;
  double n_b = b.n;
  double mean_a = a.mean;
  double mean_b = b.mean;
  // Squared relative standard errors of the two means.
  double u_a = a.stdev * a.stdev / (n_a * mean_a * mean_a);
  double u_b = b.stdev * b.stdev / (n_b * mean_b * mean_b);
  RatioInterval out;
  out.ratio = mean_a / mean_b;
  double denominator = u_a * u_a / (n_a - 1) + u_b * u_b / (n_b - 1);
  out.df = denominator > 0 ? (u_a + u_b) * (u_a + u_b) / denominator : std::numeric_limits<double>::infinity();
  double t = student_t_quantile(1.0 - (1.0 - confidence) / 2.0, out.df);
  double half = t * out.ratio * std::sqrt(u_a + u_b);
  out.low = out.ratio - half;
  out.high = out.ratio + half;
  return out;
}

} // namespace specctl::report
