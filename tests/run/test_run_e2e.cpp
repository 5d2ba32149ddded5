// `specctl run` end to end, on this machine and over a test sshd: full sweeps,
// a crashing variant, SIGINT, kill -9 and --resume, a changed experiment.

#include "sweep.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <csignal>
#include <fmt/format.h>
#include <fstream>
#include <set>
#include <thread>

using namespace run_test;

namespace {

// The login shells a two-variant sweep over SSH may start: a few kept open per
// connection, and the commands that need a session of their own (uploads).
// Measured: 9 over libssh2, 10 over the system ssh; with a session per command
// the sweep did not finish within its time limit behind the 2 s ~/.bashrc.
constexpr long k_sweep_logins = 20;

} // namespace

TEST_CASE("a local sweep writes every file, keeps going past a crashing variant and reads accept length") {
  Sweep sweep;
  sweep.write(k_three_variants,
              std::string(k_quick_benchmarks) + fmt::format(R"(
  - name: client
    kind: command
    run: 'f=$(mktemp) && {} bench --url {{url}} --single-stream --runs 1 --max-tokens 8 --json "$f" >/dev/null && cat "$f"; rm -f "$f"'
    json: {{client_tok_s: single_stream.mean}})",
                                                            SPECCTL_BINARY),
              "2s", 10, R"(report:
  expect:
    - {variant: baseline, benchmark: single, metric: output_tok_s, value: 926, tolerance: 50%})");
  int code = sweep.run({"--out", sweep.out().string()});
  INFO(sweep.output());
  // The crashing variant makes the run's exit code 1; the others are complete.
  CHECK(code == 1);
  auto out = sweep.out();
  for (const char* file : {"run.json", "experiment.yaml", "experiment.json", "journal.jsonl", "provenance.json",
                           "report.md", "report.csv", "report.json", "report.html", "junit.xml"}) {
    CHECK_MESSAGE(std::filesystem::exists(out / file), file);
  }
  check_complete_variant(out, "baseline");
  check_complete_variant(out, "eagle3");

  auto baseline = read_json(out / "variants/baseline/result.json");
  auto eagle3 = read_json(out / "variants/eagle3/result.json");
  // specsim logs SGLang's decode lines: EAGLE-3 with 2 steps accepts about 1.97 tokens per step.
  CHECK(eagle3["benchmarks"]["single"]["metrics"]["accept_length"].get<double>() == doctest::Approx(1.97).epsilon(0.1));
  CHECK_FALSE(baseline["benchmarks"]["single"]["metrics"].contains("accept_length"));
  // The command benchmark ran specctl bench against the server and its JSON became a metric.
  CHECK(baseline["benchmarks"]["client"]["status"] == "ok");
  CHECK(baseline["benchmarks"]["client"]["metrics"]["client_tok_s"].get<double>() > 10);

  auto crashy = read_json(out / "variants/crashy/result.json");
  CHECK(crashy["status"] == "failed");
  CHECK(crashy["failure"]["phase"] == "load");
  CHECK(crashy["reason"].get<std::string>().find("load:") == 0);
  CHECK(crashy["failure"]["log_tail"].size() > 0);
  // A crash is deterministic: recorded once, never retried.
  CHECK(crashy["attempt"] == 1);
  CHECK_FALSE(journal_has(out, "variant_retry", "crashy"));
  CHECK(std::filesystem::exists(out / "variants/crashy/server.log"));

  auto provenance = read_json(out / "provenance.json");
  CHECK(provenance["specctl_version"].is_string());
  CHECK(provenance["hosts"]["local"]["gpu_count"].get<int>() > 0);
  CHECK(provenance["variants"]["eagle3"]["command"].get<std::string>().find("--speculative-algorithm") !=
        std::string::npos);
  CHECK(provenance["variants"]["eagle3"]["template"]["content_hash"].get<std::string>().size() > 0);

  auto report = st::read_file(out / "report.md");
  CHECK(report.find("| crashy   | failed") != std::string::npos);
  CHECK(report.find("| output_tok_s |      926 |") != std::string::npos);
  CHECK(st::read_file(out / "junit.xml").find("<testcase classname=\"e2e.variants\" name=\"crashy\"") !=
        std::string::npos);
  // The summary and the expectations also went to stdout.
  CHECK(sweep.output().find("| baseline | ok") != std::string::npos);
  CHECK(sweep.output().find("[met] baseline single output_tok_s") != std::string::npos);

  // `specctl report` makes the same files from the folder, byte for byte, and
  // says with its exit code that a variant failed.
  std::map<std::string, std::string> written;
  for (const char* file : {"report.md", "report.csv", "report.json", "report.html", "junit.xml"}) {
    written[file] = st::read_file(out / file);
    std::filesystem::remove(out / file);
  }
  auto again = st::run_command({SPECCTL_BINARY, "report", out.string(), "-o", (out / "printed.md").string()});
  CHECK(again.exit_code == 1);
  CHECK(st::read_file(out / "printed.md") == written["report.md"]);
  for (const auto& [file, content] : written) {
    CHECK_MESSAGE(st::read_file(out / file) == content, file);
  }
  auto csv = st::run_command({SPECCTL_BINARY, "report", out.string(), "--format", "csv"});
  CHECK(csv.exit_code == 1);
  CHECK(csv.out == written["report.csv"]);

  int finished = 0;
  for (const auto& e : journal(out)) {
    finished += e.value("event", "") == "variant_finished" ? 1 : 0;
  }
  CHECK(finished == 3);
  CHECK(tags_in(sweep.state()).size() == 3);
  CHECK(stray_servers(sweep.state()) == "");

  SUBCASE("the same folder is not run twice without --resume") {
    CHECK(sweep.run({"--out", out.string()}) == 2);
    CHECK(sweep.output().find("already holds a run") != std::string::npos);
  }
}

TEST_CASE("SIGINT during a load tears the server down and exits 130") {
  Sweep sweep;
  sweep.write("  - name: slow", k_quick_benchmarks, "10m", 1);
  auto specctl = sweep.start({"--out", sweep.out().string()});
  REQUIRE(st::wait_until([&] { return journal_has(sweep.out(), "phase_started", "slow", "load"); }, k_phase_timeout));
  REQUIRE(tags_in(sweep.state()).size() == 1);
  std::string tag = tags_in(sweep.state()).front();
  REQUIRE(st::wait_until([&] { return !live_tagged(tag).empty(); }, k_phase_timeout));
  specctl->signal(SIGINT);
  auto code = specctl->wait_exit_code(k_signal_exit_timeout);
  INFO(sweep.output());
  CHECK(code == 130);
  CHECK(live_tagged(tag).empty());
  auto result = read_json(sweep.out() / "variants/slow/result.json");
  CHECK(result["status"] == "interrupted");
  CHECK(journal_has(sweep.out(), "torn_down", "slow"));
  CHECK(sweep.output().find("--resume") != std::string::npos);
}

// kill -9 at a phase of the second variant, then --resume: the same result set
// as an uninterrupted run, and the server the killed run left is stopped.
void kill_and_resume(Sweep& sweep, const std::string& phase) {
  auto specctl = sweep.start({"--out", sweep.out().string()});
  REQUIRE(st::wait_until([&] { return journal_has(sweep.out(), "phase_started", "second", phase); }, k_sweep_timeout));
  specctl->signal(SIGKILL);
  REQUIRE(specctl->wait_exit_code(k_signal_exit_timeout) == 128 + SIGKILL);
  // The killed run's second server is still there, unattended.
  std::string left;
  for (const auto& e : journal(sweep.out())) {
    if (e.value("event", "") == "launched" && e.value("variant", "") == "second") {
      left = e.value("tag", "");
    }
  }
  REQUIRE_FALSE(left.empty());
  CHECK_FALSE(live_tagged(left).empty());

  int code = sweep.run({"--resume", sweep.out().string()});
  INFO(sweep.output());
  CHECK(code == 0);
  CHECK(live_tagged(left).empty());
  CHECK(stray_servers(sweep.state()) == "");
  CHECK(journal_has(sweep.out(), "variant_kept", "first"));
  CHECK(journal_has(sweep.out(), "torn_down", "second"));
  check_complete_variant(sweep.out(), "first");
  check_complete_variant(sweep.out(), "second");
  // One result per variant, nothing else.
  std::set<std::string> variants;
  for (const auto& entry : std::filesystem::directory_iterator(sweep.out() / "variants")) {
    variants.insert(entry.path().filename().string());
  }
  CHECK(variants == std::set<std::string>{"first", "second"});
  CHECK(sweep.output().find("| second  | ok") != std::string::npos);
}

TEST_CASE("kill -9 during a load, then --resume: complete results and no stray server") {
  Sweep sweep;
  sweep.write("  - name: first\n  - name: second", k_quick_benchmarks, "30s", 5);
  kill_and_resume(sweep, "load");
}

TEST_CASE("kill -9 during a benchmark, then --resume: complete results and no stray server") {
  Sweep sweep;
  // 512 tokens at about 460 tok/s: each request takes a second, so the kill lands mid-benchmark.
  // (Formatted, not appended: GCC 14 sees a string + a long literal as out of bounds.)
  sweep.write("  - name: first\n  - name: second", fmt::format("{}{}", k_quick_benchmarks, R"(
  - {name: long, kind: concurrency, repeats: 1, levels: [2], requests: 4, max_tokens: 512})"),
              "2s", 5);
  kill_and_resume(sweep, "bench long");
}

TEST_CASE("--resume refuses a changed experiment unless --force") {
  Sweep sweep;
  sweep.write("  - name: only", "  - {name: single, kind: single_stream, runs: 1, max_tokens: 8}", "1s", 10);
  REQUIRE(sweep.run({"--out", sweep.out().string()}) == 0);
  std::ofstream(sweep.file(), std::ios::app) << "# a later edit\n";
  CHECK(sweep.run({"--resume", sweep.out().string()}) == 2);
  CHECK(sweep.output().find("the experiment file changed since this run started") != std::string::npos);
  CHECK(sweep.run({"--resume", sweep.out().string(), "--force"}) == 0);
  CHECK(journal_has(sweep.out(), "variant_kept", "only"));
  CHECK(sweep.run({"--resume", (sweep.out() / "nothing").string()}) == 2);
}

TEST_CASE("a sweep over SSH: every file, accept length, the server log copied back") {
  auto sshd = specctl::test::require_sshd();
  // The node's ~/.bashrc takes 2 s, as `pyenv init` or `conda init` on a GPU node can: specctl's
  // commands run in a few shells kept open, so the sweep pays it a few times, not per command.
  const auto rc_count = sshd->session_home() / "rc-count";
  specctl::test::write_file(sshd->session_home() / ".bashrc", "echo x >> \"$HOME/rc-count\"; sleep 2\n");
  Sweep sweep(ssh_hosts(*sshd), "node");
  sweep.write(R"(  - name: baseline
  - name: eagle3
    knobs: {speculative: eagle3, draft_model: /models/Kimi-K2.5-EAGLE3, spec_steps: 2, spec_topk: 1, spec_draft_tokens: 3})",
              k_quick_benchmarks, "2s", 10);
  int code = sweep.run({"--out", sweep.out().string()});
  INFO(sweep.output());
  INFO(sshd->log());
  CHECK(code == 0);
  check_complete_variant(sweep.out(), "baseline");
  check_complete_variant(sweep.out(), "eagle3");
  auto eagle3 = read_json(sweep.out() / "variants/eagle3/result.json");
  CHECK(eagle3["host"] == "node");
  // Over either transport the benchmark client runs on the node, beside the server.
  for (const auto& [name, benchmark] : eagle3["benchmarks"].items()) {
    CAPTURE(name);
    CHECK(benchmark["client"]["ran_on"] == "host");
  }
  CHECK(eagle3["benchmarks"]["single"]["metrics"]["accept_length"].get<double>() == doctest::Approx(1.97).epsilon(0.1));
  auto provenance = read_json(sweep.out() / "provenance.json");
  CHECK(provenance["hosts"]["node"]["description"].get<std::string>().find("127.0.0.1") != std::string::npos);
  // The second pass ("run openssh: ...") went through the system ssh.
  CHECK((provenance["hosts"]["node"]["description"].get<std::string>().find("(openssh: ") != std::string::npos) ==
        !specctl::test::ssh_transport_yaml().empty());
  CHECK(stray_servers(sweep.state()) == "");
  const auto logins = std::ranges::count(specctl::test::read_file(rc_count), '\n');
  INFO("shell start-ups: ", logins);
  CHECK(logins <= k_sweep_logins);
}

TEST_CASE("kill -9 during a load over SSH, then --resume: the resumed run stops the left server") {
  auto sshd = specctl::test::require_sshd();
  Sweep sweep(ssh_hosts(*sshd), "node");
  sweep.write("  - name: first\n  - name: second", k_quick_benchmarks, "30s", 5);
  kill_and_resume(sweep, "load");
}

TEST_CASE("an unreachable host is retried with backoff, then recorded as unreachable") {
  int closed = st::free_port();
  Sweep sweep(fmt::format(R"(hosts:
  node: {{ssh: "nobody@127.0.0.1:{}", host_key: accept-new}})",
                          closed),
              "node");
  sweep.write("  - name: nowhere", "  - {name: single, kind: single_stream, runs: 1, max_tokens: 8}", "1s", 10);
  auto started = std::chrono::steady_clock::now();
  int code = sweep.run({"--out", sweep.out().string(), "--retries", "1"});
  auto took = std::chrono::steady_clock::now() - started;
  INFO(sweep.output());
  CHECK(code == 1);
  auto result = read_json(sweep.out() / "variants/nowhere/result.json");
  CHECK(result["status"] == "failed");
  CHECK(result["attempt"] == 2);
  CHECK(result["failure"]["phase"] == "connect");
  CHECK(result["failure"]["kind"] == "unreachable");
  CHECK(result["reason"].get<std::string>().find("Connection refused") != std::string::npos);
  CHECK(journal_has(sweep.out(), "variant_retry", "nowhere"));
  // The first retry waits 5 s.
  CHECK(took >= std::chrono::seconds{5});
}

TEST_CASE("--fail-fast stops the sweep at the first failed variant") {
  Sweep sweep;
  sweep.write("  - name: crashy\n    knobs: {sim_fault: [crash-load]}\n  - name: never",
              "  - {name: single, kind: single_stream, runs: 1, max_tokens: 8}", "1s", 10);
  int code = sweep.run({"--out", sweep.out().string(), "--fail-fast"});
  INFO(sweep.output());
  CHECK(code == 1);
  CHECK(read_json(sweep.out() / "variants/crashy/result.json")["status"] == "failed");
  CHECK_FALSE(std::filesystem::exists(sweep.out() / "variants/never/result.json"));
  CHECK_FALSE(journal_has(sweep.out(), "variant_started", "never"));
  CHECK(st::read_file(sweep.out() / "report.md").find("| never   | not run") != std::string::npos);
}

namespace {

// The requests of one phase ("single-stream", "concurrency 4") in a requests-*.jsonl.
std::vector<json> records_of(const std::filesystem::path& file, const std::string& phase) {
  std::vector<json> out;
  std::istringstream lines(st::read_file(file));
  std::string line;
  while (std::getline(lines, line)) {
    auto record = json::parse(line, nullptr, false);
    if (record.is_object() && record.value("phase", "") == phase) {
      out.push_back(record);
    }
  }
  return out;
}

// specsim's truth over the completed requests of a phase: tokens per verify pass.
double truth_accept_length(const json& truth, const std::vector<json>& records) {
  std::map<std::string, const json*> by_id;
  for (const auto& r : truth["requests"]) {
    by_id[r["id"].get<std::string>()] = &r;
  }
  double tokens = 0;
  double passes = 0;
  for (const auto& record : records) {
    if (!record.value("ok", false)) {
      continue;
    }
    auto it = by_id.find(record.value("id", ""));
    REQUIRE_MESSAGE(it != by_id.end(), "specsim has no truth for request " << record.value("id", ""));
    tokens += (*it->second)["spec_tokens"].get<double>();
    passes += (*it->second)["verify_passes"].get<double>();
  }
  REQUIRE(passes > 0);
  return tokens / passes;
}

struct Personality {
  const char* tmpl;
  const char* knobs;
  const char* speculative;
  // The source the template names first, and how close it comes to the truth over a window.
  const char* source;
  double tolerance;
};

} // namespace

TEST_CASE("a sweep per engine personality: accept length from the engine's own source equals specsim's truth") {
  // SGLang's Decode lines each cover an interval of decode steps that need not start or end
  // with the window: weighted by #running-req they come near the truth, not onto it. vLLM's
  // Prometheus counters and llama.cpp's per-request lines count exactly the window's requests.
  const Personality personalities[] = {
      {"specsim", "tp: 8, ",
       "{speculative: eagle3, draft_model: /models/Kimi-K2.5-EAGLE3, spec_steps: 2, spec_topk: 1, spec_draft_tokens: "
       "3}",
       "log", 0.05},
      {"specsim-vllm", "tp: 2, ", "{speculative: eagle3, draft_model: /models/Kimi-K2.5-EAGLE3, spec_steps: 3}",
       "prometheus", 1e-9},
      {"specsim-llamacpp", "", "{draft_model: /models/draft, spec_type: draft-simple, spec_draft_max: 4}", "log", 1e-9},
  };
  for (const auto& p : personalities) {
    const std::string name = p.tmpl;
    CAPTURE(name);
    Sweep sweep;
    sweep.personality(p.tmpl, p.knobs);
    const auto truth_file = sweep.out().parent_path() / "truth-spec.json";
    sweep.write(fmt::format("  - name: baseline\n  - name: spec\n    knobs: {}", p.speculative),
                fmt::format(R"(  - {{name: single, kind: single_stream, runs: 3, max_tokens: 64}}
  - {{name: parallel, kind: concurrency, repeats: 1, levels: [1, 4], requests: 8, max_tokens: 64}}
  - {{name: truth, kind: command, run: 'curl -fsS {{url}}/sim/truth -o {}-{{variant}}.json && echo saved 1', parse: 'saved (\d+)', metric: saved}})",
                            (sweep.out().parent_path() / "truth").string()),
                "1s", 10);
    int code = sweep.run({"--out", sweep.out().string()});
    INFO(sweep.output());
    REQUIRE(code == 0);
    auto out = sweep.out();
    auto spec = read_json(out / "variants/spec/result.json");
    auto truth = json::parse(st::read_file(truth_file));
    CHECK(truth["engine"] == (std::string(p.tmpl) == "specsim" ? "sglang" : std::string(p.tmpl).substr(8)));
    const std::pair<std::string, json> windows[] = {
        {"single-stream", spec["benchmarks"]["single"]},
        {"concurrency 1", spec["benchmarks"]["parallel"]["levels"][0]},
        {"concurrency 4", spec["benchmarks"]["parallel"]["levels"][1]},
    };
    for (const auto& [phase, holder] : windows) {
      CAPTURE(phase);
      const auto file =
          out / "variants/spec" / (phase == "single-stream" ? "requests-single.jsonl" : "requests-parallel.jsonl");
      const double expected = truth_accept_length(truth, records_of(file, phase));
      REQUIRE(holder["metrics"]["accept_length"].is_number());
      const double measured = holder["metrics"]["accept_length"].get<double>();
      CHECK(measured == doctest::Approx(expected).epsilon(p.tolerance));
      CHECK(holder["accept_length_source"]["kind"] == p.source);
      CHECK(holder["server_log_window"].size() == 2);
    }
    auto baseline = read_json(out / "variants/baseline/result.json");
    CHECK_FALSE(baseline["benchmarks"]["single"]["metrics"].contains("accept_length"));
    // One TERM at teardown: llama.cpp's "second interrupt" would say it was signalled twice.
    for (const char* variant : {"baseline", "spec"}) {
      auto log = st::read_file(out / "variants" / variant / "server.log");
      CHECK(log.find("Received second interrupt") == std::string::npos);
      CHECK(read_json(out / "variants" / variant / "result.json")["teardown"]["killed"].empty());
    }
    if (std::string(p.tmpl) == "specsim-llamacpp") {
      CHECK(st::read_file(out / "variants/spec/server.log").find("cleaning up before exit...") != std::string::npos);
    }
    CHECK(stray_servers(sweep.state()) == "");
  }
}

// vLLM's renamed flags (templates/vllm.yaml, `before` rules) are spelled for the version the
// host's version command prints: specsim playing vLLM, behind templates that answer 0.12.0 or
// nothing. The launched argv is the provenance's.
TEST_CASE("a sweep spells vLLM's flags for the version on the host, and says when it cannot read it") {
  const struct {
    const char* name;
    const char* version_command;
    json version;
    const char* fusion;
    const char* warning;
  } hosts[] = {
      {"vllm-012", R"([echo, "0.12.0"])", "0.12.0", R"({"pass_config":{"enable_fi_allreduce_fusion":true}})",
       "could not read the vllm-012 version"},
      {"vllm-unknown", "[\"false\"]", nullptr, R"({"pass_config":{"fuse_allreduce_rms":true}})",
       "could not read the vllm-unknown version on local (false): flags use the template's newest spelling"},
  };
  for (const auto& host : hosts) {
    INFO("template ", host.name);
    Sweep sweep;
    std::filesystem::create_directories(sweep.file().parent_path() / "templates");
    std::ofstream(sweep.file().parent_path() / "templates" / (std::string(host.name) + ".yaml"))
        << fmt::format("name: {}\nextends: specsim-vllm\nversion_command: {}\n", host.name, host.version_command);
    sweep.personality(host.name, "tp: 2, allreduce_fusion: true, cuda_graph_max_bs: 64, ");
    sweep.write("  - name: only", "  - {name: single, kind: single_stream, runs: 1, max_tokens: 16}", "1s", 10);
    int code = sweep.run({"--out", sweep.out().string()});
    INFO(sweep.output());
    REQUIRE(code == 0);
    // The warning is said for the host whose version was not read, and only for it.
    CHECK((sweep.output().find(host.warning) != std::string::npos) == (host.version == nullptr));
    auto variant = read_json(sweep.out() / "provenance.json")["variants"]["only"];
    CHECK(variant["engine_version"] == host.version);
    const auto argv = variant["argv"].get<std::vector<std::string>>();
    auto after = [&](const std::string& flag) {
      auto it = std::find(argv.begin(), argv.end(), flag);
      return it != argv.end() && it + 1 != argv.end() ? *(it + 1) : std::string("(absent)");
    };
    CHECK(after("--compilation-config") == host.fusion);
    CHECK(after("--max-cudagraph-capture-size") == "64");
  }
}

TEST_CASE("kill -9 of the server during a benchmark fails the variant at once, naming the death, keeping the levels") {
  Sweep sweep;
  sweep.write("  - name: victim",
              R"(  - {name: parallel, kind: concurrency, repeats: 1, levels: [2, 8], requests: 400, max_tokens: 256})",
              "1s", 1);
  auto run = sweep.start({"--out", sweep.out().string()});
  const auto out = sweep.out();
  // The second level is under way: the first one's figures must survive the death.
  int shell = 0;
  const auto deadline = std::chrono::steady_clock::now() + k_phase_timeout;
  while (std::chrono::steady_clock::now() < deadline && shell == 0) {
    for (const auto& e : journal(out)) {
      if (e.value("event", "") == "launched") {
        shell = e.value("pid", 0);
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  REQUIRE(shell > 0);
  REQUIRE(
      st::wait_until([&] { return journal_has(out, "phase_started", "victim", "bench parallel"); }, k_phase_timeout));
  std::this_thread::sleep_for(std::chrono::seconds(2));
  // The launched pid is the shell that waits for the server and writes its exit code: kill its child.
  std::istringstream children(st::read_file(fmt::format("/proc/{0}/task/{0}/children", shell)));
  int server_pid = 0;
  children >> server_pid;
  REQUIRE(server_pid > 0);
  REQUIRE(::kill(server_pid, SIGKILL) == 0);
  const auto killed_at = std::chrono::steady_clock::now();
  // Noticed at once (the watch polls every 500 ms): the teardown begins soon after the kill.
  REQUIRE(st::wait_until([&] { return journal_has(out, "phase_started", "victim", "teardown"); }, k_phase_timeout));
  const auto noticed = std::chrono::steady_clock::now() - killed_at;
  MESSAGE("the death was noticed after " << std::chrono::duration<double>(noticed).count() << " s");
  CHECK(noticed < std::chrono::seconds(10));
  auto code = run->wait_exit_code(k_sweep_timeout);
  INFO(sweep.output());
  CHECK(code == 1);
  auto result = read_json(out / "variants/victim/result.json");
  CHECK(result["status"] == "failed");
  const std::string reason = result["reason"];
  CHECK(reason.find("the server died during bench parallel at c") != std::string::npos);
  CHECK(reason.find("exit code 137") != std::string::npos);
  CHECK(result["failure"]["log_tail"].size() > 0);
  auto parallel = result["benchmarks"]["parallel"];
  CHECK(parallel["status"] == "failed");
  CHECK(parallel["server_died"]["exit_code"] == 137);
  REQUIRE(parallel["levels"].size() >= 1);
  // The level was stopped, not run to its end against a closed port.
  CHECK(parallel["levels"].back()["result"]["requests"].get<int>() < 400);
  CHECK(stray_servers(sweep.state()) == "");
}
