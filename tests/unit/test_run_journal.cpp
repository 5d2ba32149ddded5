#include "../support/temp_dir.hpp"

#include <specctl/run/journal.hpp>
#include <specctl/util/atomic_file.hpp>

#include <doctest/doctest.h>
#include <fstream>
#include <sstream>
#include <sys/stat.h>
#include <thread>
#include <vector>

using specctl::test::TempDir;

namespace {

std::string read_all(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

} // namespace

TEST_CASE("write_file_atomic replaces a file whole and leaves no temporary behind") {
  TempDir dir;
  auto path = dir / "result.json";
  REQUIRE(specctl::util::write_file_atomic(path, "first\n"));
  CHECK(read_all(path) == "first\n");
  REQUIRE(specctl::util::write_file_atomic(path, "second, longer\n"));
  CHECK(read_all(path) == "second, longer\n");
  int files = 0;
  for ([[maybe_unused]] const auto& entry : std::filesystem::directory_iterator(dir.path())) {
    ++files;
  }
  CHECK(files == 1);

  SUBCASE("a folder that does not exist is an error naming the file") {
    auto written = specctl::util::write_file_atomic(dir / "missing/result.json", "x");
    REQUIRE_FALSE(written);
    CHECK(std::string(written.error().what()).find("missing/result.json") != std::string::npos);
  }
}

TEST_CASE("make_dirs_durable creates parents and accepts existing folders") {
  TempDir dir;
  auto deep = dir / "a/b/c";
  REQUIRE(specctl::util::make_dirs_durable(deep));
  CHECK(std::filesystem::is_directory(deep));
  REQUIRE(specctl::util::make_dirs_durable(deep));
  std::ofstream(dir / "file") << "x";
  CHECK_FALSE(specctl::util::make_dirs_durable(dir / "file/sub"));
}

TEST_CASE("journal: entries in order with time and event, torn last line skipped") {
  TempDir dir;
  {
    specctl::run::Journal journal(dir.path());
    journal.record("run_started", {{"experiment", "quickstart"}});
    journal.record("phase_started", {{"variant", "baseline"}, {"phase", "load"}});
  }
  // A kill -9 in the middle of a write leaves half a line.
  std::ofstream(dir / "journal.jsonl", std::ios::app) << R"({"t": "2026-11-29T20:00:00.000Z", "event": "pha)";
  int torn = -1;
  auto entries = specctl::run::read_journal(dir.path(), &torn);
  REQUIRE(entries.size() == 2);
  CHECK(torn == 1);
  CHECK(entries[0]["event"] == "run_started");
  CHECK(entries[0]["experiment"] == "quickstart");
  CHECK(entries[1]["variant"] == "baseline");
  std::string t = entries[0]["t"];
  CHECK(t.size() == std::string("2026-11-29T20:01:31.123Z").size());
  CHECK(t.back() == 'Z');

  SUBCASE("a journal continued after the torn line starts on a line of its own") {
    specctl::run::Journal journal(dir.path());
    journal.record("run_resumed");
    auto again = specctl::run::read_journal(dir.path(), &torn);
    REQUIRE(again.size() == 3);
    CHECK(torn == 1);
    CHECK(again.back()["event"] == "run_resumed");
  }
}

TEST_CASE("journal: several threads never interleave within a line") {
  TempDir dir;
  specctl::run::Journal journal(dir.path());
  constexpr int k_threads = 4;
  constexpr int k_entries = 50;
  std::vector<std::thread> threads;
  for (int t = 0; t < k_threads; ++t) {
    threads.emplace_back([&journal, t] {
      for (int i = 0; i < k_entries; ++i) {
        journal.record("phase_started",
                       {{"variant", "v" + std::to_string(t)}, {"i", i}, {"pad", std::string(500, 'x')}});
      }
    });
  }
  for (auto& thread : threads) {
    thread.join();
  }
  int torn = -1;
  auto entries = specctl::run::read_journal(dir.path(), &torn);
  CHECK(torn == 0);
  CHECK(entries.size() == k_threads * k_entries);
}
