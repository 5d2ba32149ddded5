#include <specctl/sim/faults.hpp>

#include <doctest/doctest.h>

using namespace specctl::sim;
using namespace std::chrono_literals;

TEST_CASE("sim faults: parsing kinds and arguments") {
  CHECK(parse_fault("crash-load")->fraction == 0.5);
  CHECK(parse_fault("crash-load:0.25")->fraction == 0.25);
  CHECK(parse_fault("oom")->kind == FaultKind::oom);
  CHECK(parse_fault("hang:1")->fraction == 1.0);
  CHECK(parse_fault("port-in-use")->kind == FaultKind::port_in_use);
  CHECK(parse_fault("die-after:12")->count == 12);
  CHECK(parse_fault("garbled")->fraction == 0.1);
  CHECK(parse_fault("cut-stream")->fraction == 1.0);
  CHECK(parse_fault("slow-first-token")->delay == 5s);
  CHECK(parse_fault("slow-first-token:1m")->delay == 60s);
  CHECK(parse_fault("http-500:0.2")->fraction == 0.2);
  CHECK(parse_fault("orphan-workers")->kind == FaultKind::orphan_workers);
  CHECK(parse_fault("ignore-sigterm")->kind == FaultKind::ignore_sigterm);
  const auto cap = parse_fault("power-cap:3-7");
  REQUIRE(cap.has_value());
  CHECK(cap->kind == FaultKind::power_cap);
  CHECK(cap->count == 3);
  CHECK(cap->until == 7);
  CHECK(parse_fault("power-cap:1-1")->until == 1);
}

TEST_CASE("sim faults: power-cap takes the requests FIRST-LAST") {
  for (const auto* bad : {"power-cap", "power-cap:", "power-cap:5", "power-cap:0-3", "power-cap:4-3", "power-cap:a-b",
                          "power-cap:3-", "power-cap:-3", "power-cap:1-2-3", "power-cap:1.5-3"}) {
    CAPTURE(bad);
    const auto parsed = parse_fault(bad);
    REQUIRE_FALSE(parsed.has_value());
    CHECK(parsed.error().starts_with("fault \"power-cap\": expected requests FIRST-LAST"));
  }
  CHECK(parse_fault("power-cap:4-3").error() ==
        "fault \"power-cap\": expected requests FIRST-LAST (1 or more, FIRST <= LAST), e.g. \"power-cap:10-20\", "
        "got \"4-3\"");
}

TEST_CASE("sim faults: errors name the problem") {
  CHECK(parse_fault("crash-lod")
            .error()
            .starts_with("unknown fault \"crash-lod\" (did you mean \"crash-load\"?); "
                         "known faults: crash-load, oom, hang,"));
  CHECK(parse_fault("zzzzzzzz").error().find("did you mean") == std::string::npos);
  CHECK(parse_fault("die-after").error() ==
        "fault \"die-after\": expected a request count, e.g. \"die-after:10\", got \"\"");
  CHECK(parse_fault("die-after:-1").error().starts_with("fault \"die-after\": expected a request count"));
  CHECK(parse_fault("http-500:2").error() == "fault \"http-500\": expected a fraction between 0 and 1, got \"2\"");
  CHECK(parse_fault("orphan-workers:3").error() == "fault \"orphan-workers\" takes no argument, got \"3\"");
  CHECK(parse_fault("slow-first-token:later").error().starts_with("fault \"slow-first-token\": invalid duration"));
}

TEST_CASE("sim faults: the last fault of a kind wins") {
  const FaultSet set({*parse_fault("http-500:0.1"), *parse_fault("oom"), *parse_fault("http-500:0.7")});
  CHECK(set.find(FaultKind::http_500)->fraction == 0.7);
  CHECK(set.has(FaultKind::oom));
  CHECK_FALSE(set.has(FaultKind::hang));
}

TEST_CASE("sim faults: a fraction picks exactly floor(n * fraction) of n, spread evenly") {
  for (double fraction : {0.0, 0.1, 0.25, 0.5, 1.0 / 3.0, 0.9, 1.0}) {
    CAPTURE(fraction);
    FractionPicker picker(fraction);
    int picked = 0;
    for (int n = 1; n <= 100; ++n) {
      picked += picker.next() ? 1 : 0;
      CHECK(picked == static_cast<int>(n * fraction + 1e-9));
    }
  }
  FractionPicker half(0.5);
  CHECK_FALSE(half.next());
  CHECK(half.next());
  CHECK_FALSE(half.next());
  CHECK(half.next());
}

TEST_CASE("sim faults: edit distance") {
  CHECK(edit_distance("", "abc") == 3);
  CHECK(edit_distance("kitten", "sitting") == 3);
  CHECK(edit_distance("oom", "oom") == 0);
}
