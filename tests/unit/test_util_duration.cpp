#include <doctest/doctest.h>
#include <fmt/format.h>
#include <specctl/util/duration.hpp>

#include <string>
#include <vector>

using specctl::util::Duration;
using specctl::util::format_duration;
using specctl::util::parse_duration;
using namespace std::chrono_literals;

TEST_CASE("parse_duration") {
  SUBCASE("units") {
    CHECK(parse_duration("90s").value() == 90s);
    CHECK(parse_duration("15m").value() == 15min);
    CHECK(parse_duration("1h").value() == 1h);
    CHECK(parse_duration("250ms").value() == 250ms);
    CHECK(parse_duration("1h30m").value() == 90min);
    CHECK(parse_duration("1.5s").value() == 1500ms);
  }
  SUBCASE("bare seconds") {
    CHECK(parse_duration("90").value() == 90s);
    CHECK(parse_duration("0.25").value() == 250ms);
  }
  SUBCASE("rejects") {
    for (const std::string& bad : std::vector<std::string>{"", "15 minutes", "m", "1m30", "1.2.3s", "-5s", "5x", ".s",
                                                           "1e400s", fmt::format("{}s", std::string(400, '9'))}) {
      CAPTURE(bad);
      auto r = parse_duration(bad);
      REQUIRE_FALSE(r.has_value());
      CHECK(r.error().find("invalid duration") == 0);
    }
  }
}

TEST_CASE("format_duration") {
  CHECK(format_duration(250ms) == "250ms");
  CHECK(format_duration(1500ms) == "1.5s");
  CHECK(format_duration(45s) == "45s");
  CHECK(format_duration(15min) == "15m");
  CHECK(format_duration(65min) == "1h 5m");
  CHECK(format_duration(2h + 10min + 5s) == "2h 10m 5s");
  CHECK(format_duration(0ms) == "0ms");
}
