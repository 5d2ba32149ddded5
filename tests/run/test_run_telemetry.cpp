// GPU telemetry end to end: specctl samples specsim's nvidia-smi through every
// window of a sweep, writes telemetry.csv and each level's figures, copes with an
// old driver and with no nvidia-smi at all, and leaves no sampler running after a
// sweep, Ctrl-C, or kill -9 and --resume.

#include "sweep.hpp"

#include <specctl/remote/local_host.hpp>
#include <specctl/run/telemetry.hpp>

#include <atomic>
#include <cstdlib>
#include <future>

using namespace run_test;

namespace {

// Live samplers on this test's fake GPUs: nvidia-smi loops (`-lms`) or dcgmi dmon (and
// the bash that stamps its lines) whose environment
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
    const bool smi_loop = cmdline.find("nvidia-smi") != std::string::npos && cmdline.find("-lms") != std::string::npos;
    const bool dmon = cmdline.find("dcgmi") != std::string::npos && cmdline.find("dmon") != std::string::npos;
    if (!smi_loop && !dmon) {
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

// A window's energy comes from the GPUs' energy counter when the window holds two
// samples or more, and from its one power reading when a loaded machine sampled it only
// once (level_telemetry). Returns whether the counter gave it.
bool check_energy_source(const json& t) {
  const bool counter = t["samples"].get<int>() >= 2;
  CHECK(t["energy_source"] == (counter ? "counter" : "integrated power"));
  return counter;
}

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
    // A load of 2 s has one sample of its own and the reading taken once ready: the
    // weights and the KV cache, most of the GPU under SGLang's memory fraction.
    CHECK(telemetry["load"]["samples"].get<int>() >= 2);
    CHECK(telemetry["load"]["memory_peak_mib"][0].get<double>() >
          0.5 * telemetry["load"]["memory_total_mib"].get<double>());
    std::vector<const json*> windows{&result["benchmarks"]["single"]};
    for (const auto& level : result["benchmarks"]["parallel"]["levels"]) {
      windows.push_back(&level);
    }
    REQUIRE(windows.size() == 3);
    int counter_windows = 0;
    for (const auto* window : windows) {
      const auto& t = (*window)["telemetry"];
      REQUIRE(t.is_object());
      CHECK(t["gpus"].size() == 8);
      CHECK(t["samples"].get<int>() >= 1);
      counter_windows += check_energy_source(t) ? 1 : 0;
      CHECK(t["tok_per_j"].get<double>() > 0);
      CHECK((*window)["metrics"]["tok_per_j"] == t["tok_per_j"]);
      CHECK((*window)["metrics"]["power_w"] == t["power_w"]["mean"]);
      // Busy GPUs draw more than their idle floor and less than their limit.
      CHECK(t["power_w"]["mean"].get<double>() > 8 * 75.0);
      CHECK(t["power_w"]["mean"].get<double>() <= t["power_w"]["limit"].get<double>());
      CHECK(t["throttled"].empty());
    }
    // The one-stream level (16 requests in turn) runs longest: several samples, whatever the load.
    CHECK(counter_windows >= 1);
    const auto labels = csv_labels(sweep.out() / "variants" / variant / "telemetry.csv");
    std::vector<std::string> names;
    for (const auto& [label, rows] : labels) {
      names.push_back(label);
      CHECK(rows % 8 == 0);
    }
    CHECK(names == std::vector<std::string>{",load,1", "single,single,1", "parallel,c1,1", "parallel,c16,1"});
  }
  // specsim's model: at 16 streams EAGLE-3's verify passes cost more power than its
  // accepted tokens repay (fewer tok/s, more W), so the baseline makes more tokens a joule.
  auto c16_tok_per_j = [&](const std::string& variant) {
    auto result = read_json(sweep.out() / "variants" / variant / "result.json");
    return result["benchmarks"]["parallel"]["levels"][1]["telemetry"]["tok_per_j"].get<double>();
  };
  CHECK(c16_tok_per_j("baseline") > 1.3 * c16_tok_per_j("eagle3"));
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
  const std::string long_level =
      R"(  - {name: long, kind: concurrency, repeats: 1, levels: [2], requests: 8, max_tokens: 1024})";
  SUBCASE("Ctrl-C") {
    Sweep sweep;
    sweep.write("  - name: first", long_level, "1s", 2);
    auto specctl = sweep.start({"--out", sweep.out().string()});
    REQUIRE(st::wait_until(
        [&] {
          return !live_samplers(sweep.gpus()).empty() &&
                 journal_has(sweep.out(), "phase_started", "first", "bench long");
        },
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
    REQUIRE(st::wait_until(
        [&] {
          return !live_samplers(sweep.gpus()).empty() &&
                 journal_has(sweep.out(), "phase_started", "first", "bench long");
        },
        k_sweep_timeout));
    specctl->signal(SIGKILL);
    REQUIRE(specctl->wait_exit_code(k_signal_exit_timeout) == 128 + SIGKILL);
    // Killed with specctl's host connection: the sampler runs on, as the server does.
    CHECK_FALSE(live_samplers(sweep.gpus()).empty());
    int code = sweep.run({"--resume", sweep.out().string()});
    INFO(sweep.output());
    CHECK(code == 0);
    CHECK(live_samplers(sweep.gpus()).empty());
    // Stopped as the sampler it is, not warned of as a server's runaway worker.
    CHECK(sweep.output().find("left the server's process group") == std::string::npos);
    CHECK(stray_servers(sweep.state()) == "");
    auto result = read_json(sweep.out() / "variants/first/result.json");
    CHECK(result["benchmarks"]["long"]["levels"][0]["telemetry"]["tok_per_j"].get<double>() > 0);
  }
}

namespace {

nlohmann::json sim_truth(st::Server& server) {
  const auto answer = st::http_get(server.url("/sim/truth"));
  REQUIRE(answer.status == 200);
  return nlohmann::json::parse(answer.body);
}

// The GPUs' summed energy counter (mJ) and its instant (unix ms) by specsim's truth.
std::pair<double, std::int64_t> truth_energy(st::Server& server) {
  const auto truth = sim_truth(server);
  double sum = 0.0;
  for (const auto& gpu : truth["energy"]["gpus"]) {
    sum += gpu["energy_mj"].get<double>();
  }
  return {sum, truth["energy"]["at_unix_ms"].get<std::int64_t>()};
}

} // namespace

// What the report's tok/J stands on: the energy specctl's sampler measures over a
// window (the counter's difference scaled to the window) against the exact energy
// specsim's model spent in it, under a steady batch of 32 streams on 2 GPUs.
TEST_CASE("telemetry: a window's energy as specctl measures it is specsim's own truth within 5%") {
  st::Server server({"--tp-size", "2", "--sim-speed", "4"});
  REQUIRE(server.wait_ready());
  // The sampler runs `specsim nvidia-smi` through a shell on this machine, which
  // finds the server's fake GPUs by this variable, as a sweep's does.
  REQUIRE(::setenv("SPECSIM_GPU_DIR", server.gpus().path().c_str(), 1) == 0);
  specctl::remote::LocalHost host;
  const std::vector<int> gpus{0, 1};
  auto probe = specctl::run::probe_telemetry(host, {st::specsim_binary(), "nvidia-smi"}, gpus);
  REQUIRE(probe.has_value());
  REQUIRE(probe->available);
  REQUIRE(probe->energy_counter);

  std::atomic<bool> load_done{false};
  auto load = std::async(std::launch::async, [&] {
    auto results = st::stream_post_many(server.url("/v1/completions"),
                                        std::vector<std::string>(32, st::completion_body(600, st::Stream::yes)),
                                        std::chrono::seconds(120));
    load_done = true;
    return results;
  });
  // Steady: every stream decoding (75 + 625 x (0.35 + 0.6 x 32/80) = 443.75 W a GPU).
  REQUIRE(st::wait_until(
      [&] {
        const auto truth = sim_truth(server);
        return truth["energy"]["gpus"][0]["power_w"].get<double>() > 0.95 * 443.75;
      },
      std::chrono::seconds(30)));

  st::TempDir dir("telemetry-truth");
  specctl::run::TelemetrySampler sampler(*probe, gpus, dir.path().string(), "specctl-test-truth");
  REQUIRE(sampler.start(host, 500).has_value());
  const auto [before_mj, t0] = truth_energy(server);
  std::this_thread::sleep_for(std::chrono::seconds(4));
  const auto [after_mj, t1] = truth_energy(server);
  auto samples = sampler.stop(host);
  REQUIRE(samples.has_value());
  // The window lay inside the steady load.
  CHECK_FALSE(load_done.load());
  INFO(samples->size() << " samples");
  REQUIRE(samples->size() >= 8);

  const double seconds = static_cast<double>(t1 - t0) / 1000.0;
  const auto figures = specctl::run::level_telemetry(*samples, seconds, 1000);
  REQUIRE(figures.is_object());
  CHECK(figures["energy_source"] == "counter");
  const double truth_j = (after_mj - before_mj) / 1000.0;
  INFO("measured " << figures["energy_j"].get<double>() << " J, truth " << truth_j << " J over " << seconds << " s");
  CHECK(figures["energy_j"].get<double>() == doctest::Approx(truth_j).epsilon(0.05));
  CHECK(figures["power_w"]["mean"].get<double>() == doctest::Approx(truth_j / seconds).epsilon(0.05));
  CHECK(figures["throttled"].empty());

  for (const auto& stream : load.get()) {
    CHECK(stream.done);
  }
}

// The power cap holds from user request 60 to request 90: inside the second level
// whatever the warm-ups before it (the variant's and each level's: a few requests),
// since each level sends 48. The first level is never capped.
TEST_CASE("telemetry: a power cap during one level flags exactly that level, in result.json and the report") {
  Sweep sweep;
  sweep.write(R"(  - name: capped
    knobs: {sim_fault: ["power-cap:60-90"]})",
              R"(  - {name: parallel, kind: concurrency, levels: [32, 48], repeats: 1, requests: 48, max_tokens: 96})",
              "1s", 5);
  int code = sweep.run({"--out", sweep.out().string()});
  INFO(sweep.output());
  REQUIRE(code == 0);
  auto result = read_json(sweep.out() / "variants/capped/result.json");
  const auto& levels = result["benchmarks"]["parallel"]["levels"];
  REQUIRE(levels.size() == 2);
  CHECK(levels[0]["telemetry"]["throttled"].empty());
  CHECK(levels[0]["telemetry"]["throttle"]["sw_power_cap"].get<double>() == 0.0);
  CHECK(levels[1]["telemetry"]["throttled"] == json::array({"sw_power_cap"}));
  CHECK(levels[1]["telemetry"]["throttle"]["sw_power_cap"].get<double>() > specctl::run::k_throttle_flag_share);
  // The report flags that level and no other: its tok/J cell, and one note under the table.
  const std::string md = st::read_file(sweep.out() / "report.md");
  INFO(md);
  std::vector<std::string> header, row, notes;
  bool tok_per_j = false;
  std::istringstream lines(md);
  for (std::string line; std::getline(lines, line);) {
    auto cells = [&] {
      std::vector<std::string> out;
      std::istringstream in(line);
      for (std::string cell; std::getline(in, cell, '|');) {
        const auto first = cell.find_first_not_of(' ');
        out.push_back(first == std::string::npos ? "" : cell.substr(first, cell.find_last_not_of(' ') - first + 1));
      }
      return out;
    };
    if (line == "Output tok/J:") {
      tok_per_j = true;
    } else if (tok_per_j && header.empty() && line.starts_with("| variant |")) {
      header = cells();
    } else if (!header.empty() && row.empty() && line.starts_with("| capped ")) {
      row = cells();
    } else if (line.starts_with("- **capped** at ") && line.find("throttled") != std::string::npos) {
      notes.push_back(line);
    }
  }
  REQUIRE(row.size() == header.size());
  int columns = 0;
  for (std::size_t i = 0; i < header.size(); ++i) {
    if (header[i] == "c32") {
      ++columns;
      CHECK(row[i].find("throttled") == std::string::npos);
    } else if (header[i] == "c48") {
      ++columns;
      CHECK(row[i].ends_with(" (throttled)"));
    }
  }
  CHECK(columns == 2);
  REQUIRE(notes.size() == 1);
  CHECK(notes[0].starts_with("- **capped** at c48: throttled: sw_power_cap"));
  CHECK(sweep.output().find("throttled") != std::string::npos);
}

// A template that names dcgmi: DCGM's `dcgmi dmon` samples instead of nvidia-smi
// (specsim's stand-in reads the same fake GPUs); one whose dcgmi is missing falls
// back to nvidia-smi and says so.
TEST_CASE("telemetry: dcgmi dmon samples where the template names it, nvidia-smi where it is missing") {
  auto with_template = [](Sweep& sweep, const std::string& name, const std::string& dcgmi) {
    std::filesystem::create_directories(sweep.file().parent_path() / "templates");
    std::ofstream(sweep.file().parent_path() / "templates" / (name + ".yaml"))
        << "name: " << name << "\nextends: specsim\ndcgmi_command: " << dcgmi << "\n";
    sweep.personality(name, "tp: 8, ");
  };
  SUBCASE("dcgmi") {
    Sweep sweep;
    with_template(sweep, "dcgm", "[\"{specctl_bindir}/specsim\", dcgmi]");
    sweep.write("  - name: dcgm", k_telemetry_benchmarks, "2s", 5);
    int code = sweep.run({"--out", sweep.out().string()});
    INFO(sweep.output());
    REQUIRE(code == 0);
    auto result = read_json(sweep.out() / "variants/dcgm/result.json");
    CHECK(result["telemetry"]["tool"] == "dcgmi");
    CHECK(result["telemetry"]["energy_counter"] == true);
    CHECK(result["telemetry"]["warnings"].empty());
    CHECK(result["telemetry"]["load"]["memory_peak_mib"].size() == 8);
    std::vector<const json*> windows{&result["benchmarks"]["single"]};
    for (const auto& level : result["benchmarks"]["parallel"]["levels"]) {
      windows.push_back(&level);
    }
    int counter_windows = 0;
    for (const auto* window : windows) {
      const auto& t = (*window)["telemetry"];
      REQUIRE(t.is_object());
      CHECK(t["gpus"].size() == 8);
      counter_windows += check_energy_source(t) ? 1 : 0;
      CHECK(t["tok_per_j"].get<double>() > 0);
      CHECK(t["power_w"]["mean"].get<double>() > 8 * 75.0);
      CHECK(t["sm_clock_share"].get<double>() > 0);
      CHECK(t["throttled"].empty());
    }
    CHECK(counter_windows >= 1);
    const auto labels = csv_labels(sweep.out() / "variants/dcgm/telemetry.csv");
    REQUIRE(labels.size() == 4);
    CHECK(labels[0].first == ",load,1");
    CHECK(labels[3].first == "parallel,c16,1");
    CHECK(live_samplers(sweep.gpus()).empty());
  }
  SUBCASE("dcgmi that gives no sample") {
    // dmon refuses: here an extra word before it; on a GPU node, no host engine to connect to.
    Sweep sweep;
    with_template(sweep, "baddcgm", "[\"{specctl_bindir}/specsim\", dcgmi, discovery]");
    sweep.write("  - name: baddcgm", k_quick_benchmarks, "1s", 5);
    int code = sweep.run({"--out", sweep.out().string()});
    INFO(sweep.output());
    REQUIRE(code == 0);
    auto result = read_json(sweep.out() / "variants/baddcgm/result.json");
    CHECK(result["telemetry"]["tool"] == "nvidia-smi");
    REQUIRE(result["telemetry"]["warnings"].size() == 1);
    CHECK(result["telemetry"]["warnings"][0].get<std::string>().find(
              "dmon gave no sample (Error: only `dcgmi dmon` is simulated): GPU telemetry from nvidia-smi") !=
          std::string::npos);
    CHECK(result["benchmarks"]["parallel"]["levels"][0]["telemetry"]["tok_per_j"].get<double>() > 0);
  }
  SUBCASE("dcgmi missing") {
    Sweep sweep;
    with_template(sweep, "nodcgm", "[specctl-test-no-such-dcgmi]");
    sweep.write("  - name: nodcgm", k_quick_benchmarks, "1s", 5);
    int code = sweep.run({"--out", sweep.out().string()});
    INFO(sweep.output());
    REQUIRE(code == 0);
    auto result = read_json(sweep.out() / "variants/nodcgm/result.json");
    CHECK(result["telemetry"]["tool"] == "nvidia-smi");
    REQUIRE(result["telemetry"]["warnings"].size() == 1);
    CHECK(result["telemetry"]["warnings"][0].get<std::string>().find(
              "specctl-test-no-such-dcgmi (or bash) not found: GPU telemetry from nvidia-smi") != std::string::npos);
    CHECK(result["benchmarks"]["parallel"]["levels"][0]["telemetry"]["tok_per_j"].get<double>() > 0);
    CHECK(live_samplers(sweep.gpus()).empty());
  }
}
