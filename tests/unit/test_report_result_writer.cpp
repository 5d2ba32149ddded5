// ResultWriter, the one writer of result.json: the status it sets and nobody else,
// the failure share judged once, the progress file, resume and a Slurm payload.

#include "../support/files.hpp"
#include "../support/temp_dir.hpp"

#include <specctl/report/result_writer.hpp>
#include <specctl/util/atomic_file.hpp>

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>
#include <stdexcept>

namespace report = specctl::report;
using report::ResultWriter;
using report::VariantStatus;
using ordered = nlohmann::ordered_json;

namespace {

ResultWriter started() {
  return ResultWriter({"eagle3", "EAGLE-3", "gpu1", 2, "2026-12-07T00:00:00.000Z"});
}

// A concurrency benchmark entry with one level of `requests` requests, `failed` of them failed.
ordered level_entry(int requests, int failed) {
  return {
      {"kind", "concurrency"},
      {"status", "ok"},
      {"levels", ordered::array(
                     {{{"concurrency", 4},
                       {"metrics", {{"requests", requests}, {"completed", requests - failed}, {"failed", failed}}}}})}};
}

ordered file_json(const std::filesystem::path& path) {
  return ordered::parse(specctl::test::read_file(path));
}

} // namespace

TEST_CASE("VariantStatus: each name once, what result.json may say, and its JSON") {
  for (auto status : {VariantStatus::ok, VariantStatus::failed, VariantStatus::interrupted}) {
    CHECK(report::status_of(nlohmann::json{{"status", report::status_name(status)}}) == status);
  }
  CHECK(report::status_name(VariantStatus::not_run) == "not run");
  CHECK(report::status_name(VariantStatus::damaged) == "damaged");
  // The report's own words, an unknown word or none: failed, never ok.
  CHECK(report::status_of(nlohmann::json{{"status", "not run"}}) == VariantStatus::failed);
  CHECK(report::status_of(nlohmann::json{{"status", "OK"}}) == VariantStatus::failed);
  CHECK(report::status_of(nlohmann::json::object()) == VariantStatus::failed);
  CHECK(report::status_of(nlohmann::json{{"status", 0}}) == VariantStatus::failed);
  CHECK(ordered{{"s", VariantStatus::interrupted}}.dump() == R"({"s":"interrupted"})");
  CHECK(fmt::format("{}", VariantStatus::ok) == "ok");
}

TEST_CASE("ResultWriter: status, reason and failure are its own") {
  auto result = started();
  CHECK_THROWS_AS(result.at("status"), std::logic_error);
  CHECK_THROWS_AS(result.at("reason"), std::logic_error);
  CHECK_THROWS_AS(result.at("failure"), std::logic_error);
  result.at("cleanup") = {{"actions", ordered::array()}};
  result.finish("2026-12-07T00:10:00.000Z", 600);
  CHECK(result.status() == VariantStatus::ok);
  CHECK(result.doc()["cleanup"].is_object());

  auto failed = started();
  failed.fail("load", specctl::Error("the server died\nlog line", specctl::ErrorKind::failed));
  failed.finish("2026-12-07T00:10:00.000Z", 600);
  CHECK(failed.status() == VariantStatus::failed);
  CHECK(failed.doc()["reason"] == "load: the server died");

  auto stopped = started();
  stopped.fail("bench c", specctl::Error("interrupted", specctl::ErrorKind::interrupted));
  CHECK(stopped.status() == VariantStatus::interrupted);
}

TEST_CASE("ResultWriter: the failure share fails a finished variant once, naming the benchmark") {
  auto result = started();
  result.benchmark("calm", level_entry(100, 5));
  result.benchmark("busy", level_entry(20, 2));
  result.benchmark("script", {{"kind", "command"}, {"status", "ok"}, {"metrics", {{"requests", 1}, {"failed", 1}}}});
  result.finish("2026-12-07T00:10:00.000Z", 600);
  SUBCASE("5% of 100 is within 5%; 10% of 20 is not; a command benchmark is not judged") {
    result.judge_failed_requests(5.0);
    CHECK(result.status() == VariantStatus::failed);
    CHECK(result.doc()["reason"] == "bench busy: 2 of 20 requests failed (10%, more than 5%): not measured");
    CHECK(result.doc()["failure"]["phase"] == "bench busy");
    // Its figures stay.
    CHECK(result.doc()["benchmarks"]["busy"]["levels"][0]["metrics"]["completed"] == 18);
  }
  SUBCASE("a looser bound keeps it ok") {
    result.judge_failed_requests(10.0);
    CHECK(result.status() == VariantStatus::ok);
    CHECK_FALSE(result.doc().contains("reason"));
  }
  SUBCASE("a variant that failed already keeps its own reason") {
    auto died = started();
    died.benchmark("busy", level_entry(20, 20));
    died.fail("bench busy", specctl::Error("the server died during level 4"));
    died.finish("2026-12-07T00:10:00.000Z", 600);
    died.judge_failed_requests(5.0);
    CHECK(died.doc()["reason"] == "bench busy: the server died during level 4");
  }
}

TEST_CASE("ResultWriter: the progress file, read back and completed by resume") {
  specctl::test::TempDir dir("specctl-writer");
  const auto path = dir / "result.json";
  specctl::util::WriteFailures failures;
  auto result = started();
  result.benchmark("calm", level_entry(10, 0));
  REQUIRE(result.write_progress(path, "the run stopped before this variant finished", failures));
  // The file reads as interrupted; the writer's own result is unchanged.
  CHECK(file_json(path)["status"] == "interrupted");
  CHECK(file_json(path)["reason"] == "the run stopped before this variant finished");
  CHECK_FALSE(result.doc().contains("status"));

  auto kept = ResultWriter::read(path);
  REQUIRE(kept);
  CHECK(kept->status() == VariantStatus::interrupted);
  kept->complete_on_resume("completed by --resume");
  REQUIRE(kept->write(path));
  auto done = file_json(path);
  CHECK(done["status"] == "ok");
  CHECK_FALSE(done.contains("reason"));
  CHECK(done["warnings"].back() == "completed by --resume");
  CHECK(done["benchmarks"]["calm"]["levels"][0]["metrics"]["requests"] == 10);

  SUBCASE("what is not a result is refused, naming the file") {
    dir.write("bad.json", "[1, 2]");
    auto bad = ResultWriter::read(dir / "bad.json");
    REQUIRE_FALSE(bad);
    CHECK(std::string(bad.error().what()).find("bad.json") != std::string::npos);
    CHECK_FALSE(ResultWriter::read(dir / "missing.json"));
  }
}

TEST_CASE("ResultWriter: a Slurm job's payload replaces the fields but the host and the attempt") {
  auto result = started();
  ordered payload = {{"variant", "eagle3"}, {"status", "failed"}, {"reason", "load: out of memory"},
                     {"host", "node-17"},   {"attempt", 1},       {"benchmarks", ordered::object()}};
  result.take_payload(payload);
  CHECK(result.status() == VariantStatus::failed);
  CHECK(result.doc()["reason"] == "load: out of memory");
  CHECK(result.doc()["host"] == "gpu1");
  CHECK(result.doc()["attempt"] == 2);
}
