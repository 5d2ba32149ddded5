#include <doctest/doctest.h>

#include <specctl/server/log_replay.hpp>
#include <specctl/server/log_watch.hpp>

#include <algorithm>
#include <filesystem>
#include <fmt/format.h>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <yaml-cpp/yaml.h>

using namespace specctl::server;
namespace fs = std::filesystem;

namespace {

const fs::path k_corpus = fs::path(SPECCTL_TEST_SOURCE_DIR) / "tests" / "data" / "engine-logs";
const std::string k_templates = std::string(SPECCTL_TEST_SOURCE_DIR) + "/templates";

std::shared_ptr<const ServerTemplate> replay_template(const std::string& name) {
  specctl::util::Diagnostics diag;
  auto tmpl = load_template(name, {k_templates}, diag, {});
  for (const auto& d : diag.items()) {
    MESSAGE(d.str());
  }
  REQUIRE(tmpl);
  return tmpl;
}

std::string read(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

std::vector<std::string> strings(const YAML::Node& node) {
  std::vector<std::string> out;
  for (const auto& item : node) {
    out.push_back(item.as<std::string>());
  }
  return out;
}

// Each corpus folder: its expect.yaml and the folder.
std::vector<std::pair<fs::path, YAML::Node>> manifests() {
  std::vector<fs::path> dirs;
  for (const auto& entry : fs::directory_iterator(k_corpus)) {
    if (entry.is_directory() && fs::exists(entry.path() / "expect.yaml")) {
      dirs.push_back(entry.path());
    }
  }
  // Sorted before loading: assigning a YAML::Node (as sorting would) writes through to the node.
  std::sort(dirs.begin(), dirs.end());
  std::vector<std::pair<fs::path, YAML::Node>> out;
  for (const auto& dir : dirs) {
    out.emplace_back(dir, YAML::LoadFile((dir / "expect.yaml").string()));
  }
  return out;
}

std::vector<std::size_t> distinct_percents(const LogReplay& replay) {
  std::vector<std::size_t> out;
  for (const auto& p : replay.progress) {
    auto percent = static_cast<std::size_t>(p.percent + 0.5);
    if (out.empty() || out.back() != percent) {
      out.push_back(percent);
    }
  }
  return out;
}

const char* verdict_name(ReplayVerdict v) {
  return v == ReplayVerdict::ready ? "ready" : v == ReplayVerdict::failed ? "failed" : "no_verdict";
}

void check_expectations(const fs::path& file, const YAML::Node& expect, const LogReplay& replay) {
  CAPTURE(file.string());
  CAPTURE(replay.verdict_line);
  CHECK(verdict_name(replay.verdict) == expect["verdict"].as<std::string>());
  if (expect["fatal"]) {
    REQUIRE(replay.fatal);
    CAPTURE(replay.fatal->pattern_text);
    CHECK(replay.fatal->pattern_text.find(expect["fatal"].as<std::string>()) != std::string::npos);
  } else {
    CHECK_FALSE(replay.fatal);
  }
  if (expect["milestones"]) {
    std::vector<std::string> seen;
    for (const auto& m : replay.milestones) {
      seen.push_back(m.name);
    }
    CHECK(seen == strings(expect["milestones"]));
  }
  if (expect["milestone_counts"]) {
    for (const auto& entry : expect["milestone_counts"]) {
      auto name = entry.first.as<std::string>();
      auto it = std::find_if(replay.milestones.begin(), replay.milestones.end(),
                             [&](const ReplayMilestone& m) { return m.name == name; });
      CAPTURE(name);
      REQUIRE(it != replay.milestones.end());
      CHECK(it->count == entry.second.as<std::size_t>());
    }
  }
  if (expect["progress"]) {
    std::vector<std::size_t> wanted;
    for (const auto& p : expect["progress"]) {
      wanted.push_back(p.as<std::size_t>());
    }
    CHECK(distinct_percents(replay) == wanted);
  }
  if (expect["metrics"]) {
    std::set<std::string> wanted;
    for (const auto& entry : expect["metrics"]) {
      auto name = entry.first.as<std::string>();
      wanted.insert(name);
      auto it = std::find_if(replay.metrics.begin(), replay.metrics.end(),
                             [&](const ReplayMetric& m) { return m.name == name; });
      CAPTURE(name);
      REQUIRE(it != replay.metrics.end());
      const YAML::Node& want = entry.second;
      if (want["samples"]) {
        CHECK(it->samples == want["samples"].as<std::size_t>());
      }
      for (const char* key : {"mean", "min", "max"}) {
        if (want[key]) {
          double got = std::string(key) == "mean" ? it->mean : std::string(key) == "min" ? it->min : it->max;
          CAPTURE(key);
          CHECK(got == doctest::Approx(want[key].as<double>()).epsilon(0.001));
        }
      }
    }
    // Only the listed metrics appear: a Prefill line read as a Decode line would add samples or names.
    for (const auto& m : replay.metrics) {
      CAPTURE(m.name);
      CHECK(wanted.count(m.name) == 1);
    }
  }
}

} // namespace

TEST_CASE("every corpus log gives its expected verdict") {
  auto all = manifests();
  REQUIRE(all.size() >= 3);
  for (const auto& [dir, manifest] : all) {
    CAPTURE(dir.string());
    auto tmpl = replay_template(manifest["template"].as<std::string>());
    std::set<std::string> listed;
    for (const auto& entry : manifest["files"]) {
      auto name = entry.first.as<std::string>();
      listed.insert(name);
      fs::path file = dir / name;
      REQUIRE(fs::is_regular_file(file));
      check_expectations(file, entry.second, replay_log(*tmpl, read(file)));
    }
    // Every log in the folder has its expectation.
    for (const auto& entry : fs::directory_iterator(dir)) {
      if (entry.path().extension() == ".log") {
        CAPTURE(entry.path().string());
        CHECK(listed.count(entry.path().filename().string()) == 1);
      }
    }
  }
}

// The header lines that say where a log comes from must not be read as anything.
TEST_CASE("corpus headers match no pattern") {
  for (const auto& [dir, manifest] : manifests()) {
    LogMatcher matcher(replay_template(manifest["template"].as<std::string>())->log);
    for (const auto& entry : manifest["files"]) {
      std::istringstream text(read(dir / entry.first.as<std::string>()));
      std::string line;
      while (std::getline(text, line) && line.starts_with("# ")) {
        auto m = matcher.matches(line);
        CAPTURE(line);
        CHECK((m.ready.empty() && m.fatal.empty() && !m.progress && m.milestones.empty() && m.metrics.empty()));
      }
    }
  }
}

// A pattern that fires on no real line is a broken pattern (an unescaped "(" or "[", a
// message the engine no longer prints): every pattern of every template must fire somewhere.
TEST_CASE("every pattern of every template fires on the corpus") {
  std::map<std::string, std::vector<LogReplay>> replays;
  for (const auto& [dir, manifest] : manifests()) {
    for (const auto& name : strings(manifest["covers"])) {
      auto tmpl = replay_template(name);
      for (const auto& entry : manifest["files"]) {
        replays[name].push_back(replay_log(*tmpl, read(dir / entry.first.as<std::string>())));
      }
    }
  }
  for (const auto& name : available_templates({k_templates})) {
    CAPTURE(name);
    REQUIRE(replays.count(name) == 1);
    auto tmpl = replay_template(name);
    const auto& log = tmpl->log;
    auto never = [&](const std::vector<std::size_t> LogReplay::*hits, std::size_t i) {
      return std::all_of(replays[name].begin(), replays[name].end(),
                         [&](const LogReplay& r) { return (r.*hits)[i] == 0; });
    };
    for (std::size_t i = 0; i < log.ready.size(); ++i) {
      if (never(&LogReplay::ready_hits, i)) {
        FAIL_CHECK(fmt::format("{}: ready pattern \"{}\" fires on no corpus line", name, log.ready[i]));
      }
    }
    for (std::size_t i = 0; i < log.fatal.size(); ++i) {
      if (never(&LogReplay::fatal_hits, i)) {
        FAIL_CHECK(fmt::format("{}: fatal pattern \"{}\" fires on no corpus line", name, log.fatal[i]));
      }
    }
    for (std::size_t i = 0; i < log.milestones.size(); ++i) {
      if (never(&LogReplay::milestone_hits, i)) {
        FAIL_CHECK(fmt::format("{}: milestone \"{}\" fires on no corpus line", name, log.milestones[i]));
      }
    }
    for (std::size_t i = 0; i < log.metrics.size(); ++i) {
      if (never(&LogReplay::metric_hits, i)) {
        FAIL_CHECK(fmt::format("{}: metric {} \"{}\" fires on no corpus line", name, log.metrics[i].first,
                               log.metrics[i].second));
      }
    }
    if (log.progress) {
      bool fired = std::any_of(replays[name].begin(), replays[name].end(),
                               [](const LogReplay& r) { return r.progress_hits > 0; });
      if (!fired) {
        FAIL_CHECK(fmt::format("{}: the progress pattern fires on no corpus line", name));
      }
    }
  }
}

TEST_CASE("log replay") {
  ServerTemplate tmpl;
  tmpl.log.ready = {"ready to roll"};
  tmpl.log.fatal = {"CUDA out of memory", "Scheduler hit an exception"};
  tmpl.log.progress = ProgressPattern{R"(shards:\s+(\d+)% Completed \| (\d+)/(\d+))", 1, 2, 3};
  tmpl.log.milestones = {"Load weight begin"};
  tmpl.log.metrics = {{"accept_length", R"(accept len: ([0-9.]+))"}};

  SUBCASE("ready, with milestones counted once per line and tqdm redraws read one by one") {
    auto r = replay_log(
        tmpl, "[TP0] Load weight begin\n[TP1] Load weight begin\n"
              "shards:   0% Completed | 0/2 [\rshards:  50% Completed | 1/2 [\rshards: 100% Completed | 2/2 [\n"
              "\x1b[32mready to roll\x1b[0m\naccept len: 2.00\naccept len: 3.00\n");
    CHECK(r.verdict == ReplayVerdict::ready);
    CHECK(r.verdict_line == "ready");
    CHECK(r.lines == 6);
    CHECK(r.ready_line == 4);
    REQUIRE(r.milestones.size() == 1);
    CHECK(r.milestones[0].first_line == 1);
    CHECK(r.milestones[0].count == 2);
    REQUIRE(r.progress.size() == 3);
    CHECK(r.progress[1].line == 3);
    CHECK(r.progress[1].percent == 50);
    CHECK(r.progress[1].done == 1);
    REQUIRE(r.metrics.size() == 1);
    CHECK(r.metrics[0].samples == 2);
    CHECK(r.metrics[0].mean == doctest::Approx(2.5));
    CHECK(r.metrics[0].min == 2);
    CHECK(r.metrics[0].max == 3);
  }
  SUBCASE("the earliest pattern of the template names the cause, not the first line") {
    auto r = replay_log(tmpl, "Scheduler hit an exception: Traceback\n  File x\nError: CUDA out of memory\n");
    CHECK(r.verdict == ReplayVerdict::failed);
    CHECK(r.first_fatal_line == 1);
    REQUIRE(r.fatal);
    CHECK(r.fatal->line == 3);
    CHECK(r.fatal->pattern == 0);
    CHECK(r.verdict_line == "failed: Error: CUDA out of memory");
  }
  SUBCASE("a fatal line is not also ready") {
    auto r = replay_log(tmpl, "ready to roll? CUDA out of memory\n");
    CHECK(r.verdict == ReplayVerdict::failed);
    CHECK_FALSE(r.ready_line);
  }
  SUBCASE("neither ready nor fatal") {
    auto r = replay_log(tmpl, "shards:  50% Completed | 1/2 [\nsomething\n");
    CHECK(r.verdict == ReplayVerdict::no_verdict);
    CHECK(r.verdict_line == "no verdict: no ready or fatal line in 2 lines, the last progress 50% at line 1");
  }
  SUBCASE("a template without a ready pattern has no verdict") {
    tmpl.log.ready.clear();
    auto r = replay_log(tmpl, "anything\n");
    CHECK(r.verdict == ReplayVerdict::no_verdict);
    CHECK(r.verdict_line.find("no ready pattern") != std::string::npos);
  }
  SUBCASE("an empty log") {
    auto r = replay_log(tmpl, "");
    CHECK(r.lines == 0);
    CHECK(r.verdict_line == "no verdict: no ready or fatal line in 0 lines");
  }
}

TEST_CASE("the SGLang template reads metrics from Decode lines only") {
  LogMatcher m(replay_template("sglang")->log);
  auto prefill = m.classify("[2026-11-30 10:00:40 TP0] Prefill batch, #new-seq: 8, #new-token: 4096, #cached-token: 0, "
                            "token usage: 0.01, #running-req: 3, #queue-req: 24, ");
  CHECK(prefill.metrics.empty());
  auto old_prefill =
      m.classify("[2025-01-22 10:00:00 TP0] Prefill batch. #new-seq: 1, #new-token: 6, #cached-token: 0, "
                 "token usage: 0.00, #running-req: 0, #queue-req: 0");
  CHECK(old_prefill.metrics.empty());
  auto decode = m.classify("[2026-11-30 10:00:41 TP0] Decode batch, #running-req: 8, #token: 4608, token usage: 0.01, "
                           "cuda graph: True, gen throughput (token/s): 640.12, #queue-req: 24, ");
  std::vector<std::pair<std::string, double>> metrics = {
      {"gen_throughput", 640.12}, {"running_requests", 8}, {"queued_requests", 24}};
  CHECK(decode.metrics == metrics);
  // A traceback alone is no verdict: SGLang prints some that are not fatal.
  CHECK_FALSE(m.classify("Traceback (most recent call last):").fatal);
}
