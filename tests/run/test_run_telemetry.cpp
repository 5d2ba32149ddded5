// GPU telemetry end to end: specctl samples specsim's nvidia-smi through every
// window of a sweep, writes telemetry.csv and each level's figures, copes with an
// old driver and with no nvidia-smi at all, and leaves no sampler running after a
// sweep, Ctrl-C, or kill -9 and --resume.

#include "sweep.hpp"

#include <specctl/remote/local_host.hpp>
#include <specctl/run/telemetry.hpp>

using namespace run_test;

namespace {

// Live samplers on this test's fake GPUs: nvidia-smi loops (`-lms`) whose environment
// names the GPU folder. Another test's samplers have their own folder.
std::vector<int> live_samplers(const std::filesystem::path& gpus) {
  std::vector<int> pids;
  const std::string needle = "SPECSIM_GPU_DIR=" + gpus.string();
  std::error_code ec;
  for (std::filesystem::directory_iterator it("/proc", ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) {
      continue;
    }
    std::string cmdline = st::read_file(it->path() / "cmdline");
    std::replace(cmdline.begin(), cmdline.end(), '\0', ' ');
    if (cmdline.find("nvidia-smi") == std::string::npos || cmdline.find("-lms") == std::string::npos) {
      continue;
    }
    std::string stat = st::read_file(it->path() / "stat");
    auto close = stat.rfind(')');
    if (close != std::string::npos && close + 2 < stat.size() && stat[close + 2] == 'Z') {
      continue;
    }
    std::string environ = st::read_file(it->path() / "environ");
    std::replace(environ.begin(), environ.end(), '\0', '\n');
    if (("\n" + environ).find("\n" + needle + "\n") != std::string::npos) {
      pids.push_back(std::stoi(name));
    }
  }
  return pids;
}

// The (benchmark, level, repeat) labels of telemetry.csv, in order of first appearance, with their row counts.
std::vector<std::pair<std::string, int>> csv_labels(const std::filesystem::path& csv) {
  std::vector<std::pair<std::string, int>> labels;
  std::istringstream lines(st::read_file(csv));
  std::string line;
  std::getline(lines, line);
  CHECK(line + "\n" == specctl::run::k_telemetry_csv_header);
  while (std::getline(lines, line)) {
    std::string label;
    int commas = 0;
    for (char c : line) {
      if (c == ',' && ++commas == 3) {
        break;
      }
      label += c;
    }
    if (labels.empty() || labels.back().first != label) {
      labels.emplace_back(label, 0);
    }
    ++labels.back().second;
  }
  return labels;
}

constexpr const char* k_telemetry_benchmarks = R"(  - {name: single, kind: single_stream, runs: 2, max_tokens: 128}
  - {name: parallel, kind: concurrency, levels: [1, 16], repeats: 1, requests: 16, max_tokens: 128})";

} // namespace

TEST_CASE("telemetry: every window of a sweep is sampled: tok/J per level, telemetry.csv by level, no sampler left") {
  Sweep sweep;
  sweep.write(R"(  - name: baseline
  - name: eagle3
    knobs: {speculative: eagle3, draft_model: /models/Kimi-K2.5-EAGLE3, spec_steps: 2, spec_topk: 1, spec_draft_tokens: 3})",
              k_telemetry_benchmarks, "2s", 5);
  int code = sweep.run({"--out", sweep.out().string()});
  INFO(sweep.output());
  REQUIRE(code == 0);
  for (const std::string variant : {"baseline", "eagle3"}) {
    INFO("variant " << variant);
    auto result = read_json(sweep.out() / "variants" / variant / "result.json");
    const auto& telemetry = result["telemetry"];
    CHECK(telemetry["energy_counter"] == true);
    CHECK(telemetry["throttle_field"] == specctl::run::k_event_reasons_field);
    CHECK(telemetry["warnings"].empty());
    // The load: eight GPUs (tp 8), each holding the model's share.
    REQUIRE(telemetry["load"]["memory_peak_mib"].size() == 8);
    CHECK(telemetry["load"]["memory_peak_mib"][0].get<double>() > 0);
    std::vector<const json*> windows{&result["benchmarks"]["single"]};
    for (const auto& level : result["benchmarks"]["parallel"]["levels"]) {
      windows.push_back(&level);
    }
    REQUIRE(windows.size() == 3);
    for (const auto* window : windows) {
      const auto& t = (*window)["telemetry"];
      REQUIRE(t.is_object());
      CHECK(t["gpus"].size() == 8);
      CHECK(t["samples"].get<int>() >= 1);
      CHECK(t["energy_source"] == "counter");
      CHECK(t["tok_per_j"].get<double>() > 0);
      CHECK((*window)["metrics"]["tok_per_j"] == t["tok_per_j"]);
      CHECK((*window)["metrics"]["power_w"] == t["power_w"]["mean"]);
      // Busy GPUs draw more than their idle floor and less than their limit.
      CHECK(t["power_w"]["mean"].get<double>() > 8 * 75.0);
      CHECK(t["power_w"]["mean"].get<double>() <= t["power_w"]["limit"].get<double>());
      CHECK(t["throttled"].empty());
    }
    const auto labels = csv_labels(sweep.out() / "variants" / variant / "telemetry.csv");
    std::vector<std::string> names;
    for (const auto& [label, rows] : labels) {
      names.push_back(label);
      CHECK(rows % 8 == 0);
    }
    CHECK(names == std::vector<std::string>{",load,1", "single,single,1", "parallel,c1,1", "parallel,c16,1"});
  }
  CHECK(live_samplers(sweep.gpus()).empty());
  CHECK(stray_servers(sweep.state()) == "");
}

TEST_CASE("telemetry: an old driver's field names are used, and a host without nvidia-smi runs the sweep and says so") {
  SUBCASE("driver 525: clocks_throttle_reasons.active") {
    Sweep sweep;
    std::ofstream(sweep.gpus() / "config") << "driver_version=525.147.05\n";
    sweep.write("  - name: old", k_quick_benchmarks, "1s", 5);
    int code = sweep.run({"--out", sweep.out().string()});
    INFO(sweep.output());
    REQUIRE(code == 0);
    auto result = read_json(sweep.out() / "variants/old/result.json");
    CHECK(result["telemetry"]["throttle_field"] == specctl::run::k_throttle_reasons_field);
    CHECK(result["telemetry"]["warnings"].empty());
    for (const auto& level : result["benchmarks"]["parallel"]["levels"]) {
      CHECK(level["telemetry"]["throttle"].is_object());
      CHECK(level["telemetry"]["tok_per_j"].get<double>() > 0);
    }
  }
  SUBCASE("no nvidia-smi") {
    Sweep sweep;
    std::filesystem::create_directories(sweep.file().parent_path() / "templates");
    std::ofstream(sweep.file().parent_path() / "templates" / "nosmi.yaml")
        << "name: nosmi\nextends: specsim\ntelemetry_command: [specctl-test-no-such-nvidia-smi]\n";
    sweep.personality("nosmi", "tp: 8, ");
    sweep.write("  - name: blind", k_quick_benchmarks, "1s", 5);
    int code = sweep.run({"--out", sweep.out().string()});
    INFO(sweep.output());
    REQUIRE(code == 0);
    auto result = read_json(sweep.out() / "variants/blind/result.json");
    CHECK(result["status"] == "ok");
    REQUIRE(result["telemetry"]["warnings"].size() == 1);
    CHECK(result["telemetry"]["warnings"][0].get<std::string>().find(
              "specctl-test-no-such-nvidia-smi not found: no GPU telemetry") != std::string::npos);
    CHECK(sweep.output().find("no GPU telemetry") != std::string::npos);
    for (const auto& level : result["benchmarks"]["parallel"]["levels"]) {
      CHECK_FALSE(level.contains("telemetry"));
      CHECK(level["metrics"]["output_tok_s"].get<double>() > 0);
    }
    CHECK_FALSE(std::filesystem::exists(sweep.out() / "variants/blind/telemetry.csv"));
  }
}

TEST_CASE("telemetry: Ctrl-C, and kill -9 then --resume, during a sampled level leave no nvidia-smi running") {
  const std::string long_level = R"(  - {name: long, kind: concurrency, repeats: 1, levels: [2], requests: 8, max_tokens: 1024})";
  SUBCASE("Ctrl-C") {
    Sweep sweep;
    sweep.write("  - name: first", long_level, "1s", 2);
    auto specctl = sweep.start({"--out", sweep.out().string()});
    REQUIRE(st::wait_until([&] { return !live_samplers(sweep.gpus()).empty() &&
                                        journal_has(sweep.out(), "phase_started", "first", "bench long"); },
                           k_sweep_timeout));
    specctl->signal(SIGINT);
    REQUIRE(specctl->wait_exit_code(k_signal_exit_timeout) == 130);
    INFO(sweep.output());
    CHECK(live_samplers(sweep.gpus()).empty());
    CHECK(stray_servers(sweep.state()) == "");
  }
  SUBCASE("kill -9, then --resume") {
    Sweep sweep;
    sweep.write("  - name: first", long_level, "1s", 2);
    auto specctl = sweep.start({"--out", sweep.out().string()});
    REQUIRE(st::wait_until([&] { return !live_samplers(sweep.gpus()).empty() &&
                                        journal_has(sweep.out(), "phase_started", "first", "bench long"); },
                           k_sweep_timeout));
    specctl->signal(SIGKILL);
    REQUIRE(specctl->wait_exit_code(k_signal_exit_timeout) == 128 + SIGKILL);
    // Killed with specctl's host connection: the sampler runs on, as the server does.
    CHECK_FALSE(live_samplers(sweep.gpus()).empty());
    int code = sweep.run({"--resume", sweep.out().string()});
    INFO(sweep.output());
    CHECK(code == 0);
    CHECK(live_samplers(sweep.gpus()).empty());
    CHECK(stray_servers(sweep.state()) == "");
    auto result = read_json(sweep.out() / "variants/first/result.json");
    CHECK(result["benchmarks"]["long"]["levels"][0]["telemetry"]["tok_per_j"].get<double>() > 0);
  }
}
