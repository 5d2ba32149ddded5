// `specctl run` where things go wrong around it: another run on the same machine,
// a full disk, a Ctrl-C or kill -9 in the teardown, a damaged result file, names
// that are paths, a matrix far too large.

#include "../support/skip.hpp"
#include "sweep.hpp"

#include <doctest/doctest.h>

#include <csignal>
#include <fmt/ranges.h>
#include <fstream>
#include <set>
#include <thread>
#include <unistd.h>

using namespace run_test;

namespace {

int count_events(const std::filesystem::path& out, const std::string& event, const std::string& variant) {
  int n = 0;
  for (const auto& e : journal(out)) {
    n += e.value("event", "") == event && e.value("variant", "") == variant ? 1 : 0;
  }
  return n;
}

constexpr const char* k_two_variants = R"(  - name: baseline
  - name: eagle3
    knobs: {speculative: eagle3, draft_model: /models/Kimi-K2.5-EAGLE3, spec_steps: 2, spec_topk: 1, spec_draft_tokens: 3})";

} // namespace

TEST_CASE("two runs on one machine at once: neither touches the other's server") {
  Sweep first;
  Sweep second;
  second.share_host_with(first);
  first.write(k_two_variants, k_quick_benchmarks, "3s", 10);
  second.write(k_two_variants, k_quick_benchmarks, "3s", 10);
  auto a = first.start({"--out", first.out().string()});
  // The second run starts while the first one's server loads.
  REQUIRE(st::wait_until([&] { return journal_has(first.out(), "launched", "baseline"); }, k_phase_timeout));
  int b = second.run({"--out", second.out().string()});
  auto a_code = a->wait_exit_code(k_sweep_timeout);
  std::string cleanups;
  for (const auto* sweep : {&first, &second}) {
    for (const auto& e : journal(sweep->out())) {
      if (e.value("phase", "") == "cleanup" || e.value("event", "") == "launched" ||
          e.value("event", "") == "torn_down") {
        cleanups += e.dump() + "\n";
      }
    }
  }
  INFO("cleanups: " << cleanups);
  INFO("first: " << first.output());
  INFO("second: " << second.output());
  CHECK(a_code == 0);
  CHECK(b == 0);
  for (const auto* sweep : {&first, &second}) {
    for (const char* variant : {"baseline", "eagle3"}) {
      auto result = read_json(sweep->out() / "variants" / variant / "result.json");
      CAPTURE(variant);
      CHECK_MESSAGE(result["status"] == "ok", result.value("reason", ""));
      for (const auto& action : result["cleanup"]["actions"]) {
        // Each run stops only its own servers (there are none left over here).
        CHECK_MESSAGE(action.get<std::string>().find("stopped") == std::string::npos, action);
        CHECK_MESSAGE(action.get<std::string>().find("kill") == std::string::npos, action);
      }
    }
  }
  CHECK(stray_servers(first.state()) == "");
}

TEST_CASE("a live run's server on the same port: the second run fails at once naming it, or waits for it") {
  Sweep first;
  Sweep second;
  second.share_host_with(first);
  second.use_port(first.port());
  first.write("  - name: baseline", k_quick_benchmarks, "3s", 10);
  bool wait = false;
  SUBCASE("busy: fail (the default)") {}
  SUBCASE("busy: wait") {
    wait = true;
    second.cleanup("policy: kill, grace: 3s, timeout: 2m, busy: wait");
  }
  second.write("  - name: baseline", k_quick_benchmarks, "1s", 10);
  auto a = first.start({"--out", first.out().string()});
  REQUIRE(st::wait_until([&] { return journal_has(first.out(), "launched", "baseline"); }, k_phase_timeout));
  int b = second.run({"--out", second.out().string(), "--retries", "0"});
  auto a_code = a->wait_exit_code(k_sweep_timeout);
  INFO("first: " << first.output());
  INFO("second: " << second.output());
  CHECK(a_code == 0);
  CHECK(read_json(first.out() / "variants/baseline/result.json")["status"] == "ok");
  auto result = read_json(second.out() / "variants/baseline/result.json");
  if (wait) {
    CHECK(b == 0);
    CHECK(result["status"] == "ok");
    REQUIRE(result["cleanup"]["actions"].size() >= 1);
    CHECK(result["cleanup"]["actions"][0].get<std::string>().find("waited: local is busy: specctl run e2e (pid " +
                                                                  std::to_string(a->pid())) != std::string::npos);
  } else {
    CHECK(b == 1);
    CHECK(result["status"] == "failed");
    CHECK(result["failure"]["phase"] == "cleanup");
    std::string reason = result["reason"];
    CHECK(reason.find("local is busy: specctl run e2e (pid " + std::to_string(a->pid())) != std::string::npos);
    CHECK(reason.find(first.out().string() + ") holds port " + std::to_string(first.port())) != std::string::npos);
  }
  CHECK(stray_servers(first.state()) == "");
}

TEST_CASE("Ctrl-C during the teardown keeps the variant it measured: status ok, nothing measured again") {
  Sweep sweep;
  // A server that ignores TERM holds the teardown for its 3 s grace.
  sweep.write("  - name: stubborn\n    knobs: {sim_fault: [ignore-sigterm]}\n  - name: later", k_quick_benchmarks, "1s",
              10);
  auto specctl = sweep.start({"--out", sweep.out().string()});
  REQUIRE(st::wait_until([&] { return journal_has(sweep.out(), "phase_started", "stubborn", "teardown"); },
                         k_sweep_timeout));
  specctl->signal(SIGINT);
  CHECK(specctl->wait_exit_code(k_signal_exit_timeout) == 130);
  INFO(sweep.output());
  auto result = read_json(sweep.out() / "variants/stubborn/result.json");
  CHECK(result["status"] == "ok");
  CHECK(result["benchmarks"]["parallel"]["levels"].size() == 2);
  CHECK(stray_servers(sweep.state()) == "");
  // The resumed run keeps it and runs only what was left.
  int code = sweep.run({"--resume", sweep.out().string()});
  CHECK(code == 0);
  CHECK(journal_has(sweep.out(), "variant_kept", "stubborn"));
  CHECK(count_events(sweep.out(), "launching", "stubborn") == 1);
  check_complete_variant(sweep.out(), "later");
}

TEST_CASE("kill -9 during the teardown, then --resume: the measurement is kept, not taken again") {
  Sweep sweep;
  sweep.write("  - name: stubborn\n    knobs: {sim_fault: [ignore-sigterm]}", k_quick_benchmarks, "1s", 10);
  auto specctl = sweep.start({"--out", sweep.out().string()});
  REQUIRE(st::wait_until([&] { return journal_has(sweep.out(), "phase_started", "stubborn", "teardown"); },
                         k_sweep_timeout));
  specctl->signal(SIGKILL);
  REQUIRE(specctl->wait_exit_code(k_signal_exit_timeout) == 128 + SIGKILL);
  // On disk already: every benchmark, the variant marked as not finished.
  auto left = read_json(sweep.out() / "variants/stubborn/result.json");
  CHECK(left["status"] == "interrupted");
  CHECK(left["benchmarks"]["single"]["status"] == "ok");
  CHECK(left["benchmarks"]["parallel"]["status"] == "ok");
  int code = sweep.run({"--resume", sweep.out().string()});
  INFO(sweep.output());
  CHECK(code == 0);
  auto result = read_json(sweep.out() / "variants/stubborn/result.json");
  CHECK(result["status"] == "ok");
  CHECK(result["benchmarks"]["parallel"]["levels"][1]["metrics"]["output_tok_s"].get<double>() > 0);
  CHECK(journal_has(sweep.out(), "variant_kept", "stubborn"));
  CHECK(count_events(sweep.out(), "launching", "stubborn") == 1);
  CHECK(stray_servers(sweep.state()) == "");
}

TEST_CASE("kill -9 between benchmarks, then --resume: only the benchmark not measured runs again") {
  Sweep sweep;
  sweep.write("  - name: first", std::string(k_quick_benchmarks) + R"(
  - {name: long, kind: concurrency, repeats: 1, levels: [2], requests: 6, max_tokens: 512})",
              "1s", 5);
  auto specctl = sweep.start({"--out", sweep.out().string()});
  REQUIRE(st::wait_until([&] { return journal_has(sweep.out(), "phase_started", "first", "bench long"); },
                         k_sweep_timeout));
  specctl->signal(SIGKILL);
  REQUIRE(specctl->wait_exit_code(k_signal_exit_timeout) == 128 + SIGKILL);
  auto before = read_json(sweep.out() / "variants/first/result.json");
  REQUIRE(before["benchmarks"]["parallel"]["status"] == "ok");
  int code = sweep.run({"--resume", sweep.out().string()});
  INFO(sweep.output());
  CHECK(code == 0);
  auto result = read_json(sweep.out() / "variants/first/result.json");
  CHECK(result["status"] == "ok");
  // The levels measured before the kill, exactly.
  CHECK(result["benchmarks"]["parallel"] == before["benchmarks"]["parallel"]);
  CHECK(result["benchmarks"]["single"] == before["benchmarks"]["single"]);
  CHECK(result["benchmarks"]["long"]["status"] == "ok");
  CHECK(journal_has(sweep.out(), "benchmark_kept", "first"));
  bool flagged = false;
  for (const auto& flag : result["flags"]) {
    flagged = flagged || flag.get<std::string>().find("benchmark \"parallel\" was measured before the run was "
                                                      "resumed") != std::string::npos;
  }
  CHECK(flagged);
  CHECK(stray_servers(sweep.state()) == "");
}

TEST_CASE("a damaged result.json is reported as damaged, then moved aside and run again by --resume") {
  Sweep sweep;
  sweep.write("  - name: only", "  - {name: single, kind: single_stream, runs: 1, max_tokens: 8}", "1s", 10);
  REQUIRE(sweep.run({"--out", sweep.out().string()}) == 0);
  auto file = sweep.out() / "variants/only/result.json";
  auto text = st::read_file(file);
  std::filesystem::resize_file(file, text.size() / 2);
  auto report = st::run_command({SPECCTL_BINARY, "report", sweep.out().string(), "--format", "md"});
  INFO(report.out);
  CHECK(report.exit_code == 1);
  CHECK(report.out.find("| only    | damaged |") != std::string::npos);
  CHECK(report.out.find(fmt::format("{}: damaged at byte {} of {}: ", file.string(), text.size() / 2,
                                    text.size() / 2)) != std::string::npos);
  int code = sweep.run({"--resume", sweep.out().string()});
  INFO(sweep.output());
  CHECK(code == 0);
  CHECK(sweep.output().find("damaged at byte") != std::string::npos);
  CHECK(read_json(file)["status"] == "ok");
  int aside = 0;
  for (const auto& entry : std::filesystem::directory_iterator(file.parent_path())) {
    aside += entry.path().filename().string().starts_with("result.json.damaged-") ? 1 : 0;
  }
  CHECK(aside == 1);
  CHECK(journal_has(sweep.out(), "result_damaged", "only"));
}

TEST_CASE("names that are paths and matrices too large are refused before anything runs") {
  st::TempDir dir;
  auto write = [&](const std::string& name, const std::string& text) {
    auto path = dir.path() / name;
    std::ofstream(path) << text;
    return path.string();
  };
  const std::string server = "server: {template: specsim, model: /m, port: 31999}\n";
  for (const auto& [what, file] : std::vector<std::pair<std::string, std::string>>{
           {"variant", "name: ok\n" + server + "variants: [{name: ..}]\n"},
           {"benchmark",
            "name: ok\n" + server + "variants: [{name: a}]\nbenchmarks: [{name: ., kind: single_stream}]\n"},
           {"experiment", "name: ..\n" + server + "variants: [{name: a}]\n"}}) {
    CAPTURE(what);
    auto path = write(what + ".yaml", file);
    auto validated = st::run_command({SPECCTL_BINARY, "validate", path});
    CHECK(validated.exit_code == 2);
    CHECK(validated.out.find("not only dots") != std::string::npos);
    auto ran = st::run_command({SPECCTL_BINARY, "run", path, "--out", (dir.path() / ("out-" + what)).string()});
    CHECK(ran.exit_code == 2);
    CHECK_FALSE(std::filesystem::exists(dir.path() / ("out-" + what)));
  }
  // 30 x 10 = 300 points: more than 256.
  std::vector<std::string> loads;
  for (int s = 1; s <= 30; ++s) {
    loads.push_back(std::to_string(s) + "s");
  }
  auto large =
      write("large.yaml",
            "name: large\n" + server + "variants:\n  - name: v\n    matrix: {sim_load_time: [" +
                fmt::format("{}", fmt::join(loads, ", ")) +
                "], sim_speed: [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]}\nbenchmarks: [{name: single, kind: single_stream}]\n");
  for (const char* command : {"validate", "plan", "run"}) {
    CAPTURE(command);
    auto refused = st::run_command({SPECCTL_BINARY, command, large});
    CHECK(refused.exit_code == 2);
    CHECK(refused.out.find(large + ": the experiment expands to 300 variants, more than the 256") != std::string::npos);
    CHECK(refused.out.find("it would take at most ") != std::string::npos);
  }
  auto allowed = st::run_command({SPECCTL_BINARY, "validate", large, "--allow-large"});
  CHECK(allowed.exit_code == 0);
  CHECK(allowed.out.find("ok (300 variants") != std::string::npos);
}

namespace {

// One sweep with its result folder on a tmpfs of `size` bytes of its own (a mount
// namespace: nothing outside the test sees it), then --resume on the same full
// disk; the folder is copied out for the checks.
struct FullDiskRun {
  int code = -1;
  int resume_code = -1;
  std::string log;
  std::string resume_log;
  std::uint64_t used = 0;
  std::filesystem::path copy;
};

constexpr const char* k_full_disk_script = R"(mnt=$1; size=$2; copy=$3; shift 3
mount -t tmpfs -o "size=$size" specctl-full "$mnt" || exit 97
"$@" --out "$mnt/out" >"$copy.log" 2>&1; echo $? >"$copy.code"
"$@" --resume "$mnt/out" >"$copy.resume.log" 2>&1; echo $? >"$copy.resume.code"
df -B1 --output=used "$mnt" | tail -n 1 >"$copy.used"
cp -a "$mnt/out" "$copy" 2>/dev/null; exit 0)";

std::optional<FullDiskRun> run_on_disk(Sweep& sweep, const std::filesystem::path& work, std::uint64_t size,
                                       const std::string& name) {
  auto mnt = work / ("mnt-" + name);
  std::filesystem::create_directories(mnt);
  FullDiskRun run;
  run.copy = work / name;
  auto process = sweep.start({}, {"/usr/bin/unshare", "-rm", "/bin/sh", "-c", k_full_disk_script, "sh", mnt.string(),
                                  std::to_string(size), run.copy.string()});
  auto exit = process->wait_exit_code(k_sweep_timeout);
  if (exit != 0) {
    return std::nullopt;
  }
  auto number = [](const std::filesystem::path& p) {
    auto text = st::read_file(p);
    return text.empty() ? -1 : std::stoi(text);
  };
  run.code = number(run.copy.string() + ".code");
  run.resume_code = number(run.copy.string() + ".resume.code");
  run.log = st::read_file(run.copy.string() + ".log");
  run.resume_log = st::read_file(run.copy.string() + ".resume.log");
  auto used = st::read_file(run.copy.string() + ".used");
  run.used = used.empty() ? 0 : std::stoull(used);
  return run;
}

// The file a failed write names: "<path>: cannot write: No space left on device".
std::string failed_file(const std::string& log) {
  for (const char* what : {": cannot write: ", ": cannot create: ", ": cannot fsync: ", ": cannot open for appending: ",
                           ": cannot create folder: "}) {
    auto at = log.find(what);
    if (at != std::string::npos) {
      auto start = log.find_last_of(" \n", at);
      return std::filesystem::path(log.substr(start + 1, at - start - 1)).filename().string();
    }
  }
  return "";
}

} // namespace

TEST_CASE("a full disk at each point of a run: exit 1, one clear error, every result written stays readable") {
  st::TempDir work;
  Sweep sweep;
  sweep.write(k_two_variants, R"(  - {name: single, kind: single_stream, runs: 2, max_tokens: 32}
  - {name: parallel, kind: concurrency, repeats: 1, levels: [2], requests: 6, max_tokens: 32})",
              "1s", 10);
  // The whole run on a disk with room to spare: how much it writes.
  auto roomy = run_on_disk(sweep, work.path(), 64 << 20, "roomy");
  if (!roomy) {
    specctl::test::skip("cannot mount a tmpfs in a new user and mount namespace here (unshare -rm)");
    return;
  }
  INFO(roomy->log);
  REQUIRE(roomy->code == 0);
  REQUIRE(roomy->used > 0);
  std::set<std::string> failed_files;
  // From the first files of the run to its last report: each size fails a later write.
  for (double fraction : {0.01, 0.15, 0.35, 0.55, 0.9, 0.97}) {
    auto size = std::max<std::uint64_t>(4096, static_cast<std::uint64_t>(static_cast<double>(roomy->used) * fraction));
    CAPTURE(fraction);
    auto run = run_on_disk(sweep, work.path(), size, fmt::format("at-{}", static_cast<int>(fraction * 100)));
    REQUIRE(run);
    INFO(run->log);
    INFO(run->resume_log);
    for (const auto* log : {&run->log, &run->resume_log}) {
      CHECK(log->find("terminate called") == std::string::npos);
      CHECK(log->find("Aborted") == std::string::npos);
    }
    // tmpfs counts whole pages and the logs' and timings' lengths vary by a few bytes from
    // run to run, so the last sizes (a page or two short of the roomy run's) may turn out to
    // be enough: then the run must be whole. Every size short of 90% fills the disk.
    bool filled = run->log.find("No space left on device") != std::string::npos;
    if (!filled && fraction >= 0.9) {
      MESSAGE(fraction << ": the disk had room this time: exit " << run->code);
      CHECK(run->code == 0);
      CHECK(std::filesystem::exists(run->copy / "junit.xml"));
    } else {
      CHECK(filled);
      CHECK(run->code == 1);
      // The same full disk again: a clean failure, never a crash (with no run.json, nothing to resume: 2).
      if (std::filesystem::exists(run->copy / "run.json")) {
        CHECK((run->resume_code == 1 || run->resume_code == 0));
      } else {
        CHECK(run->resume_code == 2);
      }
      failed_files.insert(failed_file(run->log));
      MESSAGE(fraction << ": exit " << run->code << ", resume " << run->resume_code << ", failed "
                       << failed_file(run->log));
      if (run->log.find("the run stopped launching variants") != std::string::npos) {
        CHECK(run->log.find("it needs about ") != std::string::npos);
      }
    }
    // Every result.json there is whole: the old one or the new one, never torn.
    std::error_code ec;
    for (std::filesystem::recursive_directory_iterator it(run->copy, ec), end; !ec && it != end; it.increment(ec)) {
      if (it->path().filename() == "result.json") {
        auto result = json::parse(st::read_file(it->path()), nullptr, false);
        CHECK_MESSAGE(result.is_object(), it->path().string());
        CHECK(result.value("format", "") == "specctl-variant-result");
      }
    }
  }
  INFO("the writes that failed: " << fmt::format("{}", fmt::join(failed_files, ", ")));
  failed_files.erase("");
  CHECK(failed_files.size() >= 3);
  CHECK(stray_servers(sweep.state()) == "");
}
