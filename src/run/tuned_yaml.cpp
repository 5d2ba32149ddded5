// tuned.yaml: the answer of `specctl tune` as an ordinary experiment, the start
// configuration, each load point's winner and the runners-up of ties, to confirm
// with `specctl run`.

#include <specctl/run/tuning.hpp>
#include <specctl/util/error.hpp>
#include <specctl/util/text.hpp>

#include <algorithm>
#include <fmt/format.h>
#include <sstream>
#include <yaml-cpp/yaml.h>

namespace specctl::run {

std::string tuned_yaml(const experiment::Experiment& experiment, const TuneAnswer& answer) {
  YAML::Node root;
  try {
    root = YAML::LoadFile(experiment.file);
  } catch (const YAML::Exception& e) {
    throw Error(fmt::format("{}: cannot read it again to write tuned.yaml: {}", experiment.file, e.what()),
                ErrorKind::failed);
  }
  const auto& spec = *experiment.tune;
  YAML::Node head;
  head["name"] = experiment.name + "-tuned";
  head["description"] =
      fmt::format("the winners of tuning {} and its start configuration: {}", experiment.name, answer.recommendation);
  for (const char* key : {"hosts", "server", "bench"}) {
    if (root[key]) {
      head[key] = root[key];
    }
  }
  YAML::Node benchmarks = root["benchmarks"] ? YAML::Clone(root["benchmarks"]) : YAML::Node(YAML::NodeType::Sequence);
  if (auto load = root["tune"]["load"]; load && load.IsMap()) {
    YAML::Node bench;
    bench["name"] = spec.load;
    bench["kind"] = load["rates"] ? "rate" : "concurrency";
    for (const auto& kv : load) {
      auto key = kv.first.as<std::string>();
      bench[key == "concurrency" ? "levels" : key] = kv.second;
    }
    benchmarks.push_back(bench);
  }
  // The tuning's SLO stays the load's: its goodput and its bisection need the bounds.
  if (auto slo = root["tune"]["slo"]; slo && slo.IsMap()) {
    for (auto bench : benchmarks) {
      if (bench.IsMap() && bench["name"] && bench["name"].as<std::string>() == spec.load && !bench["slo"]) {
        bench["slo"] = slo;
      }
    }
  }
  head["benchmarks"] = benchmarks;

  // The start configuration first (the baseline), then each level's winner once, in load
  // order, and after it the runner-up of a tie, which the confirmation run settles. Each
  // says why it is there, in a comment and in its description.
  struct Entry {
    tune::Config config;
    std::string name;
    bool start = false;
    // Load points where it is best ("c1 (a tie)"), and the ties where it is the runner-up.
    std::vector<std::string> best;
    std::vector<std::string> runner_up;

    std::string why() const {
      std::vector<std::string> parts;
      if (start) {
        parts.push_back("the start configuration (the baseline)");
      }
      if (!best.empty()) {
        parts.push_back("best at " + util::join(best, ", "));
      }
      if (!runner_up.empty()) {
        parts.push_back(util::join(runner_up, "; ") +
                        (runner_up.size() == 1 ? ": run again to settle the tie" : ": run again to settle the ties"));
      }
      return util::join(parts, "; ");
    }
  };
  std::vector<Entry> entries;
  auto entry_of = [&](const tune::Config& config) -> Entry* {
    auto name = spec.trial_of(config);
    if (name.empty()) {
      return nullptr;
    }
    auto it = std::find_if(entries.begin(), entries.end(), [&](const Entry& e) { return e.name == name; });
    if (it != entries.end()) {
      return &*it;
    }
    entries.push_back(Entry{config, name, false, {}, {}});
    return &entries.back();
  };
  if (auto* start = entry_of(spec.space().start())) {
    start->start = true;
  }
  for (const auto& v : answer.points) {
    if (!v.best) {
      continue;
    }
    const bool settle = v.tie && v.runner_up;
    if (auto* best = entry_of(v.best->config)) {
      best->best.push_back(v.point + (settle ? " (a tie)" : ""));
    }
    if (auto* second = settle ? entry_of(v.runner_up->config) : nullptr) {
      second->runner_up.push_back(fmt::format("runner-up at {}, within the noise of {}", v.point, v.best->variant));
    }
  }
  auto emit = [](const YAML::Node& node) {
    YAML::Emitter emitter;
    emitter << node;
    return std::string(emitter.c_str()) + "\n";
  };
  std::string variants = "variants:\n";
  for (const auto& entry : entries) {
    YAML::Node variant;
    variant["name"] = entry.name;
    variant["description"] = entry.why();
    YAML::Node knobs(YAML::NodeType::Map);
    for (const auto& d : spec.dimensions) {
      if (auto it = entry.config.find(d.knob); it != entry.config.end()) {
        knobs[d.knob] = it->second == "none" ? YAML::Node(YAML::NodeType::Null) : YAML::Node(it->second);
      }
    }
    variant["knobs"] = knobs;
    YAML::Node item(YAML::NodeType::Sequence);
    item.push_back(variant);
    // A comment above the item: yaml-cpp's emitter would put it at the end of the item before.
    variants += fmt::format("  # {}\n", entry.why());
    std::istringstream lines(emit(item));
    for (std::string line; std::getline(lines, line);) {
      variants += "  " + line + "\n";
    }
  }

  // The file's report settings stay, with the start configuration as the baseline;
  // an expectation about a configuration not in this file would refuse it.
  YAML::Node report =
      root["report"] && root["report"].IsMap() ? YAML::Clone(root["report"]) : YAML::Node(YAML::NodeType::Map);
  if (!entries.empty()) {
    report["baseline"] = entries.front().name;
  }
  std::vector<std::string> dropped;
  if (auto expect = report["expect"]; expect && expect.IsSequence()) {
    YAML::Node kept(YAML::NodeType::Sequence);
    for (const auto& x : expect) {
      auto about = x.IsMap() && x["variant"] && x["variant"].IsScalar() ? x["variant"].Scalar() : "";
      if (std::any_of(entries.begin(), entries.end(), [&](const Entry& e) { return e.name == about; })) {
        kept.push_back(x);
      } else if (std::find(dropped.begin(), dropped.end(), about) == dropped.end()) {
        dropped.push_back(about);
      }
    }
    if (kept.size() == 0) {
      report.remove("expect");
    } else {
      report["expect"] = kept;
    }
  }
  YAML::Node tail;
  tail["report"] = report;

  std::string header = fmt::format("# Written by specctl tune from {}: the start configuration, the winners per load "
                                   "and the runners-up of ties.\n# Confirm them with: specctl run tuned.yaml\n",
                                   experiment.file);
  if (!dropped.empty()) {
    header += fmt::format("# Left out of report.expect: the expectations about {}, not in this file.\n",
                          util::join(dropped, ", "));
  }
  return header + emit(head) + variants + emit(tail);
}

} // namespace specctl::run
