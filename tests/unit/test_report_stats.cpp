#include <specctl/report/stats.hpp>

#include <doctest/doctest.h>
#include <limits>

using specctl::report::ratio_interval;
using specctl::report::spread_of;
using specctl::report::student_t_quantile;

TEST_CASE("report stats: Student t quantiles match the printed tables") {
  // Two-sided 95% critical values, from any statistics textbook's t table.
  CHECK(student_t_quantile(0.975, 1) == doctest::Approx(12.7062).epsilon(1e-5));
  CHECK(student_t_quantile(0.975, 2) == doctest::Approx(4.30265).epsilon(1e-5));
  CHECK(student_t_quantile(0.975, 4) == doctest::Approx(2.77645).epsilon(1e-5));
  CHECK(student_t_quantile(0.975, 10) == doctest::Approx(2.22814).epsilon(1e-5));
  CHECK(student_t_quantile(0.975, 30) == doctest::Approx(2.04227).epsilon(1e-5));
  CHECK(student_t_quantile(0.995, 5) == doctest::Approx(4.03214).epsilon(1e-5));
  CHECK(student_t_quantile(0.975, std::numeric_limits<double>::infinity()) == doctest::Approx(1.95996).epsilon(1e-5));
  // Symmetric, and between the neighbouring whole degrees of freedom for a fractional one.
  CHECK(student_t_quantile(0.025, 4) == doctest::Approx(-2.77645).epsilon(1e-5));
  double t = student_t_quantile(0.975, 2.5);
  CHECK(t < 4.30265);
  CHECK(t > 3.18245);
}

TEST_CASE("report stats: the interval of a ratio of means, computed by hand") {
  // a = 147, 150, 153: mean 150, sd 3; b = 98, 100, 102: mean 100, sd 2.
  // Relative variances of the means are equal (9/(3*150^2) = 4/(3*100^2) = 1/7500),
  // so Welch's degrees of freedom are 2 * (3 - 1) = 4 and t = 2.776445.
  // se = 1.5 * sqrt(2/7500) = 0.0244949; half width = 0.0680082.
  auto ci = ratio_interval(spread_of({147, 150, 153}), spread_of({98, 100, 102}));
  REQUIRE(ci);
  CHECK(ci->ratio == doctest::Approx(1.5));
  CHECK(ci->df == doctest::Approx(4.0));
  CHECK(ci->low == doctest::Approx(1.5 - 0.0680082).epsilon(1e-6));
  CHECK(ci->high == doctest::Approx(1.5 + 0.0680082).epsilon(1e-6));

  // 99, 103, 95 (sd 4) against the same b: u_a = 16/29403, u_b = 4/30000,
  // df = (u_a + u_b)^2 / (u_a^2/2 + u_b^2/2) = 2.92458.
  auto close = ratio_interval(spread_of({99, 103, 95}), spread_of({98, 100, 102}));
  REQUIRE(close);
  CHECK(close->ratio == doctest::Approx(0.99));
  CHECK(close->df == doctest::Approx(2.92458).epsilon(1e-5));
  CHECK(close->low < 1.0);
  CHECK(close->high > 1.0);

  SUBCASE("no spread on either side: a zero-width interval, infinite degrees of freedom") {
    auto exact = ratio_interval(spread_of({10, 10}), spread_of({5, 5}));
    REQUIRE(exact);
    CHECK(exact->low == doctest::Approx(2.0));
    CHECK(exact->high == doctest::Approx(2.0));
  }
  SUBCASE("fewer than 2 runs or a mean that is not positive: no interval") {
    CHECK_FALSE(ratio_interval(spread_of({10}), spread_of({5, 6})));
    CHECK_FALSE(ratio_interval(spread_of({10, 11}), spread_of({0, 0})));
  }
}
