// Runs that share a host, and the night: three runs started at the same instant on
// one port, a --resume of a folder whose run is alive, and SIGHUP (the terminal or
// the SSH session closed) in each phase.

#include "sweep.hpp"

using namespace run_test;

namespace {

// When each run's server was up: from its launch to the end of its teardown (journal times, ms).
struct Lifetime {
  std::string launched;
  std::string torn_down;
  std::string run;
};

std::optional<Lifetime> lifetime(const Sweep& sweep, const std::string& variant) {
  Lifetime life;
  life.run = sweep.out().string();
  for (const auto& e : journal(sweep.out())) {
    if (e.value("variant", "") != variant) {
      continue;
    }
    if (e.value("event", "") == "launched") {
      life.launched = e.value("t", "");
    } else if (e.value("event", "") == "phase_finished" && e.value("phase", "") == "teardown") {
      life.torn_down = e.value("t", "");
    }
  }
  if (life.launched.empty() || life.torn_down.empty()) {
    return std::nullopt;
  }
  return life;
}

} // namespace

TEST_CASE("three runs started at the same instant on one port: one server at a time, each measures its own") {
  struct Personality {
    const char* tmpl;
    const char* knobs;
  };
  // specsim's SGLang refuses a taken port (Errno 98); its vLLM binds with SO_REUSEPORT,
  // so without a claim all three would serve on the port at once.
  for (const auto& p : {Personality{"specsim", "tp: 8, "}, Personality{"specsim-vllm", "tp: 2, "}}) {
    CAPTURE(p.tmpl);
    Sweep first;
    Sweep second;
    Sweep third;
    std::vector<Sweep*> sweeps{&first, &second, &third};
    for (auto* sweep : sweeps) {
      if (sweep != &first) {
        sweep->share_host_with(first);
        sweep->use_port(first.port());
      }
      sweep->personality(p.tmpl, p.knobs);
      sweep->cleanup("policy: kill, grace: 3s, timeout: 2m, busy: wait");
      sweep->write("  - name: baseline", "  - {name: single, kind: single_stream, runs: 2, max_tokens: 32}", "1s", 10);
    }
    std::vector<std::unique_ptr<st::Process>> runs;
    for (auto* sweep : sweeps) {
      runs.push_back(sweep->start({"--out", sweep->out().string(), "--retries", "0"}));
    }
    std::vector<Lifetime> lives;
    for (std::size_t k = 0; k < sweeps.size(); ++k) {
      auto code = runs[k]->wait_exit_code(k_sweep_timeout);
      INFO("run " << k << ": " << sweeps[k]->output());
      CHECK(code == 0);
      auto result = read_json(sweeps[k]->out() / "variants/baseline/result.json");
      CHECK_MESSAGE(result["status"] == "ok", result.value("reason", ""));
      for (const auto& action : result["cleanup"]["actions"]) {
        // Waiting is the only thing a run does about another's server.
        CHECK_MESSAGE(action.get<std::string>().starts_with("waited: local is busy: specctl run e2e (pid "), action);
      }
      auto life = lifetime(*sweeps[k], "baseline");
      REQUIRE(life);
      lives.push_back(*life);
    }
    std::sort(lives.begin(), lives.end(), [](const auto& a, const auto& b) { return a.launched < b.launched; });
    for (std::size_t k = 1; k < lives.size(); ++k) {
      INFO(lives[k - 1].run << " up " << lives[k - 1].launched << " to " << lives[k - 1].torn_down << "; "
                            << lives[k].run << " launched " << lives[k].launched);
      CHECK(lives[k - 1].torn_down <= lives[k].launched);
    }
    CHECK(stray_servers(first.state()) == "");
  }
}

TEST_CASE("--resume of a folder whose run is alive is refused, naming the run, and resumes once it is gone") {
  Sweep sweep;
  sweep.write("  - name: slow\n  - name: later", k_quick_benchmarks, "10m", 1);
  auto specctl = sweep.start({"--out", sweep.out().string()});
  REQUIRE(st::wait_until([&] { return journal_has(sweep.out(), "phase_started", "slow", "load"); }, k_phase_timeout));
  for (const auto& args : {std::vector<std::string>{"--resume", sweep.out().string()},
                           std::vector<std::string>{"--out", sweep.out().string()}}) {
    CAPTURE(args.front());
    int code = sweep.run(args);
    INFO(sweep.output());
    CHECK(code == 2);
    CHECK(sweep.output().find(fmt::format("{}: another specctl is writing this folder: specctl run e2e (pid {} on ",
                                          sweep.out().string(), specctl->pid())) != std::string::npos);
    // The live run's server was not touched: the second process stopped before any cleanup.
    CHECK(specctl->running());
  }
  CHECK(journal_has(sweep.out(), "phase_started", "slow", "load"));
  int finished = 0;
  for (const auto& e : journal(sweep.out())) {
    finished += e.value("event", "") == "run_finished" ? 1 : 0;
  }
  CHECK(finished == 0);
  specctl->signal(SIGKILL);
  REQUIRE(specctl->wait_exit_code(k_signal_exit_timeout) == 128 + SIGKILL);
  // Its process gone, the folder is free: the resume stops the server it left and goes on.
  sweep.write("  - name: slow\n  - name: later", k_quick_benchmarks, "1s", 10);
  int code = sweep.run({"--resume", sweep.out().string(), "--force"});
  INFO(sweep.output());
  CHECK(code == 0);
  CHECK(stray_servers(sweep.state()) == "");
}

TEST_CASE("SIGHUP (the terminal closed) in the load, a benchmark or the teardown: servers torn down, table, exit 129") {
  struct Moment {
    const char* phase;
    const char* variant;
  };
  for (const auto& moment :
       {Moment{"load", "slow-load"}, Moment{"bench long", "bench"}, Moment{"teardown", "stubborn"}}) {
    CAPTURE(moment.phase);
    Sweep sweep;
    std::string variant = moment.variant;
    if (variant == "slow-load") {
      sweep.write("  - name: slow-load\n  - name: never", k_quick_benchmarks, "10m", 1);
    } else {
      // A server that ignores TERM holds the teardown for its 3 s grace.
      sweep.write(fmt::format("  - name: {}\n    knobs: {{sim_fault: [ignore-sigterm]}}\n  - name: never", variant),
                  "  - {name: long, kind: concurrency, levels: [2], requests: 400, max_tokens: 256, repeats: 1}", "1s",
                  10);
    }
    auto specctl = sweep.start({"--out", sweep.out().string()});
    REQUIRE(st::wait_until([&] { return journal_has(sweep.out(), "phase_started", variant, moment.phase); },
                           k_sweep_timeout));
    // The terminal's hangup reaches the whole foreground process group.
    ::kill(-specctl->pid(), SIGHUP);
    auto code = specctl->wait_exit_code(k_signal_exit_timeout);
    INFO(sweep.output());
    CHECK(code == 129);
    CHECK(stray_servers(sweep.state()) == "");
    CHECK(journal_has(sweep.out(), "torn_down", variant));
    CHECK_FALSE(journal_has(sweep.out(), "launched", "never"));
    bool said = false;
    for (const auto& e : journal(sweep.out())) {
      if (e.value("event", "") == "run_finished") {
        said = e.value("interrupted", false) &&
               e.value("stopped_by", "").starts_with("SIGHUP: the terminal or SSH session that ran specctl closed");
      }
    }
    CHECK(said);
    CHECK(sweep.output().find("| " + variant) != std::string::npos);
    CHECK(sweep.output().find("interrupted by SIGHUP") != std::string::npos);
    CHECK(sweep.output().find("--resume " + sweep.out().string()) != std::string::npos);
    auto result = read_json(sweep.out() / "variants" / variant / "result.json");
    if (std::string(moment.phase) == "teardown") {
      // Measured to its end before the hangup: kept.
      CHECK(result["status"] == "ok");
    } else {
      CHECK(result["status"] == "interrupted");
    }
  }
}
