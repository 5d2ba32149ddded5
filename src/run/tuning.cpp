// `specctl tune`: a thin loop around tune::next_step. Before every step the trials
// are read back from the result folder; the configuration the search asks for is
// copied in from an earlier run (--from) when one measured exactly it, or launched
// as an ordinary variant by run_experiment (which journals it, keeps complete
// results on --resume, and writes the report of the trials so far).

#include <specctl/experiment/plan.hpp>
#include <specctl/report/report.hpp>
#include <specctl/report/result_writer.hpp>
#include <specctl/report/results.hpp>
#include <specctl/run/tuning.hpp>

#include <specctl/server/lifecycle.hpp>

#include "folder_owner.hpp"
#include <specctl/util/atomic_file.hpp>
#include <specctl/util/duration.hpp>
#include <specctl/util/error.hpp>
#include <specctl/util/try.hpp>

#include <algorithm>
#include <fmt/format.h>
#include <fstream>

namespace specctl::run {

namespace {

using json = nlohmann::json;

std::vector<Trial> read_trials(const experiment::Experiment& experiment, const report::ResultPaths& paths) {
  std::vector<Trial> out;
  for (const auto& [config, name] : experiment.tune->trials) {
    if (auto result = report::read_result(paths, name)) {
      if (auto trial = read_trial(*result, experiment, config)) {
        out.push_back(std::move(*trial));
      }
    }
  }
  return out;
}

// A measured trial of an earlier run to copy in: its variant folder.
struct Reusable {
  std::filesystem::path dir;
  std::string from;
};

// The trials of earlier result folders that measured one of this tuning's
// configurations: the same launch command, and every benchmark complete with the
// same specification.
std::map<tune::Config, Reusable> find_reusable(const experiment::Experiment& experiment,
                                               const std::vector<std::filesystem::path>& from,
                                               const server::RenderOptions& render) {
  std::map<std::string, tune::Config> by_command;
  auto plan = experiment::make_plan(experiment, render);
  for (const auto& planned : plan.variants) {
    for (const auto& [config, name] : experiment.tune->trials) {
      if (name == planned.variant->name) {
        by_command.emplace(planned.launch.shell_line(), config);
      }
    }
  }
  std::map<tune::Config, Reusable> out;
  for (const auto& dir : from) {
    auto data = report::read_run(dir);
    report::ResultPaths paths{dir};
    for (const auto& variant : report::dig(data.experiment, {"variants"})) {
      if (!variant.is_object() || !variant.value("command_line", json()).is_string()) {
        continue;
      }
      auto match = by_command.find(variant["command_line"].get<std::string>());
      auto result = data.results.find(variant.value("name", ""));
      if (match == by_command.end() || result == data.results.end() ||
          report::status_of(result->second) != report::VariantStatus::ok || out.contains(match->second)) {
        continue;
      }
      bool same = true;
      for (const auto& bench : experiment.benchmarks) {
        const auto& kept = report::dig(result->second, {"benchmarks", bench.name});
        same =
            same && report::status_of(kept) == report::VariantStatus::ok && kept.value("spec", "") == bench.describe();
      }
      if (same) {
        out[match->second] = Reusable{paths.variant_dir(variant.value("name", "")), dir.string()};
      }
    }
  }
  return out;
}

// Copies an earlier trial into the folder under this tuning's name for it.
void adopt(const Reusable& source, const std::string& name, const report::ResultPaths& paths) {
  std::error_code ec;
  auto target = paths.variant_dir(name);
  std::filesystem::remove_all(target, ec);
  std::filesystem::create_directories(target.parent_path(), ec);
  std::filesystem::copy(source.dir, target, std::filesystem::copy_options::recursive, ec);
  if (ec) {
    throw Error(
        fmt::format("{}: cannot copy the trial from {}: {}", target.string(), source.dir.string(), ec.message()));
  }
  auto result = util::value_or_throw(report::ResultWriter::read(paths.result(name)));
  result.at("variant") = name;
  result.at("reused_from") = source.dir.string();
  util::value_or_throw(result.write(paths.result(name)));
}

// One run over the trials complete so far (kept as they are) and those to `launch`,
// side by side where the host has room; a failed trial is not run again.
RunOutcome run_trials(const experiment::Experiment& experiment, RunOptions run, const std::vector<Trial>& trials,
                      const std::vector<std::string>& launch, bool started, Display& display) {
  std::vector<std::string> names = launch;
  for (const auto& t : trials) {
    if (t.status == report::VariantStatus::ok) {
      names.push_back(t.variant);
    }
  }
  run.variants = names;
  run.resume = started;
  run.keep_complete = true;
  return run_experiment(experiment, run, display);
}

// The trials to launch together, `first` (what the search asks now) first: with room
// for more, each next one is what the search would ask if all before it lost (missed
// the SLO), so the machines never idle while the search waits. One that the search
// then does not ask for was still a model load: the caller counts it in the budget.
// A configuration an earlier run measured is left for the next round to copy in.
std::vector<tune::Config> next_batch(const tune::Space& space, tune::Measured hypothesis, const tune::Options& search,
                                     const tune::Config& first, const std::map<tune::Config, Reusable>& reusable,
                                     int width) {
  std::vector<tune::Config> batch{first};
  while (static_cast<int>(batch.size()) < width) {
    hypothesis[batch.back()] = std::vector<tune::Figure>(search.points, tune::Figure{0, 0, false});
    auto step = tune::next_step(space, hypothesis, search);
    if (!step.launch || reusable.contains(*step.launch)) {
      break;
    }
    batch.push_back(*step.launch);
  }
  return batch;
}

void write_answer(const experiment::Experiment& experiment, const TuneAnswer& answer, const std::filesystem::path& dir,
                  TuneOutcome& out) {
  const std::pair<const char*, std::string> files[] = {
      {"tune.md", answer_markdown(experiment, answer)},
      {"tune.json", answer_json(experiment, answer).dump(2) + "\n"},
      {"tuned.yaml", tuned_yaml(experiment, answer)},
  };
  for (const auto& [file, text] : files) {
    if (auto written = util::write_file_atomic(dir / file, text); !written) {
      out.write_error = written.error().what();
      return;
    }
  }
}

} // namespace

int TuneOutcome::exit_code() const {
  if (interrupted) {
    return k_exit_interrupted;
  }
  // No load point has a configuration that meets the SLO (or the start failed): no answer.
  const bool answered = std::any_of(answer.points.begin(), answer.points.end(), [](const auto& p) { return p.best; });
  return write_error || !answered ? k_exit_failures : k_exit_ok;
}

TuneOutcome tune_experiment(const experiment::Experiment& experiment, const TuneOptions& options, Display& display) {
  if (!experiment.tune) {
    throw Error(
        fmt::format("{}: not a tuning file: it has no tune: block (specctl run runs an experiment)", experiment.file),
        ErrorKind::bad_input);
  }
  const auto& spec = *experiment.tune;
  report::ResultPaths paths{options.run.out_dir};
  TuneOutcome out;
  out.dir = options.run.out_dir;
  // Held through every trial (each a run into the same folder, which takes it again).
  auto ownership = detail::FolderOwnership::take(
      out.dir, server::RunOwner::this_process(experiment.name, std::filesystem::absolute(out.dir).string()).describe(),
      !options.run.resume);
  if (!ownership) {
    throw ownership.error();
  }
  std::error_code ec;
  bool started = std::filesystem::exists(paths.run_info(), ec);
  if (options.run.resume && !started) {
    throw Error(fmt::format("{}: no tuning to resume here (no run.json)", out.dir.string()), ErrorKind::bad_input);
  }
  if (!options.run.resume && started) {
    throw Error(fmt::format("{}: already holds a run; continue it with --resume {} or choose another --out",
                            out.dir.string(), out.dir.string()),
                ErrorKind::bad_input);
  }
  const auto space = spec.space();
  const auto search = search_options(experiment);
  auto reusable = find_reusable(experiment, options.from, options.run.render);

  // Each round launches trials or copies one in; the budget bounds the rounds.
  const int width = experiment::parallel_trials(experiment);
  bool adopted_since_run = false;
  std::string why;
  std::vector<Trial> trials;
  for (int round = 0; round <= 2 * spec.max_loads + 1; ++round) {
    trials = read_trials(experiment, paths);
    if (round == 0) {
      out.kept = static_cast<int>(trials.size());
    }
    const tune::Measured measured = measured_of(trials);
    double spent_s = 0;
    for (const auto& t : trials) {
      spent_s += t.duration_s;
    }
    // A start that cannot even be served says something is wrong with the setup, not
    // with a configuration: nothing the search launched next would be measured either.
    if (auto first =
            std::find_if(trials.begin(), trials.end(), [&](const Trial& t) { return t.config == space.start(); });
        first != trials.end() && first->status == report::VariantStatus::failed) {
      why = fmt::format("the start configuration {} failed, so the search stopped: {}", first->variant,
                        first->points.empty() || first->points.front().slo_missed.empty()
                            ? std::string("see its server.log")
                            : first->points.front().slo_missed.front());
      break;
    }
    auto step = tune::next_step(space, measured, search);
    if (!step.launch) {
      why = step.why;
      break;
    }
    if (auto reuse = reusable.find(*step.launch); reuse != reusable.end()) {
      const std::string name = spec.trial_of(*step.launch);
      adopt(reuse->second, name, paths);
      ++out.reused;
      adopted_since_run = true;
      display.message(name, Severity::info,
                      fmt::format("measured before in {}: reused, not launched", reuse->second.from));
      continue;
    }
    if (spec.max_time && spent_s >= std::chrono::duration<double>(*spec.max_time).count()) {
      why = fmt::format("the time budget of {} is spent", util::format_duration(*spec.max_time));
      break;
    }
    // Every trial in the folder was a model load, whether the search still asks for it or not.
    if (static_cast<int>(trials.size()) >= spec.max_loads) {
      why = fmt::format("the budget of {} launches is spent", spec.max_loads);
      break;
    }
    auto batch = next_batch(space, measured, search, *step.launch, reusable,
                            std::min(width, spec.max_loads - static_cast<int>(trials.size())));
    std::vector<std::string> names;
    for (std::size_t k = 0; k < batch.size(); ++k) {
      names.push_back(spec.trial_of(batch[k]));
      display.message(
          names.back(), Severity::info,
          fmt::format("trial {} of at most {}: {}{}", trials.size() + k + 1, spec.max_loads, tune::describe(batch[k]),
                      k > 0 ? " (beside the one before: what the search asks next if that one loses)" : ""));
    }
    auto outcome = run_trials(experiment, options.run, trials, names, started, display);
    started = true;
    adopted_since_run = false;
    out.launched += static_cast<int>(names.size());
    if (outcome.interrupted) {
      out.interrupted = true;
      return out;
    }
    if (outcome.write_error) {
      out.write_error = outcome.write_error;
      return out;
    }
    for (std::size_t k = 0; k < batch.size(); ++k) {
      auto result = report::read_result(paths, names[k]);
      if (!result || !read_trial(*result, experiment, batch[k])) {
        throw Error(fmt::format("{}: trial {} left no result to go on from; continue with specctl tune {} --resume {}",
                                out.dir.string(), names[k], experiment.file, out.dir.string()));
      }
    }
  }
  if (why.empty()) {
    why = fmt::format("the budget of {} trials is spent", spec.max_loads);
  }
  if (!started || adopted_since_run) {
    // Trials copied in since the last launch join the run's files and report.
    auto outcome = run_trials(experiment, options.run, trials, {}, started, display);
    if (outcome.write_error) {
      out.write_error = outcome.write_error;
      return out;
    }
  }
  out.answer = make_answer(experiment, trials, why);
  write_answer(experiment, out.answer, out.dir, out);
  if (!out.write_error) {
    // The report again, now with the tuning's answer and its Pareto front.
    try {
      report::write_reports(report::build_report(report::read_run(out.dir)), out.dir, experiment.report.formats);
    } catch (const Error& e) {
      out.write_error = e.what();
    }
  }
  out.summary = answer_markdown(experiment, out.answer);
  return out;
}

} // namespace specctl::run
