// Per-category figures, a single-stream benchmark split by category and merged
// back, and length histograms (src/bench/breakdown.cpp).

#include <specctl/bench/breakdown.hpp>

#include <doctest/doctest.h>

using namespace specctl::bench;

namespace {

WorkloadRequest request(std::string id, std::string category) {
  WorkloadRequest r;
  r.id = std::move(id);
  r.category = std::move(category);
  r.prompt = "prompt of " + r.id;
  return r;
}

RequestRecord record(int index, int prompt, std::string category, int tokens, double e2e_ms) {
  RequestRecord r;
  r.index = index;
  r.prompt = prompt;
  r.category = std::move(category);
  r.output_tokens = tokens;
  r.e2e_ms = e2e_ms;
  r.ttft_ms = e2e_ms / 10;
  return r;
}

} // namespace

TEST_CASE("categories_of: first appearance order, none without a tag") {
  CHECK(categories_of({request("a", "math"), request("b", "code"), request("c", "math")}) ==
        std::vector<std::string>{"math", "code"});
  CHECK(categories_of({request("a", ""), request("b", "")}).empty());
}

TEST_CASE("category_figures: counts, per-request tok/s and the responses' draft counts per category") {
  std::vector<RequestRecord> records = {record(0, 0, "code", 100, 1000), record(1, 1, "math", 50, 1000),
                                        record(2, 2, "code", 100, 500), record(3, 3, "math", 0, 0)};
  records[3].failure = FailureKind::http_status;
  records[0].draft_accepted = 60;
  records[0].server_predicted_n = 100;
  const auto figures = category_figures(records, {"math", "code", "writing"});
  REQUIRE(figures.size() == 3);
  CHECK(figures[0].category == "math");
  CHECK(figures[0].completed == 1);
  CHECK(figures[0].failed == 1);
  CHECK(*figures[0].tok_s == doctest::Approx(50));
  CHECK(figures[0].draft_accepted == -1);
  CHECK(figures[1].category == "code");
  CHECK(figures[1].completed == 2);
  // (100 tok/s + 200 tok/s) / 2: each request's own speed, not tokens over time.
  CHECK(*figures[1].tok_s == doctest::Approx(150));
  CHECK(figures[1].draft_accepted == 60);
  CHECK(figures[1].predicted_tokens == 100);
  // A category of the workload no request of this window had.
  CHECK(figures[2].completed == 0);
  CHECK_FALSE(figures[2].tok_s);
  CHECK(category_figures({record(0, 0, "", 10, 100)}, {}).empty());
}

TEST_CASE("split_by_category: each part sends what the whole would have sent of its category") {
  // a1 b1 a2 b2 c1: runs 7 pick a1 b1 a2 b2 c1 a1 b1.
  const std::vector<WorkloadRequest> requests = {request("a1", "a"), request("b1", "b"), request("a2", "a"),
                                                 request("b2", "b"), request("c1", "c")};
  const auto parts = split_by_category(requests, 7);
  REQUIRE(parts.size() == 3);
  CHECK(parts[0].category == "a");
  CHECK(parts[0].runs == 3);
  CHECK(parts[0].prompt_index == std::vector<int>{0, 2});
  CHECK(parts[1].runs == 3);
  CHECK(parts[2].runs == 1);
  CHECK(parts[2].prompts.front().id == "c1");
  // Fewer runs than categories: a category without a pick does not run.
  CHECK(split_by_category(requests, 2).size() == 2);
  // One category, or an untagged request: nothing to split.
  CHECK(split_by_category({request("a1", "a"), request("a2", "a")}, 4).empty());
  CHECK(split_by_category({request("a1", "a"), request("x", "")}, 4).empty());
}

TEST_CASE("merge_single_stream: one result as if the parts had run as one") {
  SingleStreamPart first;
  first.prompt_index = {0, 2};
  first.result.level.records = {record(0, 0, "a", 100, 1000), record(1, 1, "a", 100, 500)};
  first.result.level.duration_s = 1.5;
  first.result.level.client_cpu_s = 0.25;
  SingleStreamPart second;
  second.prompt_index = {1};
  second.result.level.records = {record(0, 0, "b", 60, 1000)};
  second.result.level.records[0].start_s = 0.1;
  second.result.level.duration_s = 1.0;
  second.result.level.client_cpu_s = 0.5;
  second.result.ended = Ended::interrupted;
  std::vector<SingleStreamPart> parts;
  parts.push_back(first);
  parts.push_back(second);
  const auto merged = merge_single_stream(std::move(parts));
  REQUIRE(merged.level.records.size() == 3);
  CHECK(merged.level.records[1].prompt == 2);
  CHECK(merged.level.records[2].index == 2);
  CHECK(merged.level.records[2].prompt == 1);
  CHECK(merged.level.records[2].start_s == doctest::Approx(1.6));
  CHECK(merged.level.duration_s == doctest::Approx(2.5));
  CHECK(merged.level.client_cpu_s == doctest::Approx(0.75));
  CHECK(merged.level.completed == 3);
  CHECK(merged.level.output_tokens == 260);
  REQUIRE(merged.runs.size() == 3);
  CHECK(merged.runs[2].run == 3);
  CHECK(merged.mean == doctest::Approx((100.0 + 200.0 + 60.0) / 3));
  CHECK(merged.ended == Ended::interrupted);
}

TEST_CASE("length_histogram: round widths, the first bin at a multiple of the width, every value counted") {
  const auto small = length_histogram({3, 4, 4, 7});
  REQUIRE(small);
  CHECK(small->width == 1);
  CHECK(small->lo == 3);
  CHECK(small->counts == std::vector<int>{1, 2, 0, 0, 1});
  const auto wide = length_histogram({130, 1000, 2047, 512}, 20);
  REQUIRE(wide);
  CHECK(wide->width == 100);
  CHECK(wide->lo == 100);
  CHECK(wide->counts.size() == 20);
  CHECK(wide->counts.front() == 1);
  CHECK(wide->counts.back() == 1);
  const auto tight = length_histogram({0, 1999}, 20);
  REQUIRE(tight);
  CHECK(tight->width == 100);
  CHECK(tight->counts.size() == 20);
  CHECK(length_histogram({250, 250})->counts == std::vector<int>{2});
  CHECK_FALSE(length_histogram({}));
}
