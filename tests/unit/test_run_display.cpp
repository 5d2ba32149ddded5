#include <doctest/doctest.h>
#include <specctl/run/display.hpp>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fmt/format.h>
#include <string>
#include <thread>
#include <vector>

using specctl::run::Display;
using specctl::run::FinishedRow;
using specctl::run::make_display;
using specctl::run::RunHeader;
using specctl::run::Severity;
using specctl::run::short_duration;
using specctl::run::Verbosity;
using namespace std::chrono_literals;

namespace {

using TimePoint = std::chrono::system_clock::time_point;

// What a display wrote, read back in pieces: take() returns what came since the last take().
class Capture {
public:
  Capture() : m_file(open_memstream(&m_buffer, &m_size)) { REQUIRE(m_file != nullptr); }
  Capture(const Capture&) = delete;
  Capture& operator=(const Capture&) = delete;
  ~Capture() {
    std::fclose(m_file);
    std::free(m_buffer);
  }
  std::FILE* file() { return m_file; }
  std::string all() {
    std::fflush(m_file);
    return std::string(m_buffer, m_size);
  }
  std::string take() {
    std::string text = all();
    std::string fresh = text.substr(m_taken);
    m_taken = text.size();
    return fresh;
  }

private:
  char* m_buffer = nullptr;
  std::size_t m_size = 0;
  std::FILE* m_file;
  std::size_t m_taken = 0;
};

// 2024-01-15 at the given local time, so that the expected timestamps hold in any time zone.
TimePoint at(int hour, int minute, int second) {
  std::tm tm{};
  tm.tm_year = 124;
  tm.tm_mon = 0;
  tm.tm_mday = 15;
  tm.tm_hour = hour;
  tm.tm_min = minute;
  tm.tm_sec = second;
  tm.tm_isdst = -1;
  return std::chrono::system_clock::from_time_t(std::mktime(&tm));
}

struct FakeClock {
  TimePoint now = at(20, 1, 31);
  specctl::run::Clock fn() {
    return [this] { return now; };
  }
};

// Plays a stream through a minimal terminal that knows what the live display
// sends (cursor up, clear line, newline) and returns the screen's lines.
std::vector<std::string> screen(const std::string& stream) {
  std::vector<std::string> lines(1);
  std::size_t row = 0;
  std::size_t col = 0;
  for (std::size_t i = 0; i < stream.size(); ++i) {
    std::string_view rest = std::string_view(stream).substr(i);
    if (rest.starts_with("\x1b[1A")) {
      REQUIRE(row > 0);
      --row;
      i += 3;
    } else if (rest.starts_with("\x1b[2K")) {
      lines[row].clear();
      col = 0;
      i += 3;
    } else if (rest.starts_with("\x1b")) {
      FAIL("unexpected escape sequence");
    } else if (stream[i] == '\n') {
      ++row;
      col = 0;
      if (row == lines.size()) {
        lines.emplace_back();
      }
    } else {
      REQUIRE(col == lines[row].size());
      lines[row] += stream[i];
      ++col;
    }
  }
  if (lines.back().empty()) {
    lines.pop_back();
  }
  return lines;
}

specctl::bench::Progress progress(std::string phase, int done, int total, double tok_s, bool finished = false,
                                  double elapsed_s = 0) {
  specctl::bench::Progress p;
  p.phase = std::move(phase);
  p.done = done;
  p.total = total;
  p.tok_s = tok_s;
  p.finished = finished;
  p.elapsed_s = elapsed_s;
  return p;
}

FinishedRow ok_row(std::string variant, double load_s, std::string tok_s, std::string accept) {
  return FinishedRow{
      std::move(variant), true, "", load_s, {{"1-stream tok/s", std::move(tok_s)}, {"accept", std::move(accept)}}};
}

RunHeader header(int variants, std::optional<std::chrono::seconds> estimate = std::nullopt,
                 std::vector<std::string> plan = {}) {
  return RunHeader{"eagle3-sweep", variants, "results/eagle3-sweep/1", estimate, {}, std::move(plan)};
}

} // namespace

TEST_CASE("short_duration") {
  CHECK(short_duration(0s) == "0s");
  CHECK(short_duration(45s) == "45s");
  CHECK(short_duration(190s) == "3m10s");
  CHECK(short_duration(12min + 3s) == "12m03s");
  CHECK(short_duration(1h + 5min + 59s) == "1h05m");
  CHECK(short_duration(-5s) == "0s");
}

TEST_CASE("plain display: timestamped lines, thinned") {
  Capture out;
  FakeClock clock;
  auto display = make_display(out.file(), Verbosity::normal, false, clock.fn());
  display->run_started(header(2, 45min, {"on node1: baseline, eagle3", "at most 2h"}));
  display->phase("baseline", 1, 2, "cleanup");
  clock.now += 2s;
  display->phase("baseline", 1, 2, "launch");
  clock.now += 3s;
  display->phase("baseline", 1, 2, "load");
  display->load_progress("baseline", 0, std::nullopt);
  display->load_progress("baseline", 3, std::nullopt);
  display->load_progress("baseline", 12, 8min);
  display->load_progress("baseline", 15, 7min);
  clock.now += 4min;
  display->load_progress("baseline", 40.4, 190s);
  display->message("baseline", Severity::info, "tokenizer cached");
  display->message("baseline", Severity::warning, "slow disk");
  display->message("", Severity::error, "lost host node2");
  display->load_progress("baseline", 99.7, 1s);
  display->load_progress("baseline", 100, 0s);
  display->phase("baseline", 1, 2, "bench single-stream");
  display->bench_progress("baseline", progress("single-stream", 1, 5, 91.0));
  clock.now += 3s;
  display->bench_progress("baseline", progress("single-stream", 2, 5, 92.0));
  clock.now += 8s;
  display->bench_progress("baseline", progress("single-stream", 4, 5, 92.5));
  clock.now += 1s;
  display->bench_progress("baseline", progress("single-stream", 5, 5, 92.4, true, 13));
  clock.now += 9min + 59s;
  display->variant_finished(ok_row("baseline", 612.4, "92.6", "1.97"));
  display->phase("eagle3", 2, 2, "load");
  clock.now += 65s;
  display->variant_finished(FinishedRow{"eagle3", false, "OOM at load: CUDA out of memory\nlog tail", 3.25, {}});
  display->variant_finished(FinishedRow{"ghost", false, "never started", std::nullopt, {}});
  display->run_finished("variant   tok/s\nbaseline  92.6");

  CHECK(out.all() ==
        "[20:01:31] eagle3-sweep: 2 variants, results in results/eagle3-sweep/1, estimated 45m (until about 20:46)\n"
        "  on node1: baseline, eagle3\n"
        "  at most 2h\n"
        "[20:01:31] [1/2] baseline: cleanup\n"
        "[20:01:33] [1/2] baseline: launch\n"
        "[20:01:36] [1/2] baseline: load\n"
        "[20:01:36] [1/2] baseline: load 0%\n"
        "[20:01:36] [1/2] baseline: load 12% (ETA 8m00s)\n"
        "[20:05:36] [1/2] baseline: load 40% (ETA 3m10s)\n"
        "[20:05:36] [1/2] baseline: warning: slow disk\n"
        "[20:05:36] error: lost host node2\n"
        "[20:05:36] [1/2] baseline: load 99% (ETA 1s)\n"
        "[20:05:36] [1/2] baseline: load 100% (ETA 0s)\n"
        "[20:05:36] [1/2] baseline: bench single-stream\n"
        "[20:05:36] [1/2] baseline: single-stream 1/5 requests ok, 0 failed, 91.0 tok/s\n"
        "[20:05:47] [1/2] baseline: single-stream 4/5 requests ok, 0 failed, 92.5 tok/s\n"
        "[20:05:48] [1/2] baseline: single-stream done: 5/5 requests ok, 0 failed, 92.4 tok/s in 13.0s\n"
        "[20:15:47] [1/2] baseline: ok in 14m16s, load 10m12s, 1-stream tok/s 92.6, accept 1.97\n"
        "[20:15:47] [2/2] eagle3: load\n"
        "[20:16:52] [2/2] eagle3: FAILED after 1m05s: OOM at load: CUDA out of memory\n"
        "[20:16:52] ghost: FAILED: never started\n"
        "variant   tok/s\n"
        "baseline  92.6\n");
}

TEST_CASE("plain display: verbosity") {
  auto play = [](Display& display) {
    display.run_started(header(1));
    display.phase("baseline", 1, 1, "load");
    display.load_progress("baseline", 50, std::nullopt);
    display.message("baseline", Severity::info, "tokenizer cached");
    display.message("baseline", Severity::warning, "slow disk");
    display.message("baseline", Severity::error, "server died");
    display.bench_progress("baseline", progress("concurrency 4", 10, 10, 300, true, 2));
    display.variant_finished(FinishedRow{"baseline", false, "server died", std::nullopt, {}});
    display.run_finished("table\n");
  };
  FakeClock clock;
  SUBCASE("quiet: errors, finished rows and the final table") {
    Capture out;
    auto display = make_display(out.file(), Verbosity::quiet, false, clock.fn());
    play(*display);
    CHECK(out.all() == "[20:01:31] [1/1] baseline: error: server died\n"
                       "[20:01:31] [1/1] baseline: FAILED after 0s: server died\n"
                       "table\n");
  }
  SUBCASE("verbose: info too") {
    Capture out;
    auto display = make_display(out.file(), Verbosity::verbose, false, clock.fn());
    play(*display);
    CHECK(out.all() ==
          "[20:01:31] eagle3-sweep: 1 variant, results in results/eagle3-sweep/1\n"
          "[20:01:31] [1/1] baseline: load\n"
          "[20:01:31] [1/1] baseline: load 50%\n"
          "[20:01:31] [1/1] baseline: tokenizer cached\n"
          "[20:01:31] [1/1] baseline: warning: slow disk\n"
          "[20:01:31] [1/1] baseline: error: server died\n"
          "[20:01:31] [1/1] baseline: concurrency 4 done: 10/10 requests ok, 0 failed, 300.0 tok/s in 2.0s\n"
          "[20:01:31] [1/1] baseline: FAILED after 0s: server died\n"
          "table\n");
  }
}

TEST_CASE("reporter_for forwards to the display") {
  Capture out;
  FakeClock clock;
  auto display = make_display(out.file(), Verbosity::verbose, false, clock.fn());
  display->phase("baseline", 1, 3, "load");
  {
    auto reporter = display->reporter_for("baseline");
    reporter->info("killed stale server 1234");
    reporter->warning("port 30000 busy");
    reporter->progress("node1 baseline: loading", 31, 95s);
    reporter->progress("node1 baseline: loading", 35, 90s);
  }
  CHECK(out.all() == "[20:01:31] [1/3] baseline: load\n"
                     "[20:01:31] [1/3] baseline: killed stale server 1234\n"
                     "[20:01:31] [1/3] baseline: warning: port 30000 busy\n"
                     "[20:01:31] [1/3] baseline: load 31% (ETA 1m35s)\n");
}

TEST_CASE("tty display: live block") {
  Capture out;
  FakeClock clock;
  auto display = make_display(out.file(), Verbosity::normal, true, clock.fn());
  const std::string clear2 = "\x1b[1A\x1b[2K\x1b[1A\x1b[2K";

  SUBCASE("a variant's line and the footer, redrawn in place") {
    display->run_started(header(2, 45min));
    display->phase("baseline", 1, 2, "cleanup");
    CHECK(
        screen(out.all()) ==
        std::vector<std::string>{
            "[20:01:31] eagle3-sweep: 2 variants, results in results/eagle3-sweep/1, estimated 45m (until about 20:46)",
            "[1/2] baseline  cleanup  (0s)", "elapsed 0s, 0 of 2 done, about 45m left"});
    out.take();

    clock.now += 5s;
    display->phase("baseline", 1, 2, "load");
    CHECK(out.take().starts_with(clear2));

    // Throttled: a progress update within 100 ms of the last draw waits for the next one.
    clock.now += 50ms;
    display->load_progress("baseline", 41, 200s);
    CHECK(out.take().empty());
    clock.now += 100ms;
    display->load_progress("baseline", 42, 190s);
    std::string redraw = out.take();
    CHECK(redraw.starts_with(clear2));
    CHECK(redraw.ends_with("[1/2] baseline  load  [########............]  42% ETA 3m10s\n"
                           "elapsed 5s, 0 of 2 done, about 45m left\n"));

    // A phase change is drawn at once.
    clock.now += 10ms;
    display->phase("baseline", 1, 2, "bench single-stream");
    CHECK_FALSE(out.take().empty());
    clock.now += 10ms;
    display->bench_progress("baseline", progress("single-stream", 2, 5, 90.1));
    CHECK(out.take().empty());
    clock.now += 10ms;
    display->bench_progress("baseline", progress("single-stream", 5, 5, 92.4, true, 12));
    CHECK(out.take().ends_with("[1/2] baseline  bench single-stream  5/5 requests ok, 0 failed, 92.4 tok/s\n"
                               "elapsed 5s, 0 of 2 done, about 45m left\n"));

    display->phase("baseline", 1, 2, "bench concurrency");
    display->bench_progress("baseline", progress("concurrency 10", 120, 200, 1432.5));
    clock.now += 1s;
    display->bench_progress("baseline", progress("concurrency 10", 120, 200, 1432.5));
    CHECK(screen(out.all()).at(1) ==
          "[1/2] baseline  bench concurrency  concurrency 10: 120/200 requests ok, 0 failed, 1432.5 tok/s");
  }

  SUBCASE("messages and finished rows go above the block") {
    RunHeader h = header(2);
    h.variant_names = {"baseline", "eagle3-nograph"};
    display->run_started(h);
    display->phase("baseline", 1, 2, "load");
    display->load_progress("baseline", 50, std::nullopt);
    out.take();

    display->message("baseline", Severity::warning, "slow disk");
    std::string chunk = out.take();
    CHECK(chunk == clear2 + "[20:01:31] [1/2] baseline: warning: slow disk\n" +
                       "[1/2] baseline  load  [##########..........]  50%\n" + "elapsed 0s, 0 of 2 done\n");
    display->message("baseline", Severity::info, "not shown without --verbose");
    CHECK(out.take().empty());

    clock.now += 10min;
    display->variant_finished(ok_row("baseline", 612.4, "92.6", "1.97"));
    display->phase("eagle3-nograph", 2, 2, "launch");
    clock.now += 1min;
    display->variant_finished(
        FinishedRow{"eagle3-nograph", false, "OOM at load: CUDA out of memory", std::nullopt, {}});
    CHECK(screen(out.all()) == std::vector<std::string>{
                                   "[20:01:31] eagle3-sweep: 2 variants, results in results/eagle3-sweep/1",
                                   "[20:01:31] [1/2] baseline: warning: slow disk",
                                   "variant         status    load  1-stream tok/s  accept",
                                   "baseline        ok      10m12s            92.6    1.97",
                                   "eagle3-nograph  FAILED       -  OOM at load: CUDA out of memory",
                                   "elapsed 11m00s, 2 of 2 done",
                               });

    display->run_finished("final table\n");
    CHECK(screen(out.all()) == std::vector<std::string>{
                                   "[20:01:31] eagle3-sweep: 2 variants, results in results/eagle3-sweep/1",
                                   "[20:01:31] [1/2] baseline: warning: slow disk",
                                   "variant         status    load  1-stream tok/s  accept",
                                   "baseline        ok      10m12s            92.6    1.97",
                                   "eagle3-nograph  FAILED       -  OOM at load: CUDA out of memory",
                                   "final table",
                               });
    // Nothing is drawn after the end.
    display->phase("late", 1, 1, "load");
    CHECK(out.take().find("late") == std::string::npos);
  }

  SUBCASE("a figure the table has no column for brings a new header row") {
    display->run_started(header(2));
    display->variant_finished(FinishedRow{"a", true, "", 3.3, {{"tok/s", "92.6"}}});
    display->variant_finished(FinishedRow{"b", true, "", std::nullopt, {{"accept", "1.97"}, {"tok/s", "150.1"}}});
    CHECK(screen(out.all()) == std::vector<std::string>{
                                   "[20:01:31] eagle3-sweep: 2 variants, results in results/eagle3-sweep/1",
                                   "variant  status    load   tok/s",
                                   "a        ok        3.3s    92.6",
                                   "variant  status    load   tok/s  accept",
                                   "b        ok           -   150.1    1.97",
                                   "elapsed 0s, 2 of 2 done",
                               });
  }

  SUBCASE("several variants in flight, aligned, in order") {
    display->run_started(header(12));
    display->phase("eagle3-long-name", 10, 12, "load");
    display->phase("base", 9, 12, "launch");
    clock.now += 3s;
    display->phase("eagle3-long-name", 10, 12, "warmup");
    CHECK(screen(out.all()) == std::vector<std::string>{
                                   "[20:01:31] eagle3-sweep: 12 variants, results in results/eagle3-sweep/1",
                                   "[ 9/12] base              launch  (3s)",
                                   "[10/12] eagle3-long-name  warmup  (0s)",
                                   "elapsed 3s, 0 of 12 done",
                               });
  }

  SUBCASE("lines longer than the terminal are cut, so that cursor-up stays right") {
    std::string name(150, 'x');
    display->phase(name, 1, 1, "load");
    for (const auto& line : screen(out.all())) {
      CHECK(line.size() < 100);
    }
  }
}

TEST_CASE("tty display: remaining time") {
  Capture out;
  FakeClock clock;
  auto display = make_display(out.file(), Verbosity::normal, true, clock.fn());
  auto footer = [&] { return screen(out.all()).back(); };

  display->run_started(header(3, 45min));
  display->phase("a", 1, 3, "load");
  clock.now += 5min;
  display->load_progress("a", 10, std::nullopt);
  // From the header's estimate until a variant finishes.
  CHECK(footer() == "elapsed 5m00s, 0 of 3 done, about 40m left");
  clock.now += 5min;
  display->variant_finished(FinishedRow{"a", true, "", std::nullopt, {}});
  // Then from the finished variants: 10 minutes each, two to go.
  CHECK(footer() == "elapsed 10m00s, 1 of 3 done, about 20m left");
  display->phase("b", 2, 3, "load");
  clock.now += 4min;
  display->load_progress("b", 50, std::nullopt);
  // b needs about 6 more minutes, c 10.
  CHECK(footer() == "elapsed 14m00s, 1 of 3 done, about 16m left");

  SUBCASE("past the estimate, nothing finished: no guess") {
    Capture out2;
    auto late = make_display(out2.file(), Verbosity::normal, true, clock.fn());
    late->run_started(header(3, 10min));
    late->phase("a", 1, 3, "load");
    clock.now += 11min;
    late->load_progress("a", 10, std::nullopt);
    CHECK(screen(out2.all()).back() == "elapsed 11m00s, 0 of 3 done");
  }
}

TEST_CASE("tty display: quiet draws no block") {
  Capture out;
  FakeClock clock;
  auto display = make_display(out.file(), Verbosity::quiet, true, clock.fn());
  display->run_started(header(1));
  display->phase("a", 1, 1, "load");
  display->load_progress("a", 50, 10s);
  display->message("a", Severity::warning, "hidden");
  display->message("a", Severity::error, "server died");
  display->variant_finished(FinishedRow{"a", false, "server died", std::nullopt, {}});
  display->run_finished("table");
  CHECK(out.all() == "[20:01:31] [1/1] a: error: server died\n"
                     "variant  status    load\n"
                     "a        FAILED       -  server died\n"
                     "table\n");
}

TEST_CASE("display: several variants from several threads") {
  constexpr int k_threads = 4;
  FakeClock clock;
  auto play = [](Display& display, int i) {
    std::string name = "variant" + std::to_string(i);
    display.phase(name, i + 1, k_threads, "cleanup");
    display.phase(name, i + 1, k_threads, "load");
    for (int p = 0; p < 100; ++p) {
      display.load_progress(name, p, std::nullopt);
    }
    display.message(name, Severity::warning, "slow");
    display.phase(name, i + 1, k_threads, "bench single-stream");
    for (int d = 1; d <= 50; ++d) {
      display.bench_progress(name, progress("single-stream", d, 50, 90, d == 50, 1));
    }
    display.variant_finished(ok_row(name, 1, "90.0", "2.00"));
  };
  auto run_threads = [&](Display& display) {
    std::vector<std::thread> threads;
    for (int i = 0; i < k_threads; ++i) {
      threads.emplace_back(play, std::ref(display), i);
    }
    for (auto& t : threads) {
      t.join();
    }
    display.run_finished("done");
  };

  SUBCASE("plain: whole lines, each variant's in order") {
    Capture out;
    auto display = make_display(out.file(), Verbosity::normal, false, clock.fn());
    run_threads(*display);
    std::string text = out.all();
    // Per variant: 3 phases, 10 load steps, a warning, 2 bench lines (the first and the finish), the row.
    CHECK(std::count(text.begin(), text.end(), '\n') == k_threads * 17 + 1);
    for (int i = 0; i < k_threads; ++i) {
      std::string prefix = fmt::format("[20:01:31] [{}/{}] variant{}: ", i + 1, k_threads, i);
      CAPTURE(prefix);
      auto first = text.find(prefix + "load 0%\n");
      auto last = text.find(prefix + "load 90%\n");
      auto row = text.find(prefix + "ok in 0s, load 1.0s, 1-stream tok/s 90.0, accept 2.00\n");
      CHECK(first < last);
      CHECK(last < row);
      CHECK(row != std::string::npos);
    }
  }

  SUBCASE("tty: the table holds every variant, the block is gone") {
    Capture out;
    auto display = make_display(out.file(), Verbosity::normal, true, clock.fn());
    run_threads(*display);
    auto lines = screen(out.all());
    REQUIRE(!lines.empty());
    CHECK(lines.back() == "done");
    int rows = 0;
    for (const auto& line : lines) {
      CHECK(line.find("elapsed") == std::string::npos);
      rows += line.starts_with("variant") && line.find(" ok ") != std::string::npos ? 1 : 0;
    }
    CHECK(rows == k_threads);
  }
}
