#include <specctl/run/runner.hpp>

#include "folder_owner.hpp"
#include "run_context.hpp"

#include <specctl/experiment/plan.hpp>
#include <specctl/report/history.hpp>
#include <specctl/report/report.hpp>
#include <specctl/report/result_writer.hpp>
#include <specctl/run/journal.hpp>
#include <specctl/server/lifecycle.hpp>
#include <specctl/util/atomic_file.hpp>
#include <specctl/util/bounded_read.hpp>
#include <specctl/util/size.hpp>
#include <specctl/util/text.hpp>

#include <algorithm>
#include <cmath>
#include <fmt/chrono.h>
#include <fmt/format.h>

#include <csignal>
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

// The report model of the folder, kept in memory for the line after each variant: the
// folder is read once, when the variants start (run.json, experiment.json and what an
// earlier run left), and each finished variant's result is added as it is written. The
// line has the cells the final table will show, from the results so far (the baseline may
// not have finished); re-reading the folder for each line read result.json n(n+1)/2 times.
class LiveReport {
public:
  explicit LiveReport(const std::filesystem::path& dir) {
    try {
      m_data = report::read_run(dir);
    } catch (const Error&) {
      // The lines go without figures; the final table says what the folder holds.
    }
  }

  FinishedRow finished_row(json result) {
    FinishedRow row;
    row.variant = result.value("variant", "");
    const auto status = report::status_of(result);
    row.ok = status == report::VariantStatus::ok;
    if (!row.ok) {
      row.reason = result.value("reason", std::string(report::status_name(status)));
    }
    if (result.contains("load") && result["load"].contains("load_s") && result["load"]["load_s"].is_number()) {
      row.load_s = result["load"]["load_s"].get<double>();
    }
    if (!m_data) {
      return row;
    }
    m_data->results[row.variant] = std::move(result);
    m_data->damaged.erase(row.variant);
    try {
      auto made = report::build_report(*m_data);
      for (auto& [column, value] : report::terminal_figures(made, row.variant)) {
        if (column != "load s") {
          row.figures.emplace_back(column, value);
        }
      }
    } catch (const Error&) {
      // The line goes without figures.
    }
    return row;
  }

private:
  std::optional<report::RunData> m_data;
};

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
  auto text = util::read_regular_file(path, util::k_max_yaml_bytes, "a YAML file of specctl's");
  if (!text) {
    throw Error(fmt::format("{}: cannot read: {}", path.string(), text.error().reason), ErrorKind::bad_input);
  }
  return std::move(*text);
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

std::uint64_t folder_bytes(const std::filesystem::path& dir) {
  std::uint64_t total = 0;
  std::error_code ec;
  for (std::filesystem::recursive_directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    if (it->is_regular_file(ec)) {
      total += it->file_size(ec);
    }
  }
  return total;
}

// The run could not write all its files: the first error, how much room it needs
// (what failed, and for each variant left, as much as a finished one took), and
// what is kept.
std::string write_failure_text(const report::ResultPaths& paths, const std::vector<std::string>& variants,
                               const util::WriteFailures& failures) {
  std::uint64_t finished_bytes = 0;
  int finished = 0;
  int left = 0;
  for (const auto& name : variants) {
    auto result = report::read_result(paths, name);
    if (result && report::status_of(*result) == report::VariantStatus::ok) {
      finished_bytes += folder_bytes(paths.variant_dir(name));
      ++finished;
    } else {
      ++left;
    }
  }
  std::uint64_t needs = failures.unwritten_bytes();
  if (finished > 0) {
    needs += finished_bytes / static_cast<std::uint64_t>(finished) * static_cast<std::uint64_t>(left);
  }
  auto free = util::free_bytes(paths.dir);
  auto inodes = util::free_inodes(paths.dir);
  std::string room;
  if (inodes && *inodes == 0) {
    // Bytes to spare say nothing when no file can be made.
    room = fmt::format(" (no free inode now: its file system can make no new file{})",
                       free ? fmt::format(", though {} are free", util::format_bytes(*free)) : "");
  } else if (free) {
    room = fmt::format(" ({} free now)", util::format_bytes(*free));
  }
  return fmt::format("{}; the run stopped launching variants and kept every file it wrote in {} ({} of {} variants "
                     "complete); it needs about {} more to finish{}, then: specctl run --resume {}",
                     failures.first()->what(), paths.dir.string(), finished, variants.size(),
                     util::format_bytes(std::max<std::uint64_t>(needs, 1)), room, paths.dir.string());
}

// Resuming, what an earlier attempt left of a variant: its result when complete
// (status ok, or every benchmark measured before a kill or Ctrl-C in the teardown,
// which is then written as complete), else nullopt, with the benchmarks it did
// measure in `measured` (a benchmark with more failed requests than the experiment
// allows is measured again). A damaged result.json is moved aside and said so.
std::optional<json> resumed_result(const experiment::Experiment& experiment, const experiment::Variant& variant,
                                   const report::ResultPaths& paths, Journal& journal, Display& display,
                                   std::map<std::string, ordered>& measured) {
  const std::string& name = variant.name;
  if (auto damage = report::result_damage(paths, name)) {
    auto aside = paths.result(name);
    aside += fmt::format(".damaged-{:%Y%m%d-%H%M%S}",
                         fmt::localtime(std::chrono::system_clock::to_time_t(std::chrono::system_clock::now())));
    std::error_code ec;
    std::filesystem::rename(paths.result(name), aside, ec);
    display.message(name, Severity::warning,
                    fmt::format("{}; {} and running the variant again", *damage,
                                ec ? "could not move it aside (" + ec.message() + ")" : "moved to " + aside.string()));
    journal.record("result_damaged", {{"variant", name}, {"damage", *damage}, {"moved_to", ec ? "" : aside.string()}});
    return std::nullopt;
  }
  auto kept = report::ResultWriter::read(paths.result(name));
  if (!kept) {
    return std::nullopt;
  }
  const auto status = kept->status();
  if (status == report::VariantStatus::ok) {
    return json(kept->doc());
  }
  ordered done = ordered::object();
  static const ordered none;
  const auto& benchmarks = kept->doc().contains("benchmarks") ? kept->doc()["benchmarks"] : none;
  for (const auto& bench : variant.benchmarks) {
    const auto* spec = experiment.find_benchmark(bench);
    if (spec == nullptr || !benchmarks.is_object() || !benchmarks.contains(bench)) {
      continue;
    }
    const auto& entry = benchmarks[bench];
    if (report::status_of(entry) == report::VariantStatus::ok && entry.value("spec", "") == spec->describe() &&
        !report::too_many_failed(json(entry), experiment.report.max_failed_pct)) {
      done[bench] = entry;
    }
  }
  if (done.empty()) {
    return std::nullopt;
  }
  if (status != report::VariantStatus::interrupted || done.size() < variant.benchmarks.size()) {
    measured[name] = std::move(done);
    return std::nullopt;
  }
  // Measured to the end; the run stopped in the teardown, which resume has done since.
  kept->complete_on_resume("every benchmark was measured before the run stopped during the teardown; "
                           "completed by --resume, which stopped the server");
  if (auto written = kept->write(paths.result(name)); !written) {
    throw written.error();
  }
  return json(kept->doc());
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
    // A long sweep names its first variants, not a line of hundreds of kilobytes.
    constexpr std::size_t k_named = 12;
    std::string listed =
        names.size() <= k_named
            ? util::join(names, ", ")
            : fmt::format("{}, ... and {} more",
                          util::join(std::vector<std::string>(names.begin(), names.begin() + k_named), ", "),
                          names.size() - k_named);
    lines.push_back(fmt::format("on {}{}: {}", host, spread ? " (" + spec->second.describe() + ")" : "", listed));
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

std::string stop_signal_text(int signal) {
  switch (signal) {
  case SIGHUP:
    return "SIGHUP: the terminal or SSH session that ran specctl closed";
  case SIGINT:
    return "SIGINT (Ctrl-C)";
  case SIGTERM:
    return "SIGTERM";
  default:
    return fmt::format("signal {}", signal);
  }
}

int RunOutcome::exit_code() const {
  if (write_error) {
    return k_exit_failures;
  }
  if (interrupted) {
    return stop_signal == SIGHUP ? k_exit_hangup : k_exit_interrupted;
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
    const auto& name = planned.variant->name;
    const bool listed = !options.variants ||
                        std::find(options.variants->begin(), options.variants->end(), name) != options.variants->end();
    if (listed && (!options.only || util::glob_match(*options.only, name))) {
      selected.push_back(&planned);
      outcome.variants.push_back(planned.variant->name);
    }
  }
  if (selected.empty()) {
    throw Error(fmt::format("--only \"{}\" matches no variant of {}", options.only.value_or(""), experiment.file),
                ErrorKind::bad_input);
  }

  auto owner = server::RunOwner::this_process(experiment.name, std::filesystem::absolute(options.out_dir).string());
  // Before anything in the folder is read or written: a live run writing it is never joined.
  auto ownership = detail::FolderOwnership::take(options.out_dir, owner.describe(), !options.resume);
  if (!ownership) {
    throw ownership.error();
  }
  std::error_code ec;
  if (options.resume) {
    auto text = util::read_regular_file(paths.run_info(), util::k_max_result_bytes, "a result file");
    auto earlier = text ? json::parse(*text, nullptr, false) : json();
    if (!earlier.is_object()) {
      throw Error(fmt::format("{}: no run to resume here ({})", options.out_dir.string(),
                              text ? "run.json is not a JSON object" : "run.json: " + text.error().reason),
                  ErrorKind::bad_input);
    }
    std::string hash = earlier.value("content_hash", "");
    if (hash != experiment.content_hash && !options.force) {
      throw Error(fmt::format("{}: the experiment file changed since this run started ({} then, {} now); resume "
                              "with --force to keep the earlier results anyway, or start a new run",
                              options.out_dir.string(), hash, experiment.content_hash),
                  ErrorKind::bad_input);
    }
    // Variants this run adds (a tuning's next trial) join the run's list, so the report has them.
    std::vector<std::string> listed;
    for (const auto& v : earlier.value("variants", json::array())) {
      if (v.is_string()) {
        listed.push_back(v.get<std::string>());
      }
    }
    bool grown = false;
    for (const auto& name : outcome.variants) {
      if (std::find(listed.begin(), listed.end(), name) == listed.end()) {
        listed.push_back(name);
        grown = true;
      }
    }
    if (grown) {
      earlier["variants"] = listed;
      write_or_throw(paths.run_info(), earlier.dump(2) + "\n");
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

  util::WriteFailures failures;
  Journal journal(options.out_dir, &failures);
  auto earlier_entries = options.resume ? read_journal(options.out_dir) : std::vector<json>{};
  journal.record(options.resume ? "run_resumed" : "run_started", {{"experiment", experiment.name},
                                                                  {"content_hash", experiment.content_hash},
                                                                  {"variants", outcome.variants},
                                                                  {"pid", static_cast<int>(::getpid())}});
  HostPool pool(experiment);
  Provenance provenance(paths.provenance(), experiment, failures);
  if (options.resume) {
    stop_leftovers(experiment, earlier_entries, pool, journal, display, options.state_dir);
  }

  std::optional<std::chrono::seconds> estimate;
  if (options.history_dir) {
    if (auto from_history =
            report::read_history(experiment.name, *options.history_dir, outcome.variants, options.out_dir)
                .estimate(outcome.variants)) {
      estimate = std::chrono::ceil<std::chrono::seconds>(*from_history);
    }
  }
  display.run_started(RunHeader{experiment.name, static_cast<int>(selected.size()), options.out_dir.string(), estimate,
                                outcome.variants, plan_lines(experiment, plan, selected)});

  detail::SlurmLogins logins(pool);
  auto journaled = detail::journaled_slurm_jobs(earlier_entries);
  std::map<std::string, ordered> measured;
  detail::VariantContext shared{experiment,
                                options,
                                paths,
                                journal,
                                display,
                                pool,
                                provenance,
                                logins,
                                failures,
                                owner,
                                options.resume ? &journaled : nullptr,
                                &measured};
  auto adoptable =
      options.resume ? detail::unfinished_slurm_jobs(earlier_entries) : std::map<std::string, detail::Adoption>{};
  int total = static_cast<int>(selected.size());
  LiveReport live(options.out_dir);
  std::vector<detail::Job> jobs;
  for (int k = 0; k < total; ++k) {
    const auto& planned = *selected[static_cast<std::size_t>(k)];
    const std::string& name = planned.variant->name;
    if (options.resume || options.keep_complete) {
      if (auto kept = resumed_result(experiment, *planned.variant, paths, journal, display, measured)) {
        ++outcome.kept;
        ++outcome.ok;
        journal.record("variant_kept", {{"variant", name}});
        display.variant_finished(live.finished_row(*kept));
        continue;
      }
    }
    std::optional<detail::Adoption> adopt;
    if (auto it = adoptable.find(name); it != adoptable.end()) {
      adopt = it->second;
    }
    jobs.push_back({&planned, k + 1, adopt});
  }
  outcome.interrupted = detail::run_jobs(shared, std::move(jobs), total, [&](report::ResultWriter& result) {
    result.judge_failed_requests(experiment.report.max_failed_pct);
    const auto& doc = result.doc();
    std::string name = doc.value("variant", "");
    const auto status = result.status();
    // Counted here, once, by the status the result is written with.
    if (status == report::VariantStatus::ok) {
      ++outcome.ok;
    } else if (status != report::VariantStatus::interrupted) {
      ++outcome.failed;
    }
    // Whatever happened, what was measured is kept; only "ok" counts as complete for --resume.
    result.write(paths.result(name), failures);
    journal.record("variant_finished",
                   {{"variant", name}, {"status", report::status_name(status)}, {"reason", doc.value("reason", "")}});
    if (status != report::VariantStatus::interrupted) {
      display.variant_finished(live.finished_row(json(doc)));
    }
  });

  // The report is made from the folder alone, exactly as `specctl report DIR` makes it.
  try {
    auto made = report::build_report(report::read_run(options.out_dir));
    report::write_reports(made, options.out_dir, experiment.report.formats);
    outcome.summary = report::to_terminal(made);
    if (!made.expectations.empty()) {
      outcome.summary += "\nExpectations:\n";
      for (const auto& e : made.expectations) {
        outcome.summary += fmt::format("- {} {}\n", e.reproduced ? "[met]" : "[MISSED]", report::expectation_text(e));
        outcome.missed_expectations += e.reproduced ? 0 : 1;
      }
    }
  } catch (const Error& e) {
    // A report that cannot be written is a write failure like the others: the
    // results are on disk, and `specctl report DIR` makes it once there is room.
    failures.record(e, 0);
  }
  if (failures.any()) {
    outcome.write_error = write_failure_text(paths, outcome.variants, failures);
    display.message("", Severity::error, *outcome.write_error);
  }
  json finished = {
      {"ok", outcome.ok}, {"failed", outcome.failed}, {"kept", outcome.kept}, {"interrupted", outcome.interrupted}};
  if (outcome.interrupted && options.stop_signal != nullptr && options.stop_signal->load() != 0) {
    outcome.stop_signal = options.stop_signal->load();
    // Said where it lasts: after a SIGHUP the terminal that would have shown it is gone.
    finished["stopped_by"] = stop_signal_text(outcome.stop_signal);
    display.message("", Severity::warning, fmt::format("stopped by {}", stop_signal_text(outcome.stop_signal)));
  }
  journal.record("run_finished", finished);
  display.run_finished(fmt::format("results: {}\n", options.out_dir.string()));
  return outcome;
}

} // namespace specctl::run
