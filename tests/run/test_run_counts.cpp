// What a run counts, and what it reads back from its own result folder. A variant's
// status is final once the run has judged its failed requests, and the ok and failed
// counts (run_finished, the exit code) are taken from that status, once. The line after
// each variant comes from the results in memory, so each result.json is read a bounded
// number of times however many variants there are (the final report reads each once),
// not once for every variant that finishes after it: counted with strace(1).

#include "sweep.hpp"

#include "../support/skip.hpp"

#include <regex>

using namespace run_test;

TEST_CASE("a sweep of 12 variants reads each result.json at most twice, not once per later variant") {
  if (!std::filesystem::exists("/usr/bin/strace") || st::pretend_missing("strace")) {
    st::skip("no /usr/bin/strace (scripts/setup.sh --tests installs it)");
    return;
  }
  constexpr int k_variants = 12;
  Sweep sweep;
  std::string variants;
  for (int k = 1; k <= k_variants; ++k) {
    variants += fmt::format("  - name: v{}\n", k);
  }
  variants.pop_back();
  sweep.write(variants, "  - {name: single, kind: single_stream, runs: 1, max_tokens: 4}", "0.2s", 20);
  auto trace = sweep.out().parent_path() / "opens.trace";
  // --seccomp-bpf: only the traced calls stop the process, so the servers it starts run at
  // speed. LeakSanitizer cannot check a traced process (it attaches to the threads itself and
  // aborts: "Can't open /proc/PID/task"): under sanitizers the traced ones skip the leak check.
  const char* asan = std::getenv("ASAN_OPTIONS");
  const std::string no_leak_check =
      "ASAN_OPTIONS=" + std::string(asan != nullptr ? asan : "") + (asan != nullptr ? ":" : "") + "detect_leaks=0";
  auto run = sweep.start({"--out", sweep.out().string()},
                         {"/usr/bin/env", no_leak_check, "/usr/bin/strace", "-f", "--seccomp-bpf", "-qq", "-e",
                          "trace=open,openat", "-o", trace.string()});
  auto code = run->wait_exit_code(k_sweep_timeout);
  INFO(sweep.output());
  REQUIRE(code == 0);

  // 1234  openat(AT_FDCWD, "/tmp/.../out/variants/v3/result.json", O_RDONLY) = 5
  const std::regex opened_for_reading(R"re("([^"]*/variants/(v[0-9]+)/result\.json)", O_RDONLY[^)]*\) = [0-9]+)re");
  std::map<std::string, int> reads;
  std::istringstream lines(st::read_file(trace));
  std::string line;
  while (std::getline(lines, line)) {
    std::smatch match;
    if (std::regex_search(line, match, opened_for_reading)) {
      ++reads[match[2]];
    }
  }
  INFO("reads: " << [&] {
    std::string out;
    for (const auto& [variant, count] : reads) {
      out += fmt::format("{}={} ", variant, count);
    }
    return out;
  }());
  // Re-reading the folder after each variant read v1's 12 + 1 times, 90 reads in all.
  CHECK(reads.size() == k_variants);
  for (const auto& [variant, count] : reads) {
    CHECK_MESSAGE(count <= 2, variant);
  }
  // And the lines still carry the figures of the final table.
  CHECK(sweep.output().find("v12: ok") != std::string::npos);
  CHECK(std::regex_search(sweep.output(), std::regex(R"(v1: ok in [^\n]*single tok/s [0-9.]+)")));
}

TEST_CASE(
    "a variant whose requests failed past max_failed_pct counts as failed once, in the journal and the exit code") {
  Sweep sweep;
  // specsim answers every second request with HTTP 500 (FractionPicker: the warmup, the
  // first, passes): 2 of the 4 measured requests fail, past the default 5%.
  sweep.write(R"(  - name: good
  - name: flaky
    knobs: {sim_fault: ["http-500:0.5"]})",
              "  - {name: single, kind: single_stream, runs: 4, max_tokens: 4}", "0.2s", 20);
  auto code = sweep.run({"--out", sweep.out().string()});
  INFO(sweep.output());
  CHECK(code == 1);
  auto flaky = read_json(sweep.out() / "variants/flaky/result.json");
  CHECK(flaky["status"] == "failed");
  CHECK(flaky.value("reason", "").starts_with("bench single: "));
  CHECK(read_json(sweep.out() / "variants/good/result.json")["status"] == "ok");
  std::optional<json> finished;
  for (const auto& e : journal(sweep.out())) {
    if (e.value("event", "") == "run_finished") {
      finished = e;
    }
  }
  REQUIRE(finished);
  CHECK((*finished)["ok"] == 1);
  CHECK((*finished)["failed"] == 1);
  CHECK((*finished)["interrupted"] == false);
}

TEST_CASE("--fail-fast stops the sweep after a variant its failed requests failed") {
  Sweep sweep;
  // As above: 2 of flaky's 4 measured requests fail, which fails it when its result is written.
  sweep.write(R"(  - name: flaky
    knobs: {sim_fault: ["http-500:0.5"]}
  - name: never)",
              "  - {name: single, kind: single_stream, runs: 4, max_tokens: 4}", "0.2s", 20);
  auto code = sweep.run({"--out", sweep.out().string(), "--fail-fast"});
  INFO(sweep.output());
  CHECK(code == 1);
  CHECK(read_json(sweep.out() / "variants/flaky/result.json")["status"] == "failed");
  CHECK_FALSE(std::filesystem::exists(sweep.out() / "variants/never/result.json"));
  CHECK_FALSE(journal_has(sweep.out(), "variant_started", "never"));
}
