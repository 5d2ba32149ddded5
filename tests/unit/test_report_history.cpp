// What earlier runs took (src/report/history.cpp): the run's header and `specctl plan`
// read the durations from result folders beside one another. What could break: a
// foreign experiment's folder counted, an old duration preferred to a newer one, a
// failed variant's duration taken as a measure, the run under way read as history.

#include "../support/temp_dir.hpp"

#include <specctl/report/history.hpp>
#include <specctl/report/results.hpp>
#include <specctl/util/atomic_file.hpp>

#include <doctest/doctest.h>
#include <fstream>

using nlohmann::json;
using specctl::test::TempDir;

namespace {

void write_run(const std::filesystem::path& dir, const std::string& experiment,
               const std::vector<std::tuple<std::string, std::string, double>>& variants) {
  specctl::report::ResultPaths paths{dir};
  REQUIRE(specctl::util::make_dirs_durable(dir));
  std::ofstream(paths.run_info()) << json{{"format", "specctl-run"}, {"experiment", experiment}}.dump();
  for (const auto& [name, status, seconds] : variants) {
    REQUIRE(specctl::util::make_dirs_durable(paths.variant_dir(name)));
    std::ofstream(paths.result(name)) << json{
        {"format", specctl::report::k_result_format},
        {"variant", name},
        {"status", status},
        {"duration_s", seconds}}.dump();
  }
}

} // namespace

TEST_CASE("history: the newest ok duration of each variant, from runs of the same experiment only") {
  using std::chrono::seconds;
  TempDir dir;
  write_run(dir / "20250101-100000", "sweep", {{"a", "ok", 100}, {"b", "ok", 200}});
  write_run(dir / "20250102-100000", "sweep", {{"a", "ok", 120}, {"b", "failed", 5}});
  write_run(dir / "20250103-100000", "other", {{"a", "ok", 999}, {"c", "ok", 999}});
  // The run under way is not history, even when it has finished variants.
  write_run(dir / "20250104-100000", "sweep", {{"a", "ok", 1}});
  REQUIRE(specctl::util::make_dirs_durable(dir / "not-a-run"));

  auto history = specctl::report::read_history("sweep", dir.path(), {"a", "b", "c"}, dir / "20250104-100000");
  CHECK(history.dir == dir.path().string());
  REQUIRE(history.durations.size() == 2);
  CHECK(history.durations.at("a") == seconds(120));
  CHECK(history.durations.at("b") == seconds(200));
  CHECK(history.mean() == seconds(160));
  CHECK(history.longest() == seconds(200));
  // c has no duration: it counts at the mean of the others.
  CHECK(history.estimate({"a", "b", "c"}) == seconds(480));
  CHECK(history.estimate({"a"}) == seconds(120));
  CHECK_FALSE(history.estimate({"c"}));

  SUBCASE("only the variants asked for") {
    auto only_b = specctl::report::read_history("sweep", dir.path(), {"b"});
    CHECK(only_b.durations.size() == 1);
    CHECK(only_b.durations.at("b") == seconds(200));
  }
  SUBCASE("no folder, no history") {
    auto none = specctl::report::read_history("sweep", dir / "absent", {"a"});
    CHECK(none.durations.empty());
    CHECK(none.dir == (dir / "absent").string());
  }
}
