#include <specctl/run/runner.hpp>

#include "run_context.hpp"

#include <specctl/experiment/plan.hpp>
#include <specctl/report/report.hpp>
#include <specctl/run/journal.hpp>
#include <specctl/server/lifecycle.hpp>
#include <specctl/util/atomic_file.hpp>
#include <specctl/util/text.hpp>

#include <algorithm>
#include <cmath>
#include <fmt/chrono.h>
#include <fmt/format.h>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <unistd.h>

namespace specctl::run {

namespace {

using nlohmann::json;
using ordered = nlohmann::ordered_json;
using detail::HostPool;
using detail::Provenance;

FinishedRow finished_row(const experiment::Experiment& experiment, const json& result) {
  FinishedRow row;
  row.variant = result.value("variant", "");
  row.ok = result.value("status", "") == "ok";
  if (!row.ok) {
    row.reason = result.value("reason", result.value("status", ""));
  }
  if (result.contains("load") && result["load"].contains("load_s") && result["load"]["load_s"].is_number()) {
    row.load_s = result["load"]["load_s"].get<double>();
  }
  for (auto& [column, value] : report::summary_figures(experiment, result)) {
    if (column != "load s") {
      row.figures.emplace_back(column, value);
    }
  }
  return row;
}

void write_or_throw(const std::filesystem::path& path, std::string_view content) {
  if (auto written = util::write_file_atomic(path, content); !written) {
    throw written.error();
  }
}

void mkdirs_or_throw(const std::filesystem::path& dir) {
  if (auto made = util::make_dirs_durable(dir); !made) {
    throw made.error();
  }
}

std::string read_text(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

// Servers an earlier, killed run started and never tore down: stopped by tag
// before anything else runs, on the hosts it used.
void stop_leftovers(const experiment::Experiment& experiment, const std::vector<json>& entries, HostPool& pool,
                    Journal& journal, Display& display, const std::string& state_dir) {
  struct Leftover {
    std::string variant, host, tag, run_dir;
    int pid = 0;
  };
  std::map<std::string, Leftover> open;
  for (const auto& e : entries) {
    std::string event = e.value("event", "");
    std::string tag = e.value("tag", "");
    if (tag.empty()) {
      continue;
    }
    if (event == "launching") {
      open[tag] = Leftover{e.value("variant", ""), e.value("host", "local"), tag,
                           e.value("state_dir", state_dir) + "/" + tag, 0};
    } else if (event == "launched" && open.contains(tag)) {
      open[tag].pid = e.value("pid", 0);
      open[tag].run_dir = e.value("run_dir", open[tag].run_dir);
    } else if (event == "torn_down") {
      open.erase(tag);
    }
  }
  for (const auto& [tag, left] : open) {
    auto host = pool.get(left.host);
    if (!host) {
      display.message(left.variant, Severity::warning,
                      fmt::format("cannot reach {} to stop the server {} an earlier run left: {}", left.host, tag,
                                  host.error().what()));
      continue;
    }
    server::ServerConfig config;
    if (const auto* v = experiment.find_variant(left.variant)) {
      config = v->server;
    }
    auto reporter = display.reporter_for(left.variant);
    server::RunningServer server{tag, remote::RunFiles{left.run_dir}, left.pid, 0};
    auto report = server::teardown(**host, server, config, *reporter);
    if (!report) {
      display.message(left.variant, Severity::warning,
                      fmt::format("could not stop the server {} an earlier run left: {}", tag, report.error().what()));
      continue;
    }
    display.message(left.variant, Severity::info,
                    fmt::format("stopped the server {} that the interrupted run left on {}", tag, left.host));
    journal.record("torn_down", {{"variant", left.variant}, {"tag", tag}, {"by", "resume"}});
  }
}

// From the durations earlier runs recorded for these variants; nullopt when none did.
std::optional<std::chrono::seconds> estimate_from_history(const std::string& experiment,
                                                          const std::filesystem::path& history,
                                                          const std::filesystem::path& current,
                                                          const std::vector<std::string>& variants) {
  std::error_code ec;
  if (!std::filesystem::is_directory(history, ec)) {
    return std::nullopt;
  }
  std::vector<std::filesystem::path> runs;
  for (const auto& entry : std::filesystem::directory_iterator(history, ec)) {
    if (!entry.is_directory() || entry.path() == current) {
      continue;
    }
    // Only runs of the same experiment: a sibling folder may hold anything.
    std::ifstream in(report::ResultPaths{entry.path()}.run_info());
    auto info = in ? json::parse(in, nullptr, false) : json();
    if (info.is_object() && info.value("experiment", "") == experiment) {
      runs.push_back(entry.path());
    }
  }
  // Newest first: folder names are timestamps.
  std::sort(runs.rbegin(), runs.rend());
  std::map<std::string, double> known;
  for (const auto& run : runs) {
    report::ResultPaths paths{run};
    for (const auto& name : variants) {
      if (known.contains(name)) {
        continue;
      }
      if (auto result = report::read_result(paths, name); result && result->value("status", "") == "ok" &&
                                                  result->contains("duration_s") && (*result)["duration_s"].is_number()) {
        known[name] = (*result)["duration_s"].get<double>();
      }
    }
  }
  if (known.empty()) {
    return std::nullopt;
  }
  double sum = 0;
  for (const auto& [name, seconds] : known) {
    sum += seconds;
  }
  double mean = sum / static_cast<double>(known.size());
  double total = sum + mean * static_cast<double>(variants.size() - std::min(variants.size(), known.size()));
  return std::chrono::seconds{static_cast<long>(std::ceil(total))};
}

// What the run will do, in a few lines for its header.
std::vector<std::string> plan_lines(const experiment::Experiment& experiment, const experiment::Plan& plan,
                                    const std::vector<const experiment::PlannedVariant*>& selected) {
  std::map<std::string, std::vector<std::string>> by_host;
  std::vector<std::size_t> which;
  std::set<std::string> benchmarks;
  for (const auto* planned : selected) {
    const auto& host = planned->variant->server.host;
    by_host[host.empty() ? "local" : host].push_back(planned->variant->name);
    which.push_back(static_cast<std::size_t>(planned - plan.variants.data()));
    benchmarks.insert(planned->variant->benchmarks.begin(), planned->variant->benchmarks.end());
  }
  // Hosts work at once: the bound is the longest host's share.
  util::Duration bound{0};
  for (const auto& h : experiment::make_schedule(experiment, plan.variants, which)) {
    bound = std::max(bound, h.busy);
  }
  std::vector<std::string> lines;
  for (const auto& [host, names] : by_host) {
    auto spec = experiment.hosts.find(host);
    // Where a variant may land is worth a word: a pool's members, a cluster, GPU slots.
    bool spread = spec != experiment.hosts.end() &&
                  (spec->second.kind == experiment::HostKind::pool ||
                   spec->second.kind == experiment::HostKind::slurm || !spec->second.slots.empty());
    lines.push_back(fmt::format("on {}{}: {}", host, spread ? " (" + spec->second.describe() + ")" : "",
                                util::join(names, ", ")));
  }
  for (const auto& b : experiment.benchmarks) {
    if (benchmarks.contains(b.name)) {
      lines.push_back(fmt::format("benchmark {}: {}", b.name, b.describe()));
    }
  }
  lines.push_back(fmt::format("at most {} if every wait runs to its timeout", util::format_duration(bound)));
  return lines;
}

} // namespace

int RunOutcome::exit_code() const {
  if (interrupted) {
    return k_exit_interrupted;
  }
  return failed > 0 || missed_expectations > 0 ? k_exit_failures : k_exit_ok;
}

std::filesystem::path default_out_dir(const experiment::Experiment& experiment,
                                      std::chrono::system_clock::time_point now) {
  return std::filesystem::path("results") / experiment.name /
         fmt::format("{:%Y%m%d-%H%M%S}", fmt::localtime(std::chrono::system_clock::to_time_t(now)));
}

RunOutcome run_experiment(const experiment::Experiment& experiment, const RunOptions& options, Display& display) {
  report::ResultPaths paths{options.out_dir};
  RunOutcome outcome;
  outcome.dir = options.out_dir;

  auto plan = experiment::make_plan(experiment, options.render);
  std::vector<const experiment::PlannedVariant*> selected;
  for (const auto& planned : plan.variants) {
    if (!options.only || util::glob_match(*options.only, planned.variant->name)) {
      selected.push_back(&planned);
      outcome.variants.push_back(planned.variant->name);
    }
  }
  if (selected.empty()) {
    throw Error(fmt::format("--only \"{}\" matches no variant of {}", options.only.value_or(""), experiment.file),
                ErrorKind::bad_input);
  }

  std::error_code ec;
  if (options.resume) {
    std::ifstream in(paths.run_info());
    auto earlier = in ? json::parse(in, nullptr, false) : json();
    if (!earlier.is_object()) {
      throw Error(fmt::format("{}: no run to resume here (no readable run.json)", options.out_dir.string()),
                  ErrorKind::bad_input);
    }
    std::string hash = earlier.value("content_hash", "");
    if (hash != experiment.content_hash && !options.force) {
      throw Error(fmt::format("{}: the experiment file changed since this run started ({} then, {} now); resume "
                              "with --force to keep the earlier results anyway, or start a new run",
                              options.out_dir.string(), hash, experiment.content_hash),
                  ErrorKind::bad_input);
    }
  } else if (std::filesystem::exists(paths.run_info(), ec)) {
    throw Error(fmt::format("{}: already holds a run; continue it with --resume {} or choose another --out",
                            options.out_dir.string(), options.out_dir.string()),
                ErrorKind::bad_input);
  }

  mkdirs_or_throw(options.out_dir / "variants");
  for (const auto* planned : selected) {
    mkdirs_or_throw(paths.variant_dir(planned->variant->name));
  }
  if (!options.resume) {
    write_or_throw(paths.experiment_copy(), read_text(experiment.file));
    write_or_throw(paths.resolved(), experiment::plan_to_json(plan).dump(2) + "\n");
    write_or_throw(paths.run_info(), json{{"format", report::k_run_format},
                                          {"version", report::k_results_version},
                                          {"experiment", experiment.name},
                                          {"file", std::filesystem::absolute(experiment.file).string()},
                                          {"content_hash", experiment.content_hash},
                                          {"specctl_version", SPECCTL_VERSION},
                                          {"started", utc_timestamp(std::chrono::system_clock::now())},
                                          {"variants", outcome.variants}}
                                             .dump(2) +
                                         "\n");
  }

  Journal journal(options.out_dir);
  auto earlier_entries = options.resume ? read_journal(options.out_dir) : std::vector<json>{};
  journal.record(options.resume ? "run_resumed" : "run_started",
                 {{"experiment", experiment.name},
                  {"content_hash", experiment.content_hash},
                  {"variants", outcome.variants},
                  {"pid", static_cast<int>(::getpid())}});
  HostPool pool(experiment);
  Provenance provenance(paths.provenance(), experiment);
  if (options.resume) {
    stop_leftovers(experiment, earlier_entries, pool, journal, display, options.state_dir);
  }

  std::optional<std::chrono::seconds> estimate;
  if (options.history_dir) {
    estimate = estimate_from_history(experiment.name, *options.history_dir, options.out_dir, outcome.variants);
  }
  display.run_started(RunHeader{experiment.name, static_cast<int>(selected.size()), options.out_dir.string(), estimate,
                                outcome.variants, plan_lines(experiment, plan, selected)});

  detail::SlurmLogins logins(pool);
  auto journaled = detail::journaled_slurm_jobs(earlier_entries);
  detail::VariantContext shared{experiment, options, paths,  journal,
                                display,    pool,    provenance, logins, options.resume ? &journaled : nullptr};
  auto adoptable = options.resume ? detail::unfinished_slurm_jobs(earlier_entries) : std::map<std::string, detail::Adoption>{};
  int total = static_cast<int>(selected.size());
  std::vector<detail::Job> jobs;
  for (int k = 0; k < total; ++k) {
    const auto& planned = *selected[static_cast<std::size_t>(k)];
    const std::string& name = planned.variant->name;
    if (options.resume) {
      if (auto kept = report::read_result(paths, name); kept && kept->value("status", "") == "ok") {
        ++outcome.kept;
        ++outcome.ok;
        journal.record("variant_kept", {{"variant", name}});
        display.variant_finished(finished_row(experiment, *kept));
        continue;
      }
    }
    std::optional<detail::Adoption> adopt;
    if (auto it = adoptable.find(name); it != adoptable.end()) {
      adopt = it->second;
    }
    jobs.push_back({&planned, k + 1, adopt});
  }
  auto counts = detail::run_jobs(shared, std::move(jobs), total, [&](const ordered& result) {
    std::string name = result.value("variant", "");
    std::string status = result.value("status", "failed");
    // Whatever happened, what was measured is kept; only "ok" counts as complete for --resume.
    write_or_throw(paths.result(name), result.dump(2, ' ', false, json::error_handler_t::replace) + "\n");
    journal.record("variant_finished", {{"variant", name}, {"status", status}, {"reason", result.value("reason", "")}});
    if (status != "interrupted") {
      display.variant_finished(finished_row(experiment, json(result)));
    }
  });
  outcome.ok += counts.ok;
  outcome.failed += counts.failed;
  outcome.interrupted = counts.interrupted;

  // The report is made from the folder alone, exactly as `specctl report DIR` makes it.
  auto made = report::build_report(report::read_run(options.out_dir));
  report::write_reports(made, options.out_dir, experiment.report.formats);
  outcome.summary = report::format_summary(experiment, paths, outcome.variants);
  if (!made.expectations.empty()) {
    outcome.summary += "\nExpectations:\n";
    for (const auto& e : made.expectations) {
      outcome.summary += fmt::format("- {} {}\n", e.reproduced ? "[met]" : "[MISSED]", report::expectation_text(e));
      outcome.missed_expectations += e.reproduced ? 0 : 1;
    }
  }
  journal.record("run_finished", {{"ok", outcome.ok}, {"failed", outcome.failed}, {"kept", outcome.kept},
                                  {"interrupted", outcome.interrupted}});
  display.run_finished(fmt::format("results: {}\n", options.out_dir.string()));
  return outcome;
}

} // namespace specctl::run
