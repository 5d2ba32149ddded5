#include "commands.hpp"

#include <specctl/experiment/connect.hpp>
#include <specctl/experiment/plan.hpp>
#include <specctl/report/history.hpp>
#include <specctl/run/runner.hpp>
#include <specctl/server/lifecycle.hpp>
#include <specctl/util/error.hpp>

#include <fmt/format.h>
#include <iostream>
#include <map>
#include <memory>

namespace specctl::cli {

namespace {

struct PlanOptions {
  std::string file;
  std::string history;
  bool json = false;
  bool probe = false;
  bool allow_large = false;
  std::string ssh;
};

// Connects to each variant's host and shows what its cleanup would do, touching nothing.
int probe(const experiment::Experiment& e) {
  std::map<std::string, std::unique_ptr<remote::Host>> hosts;
  util::StderrReporter reporter;
  int code = k_exit_ok;
  std::cout << "\nprobe (nothing is changed):\n";
  for (const auto& variant : e.variants) {
    const auto* pool = &e.hosts.at(variant.server.host);
    if (pool->kind == experiment::HostKind::slurm) {
      std::cout << fmt::format("  [{}] {}: runs as a Slurm job; its cleanup happens on the node Slurm picks\n",
                               variant.name, pool->name);
      continue;
    }
    // A pool's variant may run on any member: probe the first.
    const auto& spec = pool->kind == experiment::HostKind::pool ? e.hosts.at(pool->members.at(0)) : *pool;
    auto& host = hosts[spec.name];
    if (!host) {
      auto connected = experiment::connect_host(spec);
      if (!connected) {
        std::cout << fmt::format("  [{}] {}: {}\n", variant.name, spec.name, connected.error().what());
        code = k_exit_failures;
        continue;
      }
      host = std::move(*connected);
    }
    auto report = server::cleanup_before_launch(*host, variant.server, {.dry_run = true}, reporter);
    if (!report) {
      std::cout << fmt::format("  [{}] {}: {}\n", variant.name, host->describe(), report.error().what());
      code = k_exit_failures;
      continue;
    }
    if (report->actions.empty() && report->left_alone.empty()) {
      std::cout << fmt::format("  [{}] {}: nothing to clean up{}\n", variant.name, host->describe(),
                               report->gpus_checked ? "" : " (no nvidia-smi: GPUs not checked)");
    }
    for (const auto& action : report->actions) {
      std::cout << fmt::format("  [{}] {}: {}\n", variant.name, host->describe(), action);
    }
    for (const auto& left : report->left_alone) {
      std::cout << fmt::format("  [{}] {}: left alone: {}\n", variant.name, host->describe(), left);
    }
  }
  return code;
}

} // namespace

Action setup_plan(CLI::App& command) {
  auto options = std::make_shared<PlanOptions>();
  command.add_option("FILE", options->file, "Experiment file")->required();
  command.add_flag("--json", options->json, "Print the plan as JSON");
  command.add_option("--history", options->history,
                     "Folder of earlier result folders of this experiment, for the time from history (default "
                     "results/<name>, where run and tune write)");
  command.add_flag("--allow-large", options->allow_large, fmt::format("Accept more than {} variants", k_large_sweep));
  add_ssh_flag(command, options->ssh);
  command.add_flag("--probe", options->probe,
                   "Also connect to each host and show what cleanup would do there (kills nothing)");
  command.footer("Touches no host: it shows the exact command lines, environment, cleanup and benchmarks of every "
                 "variant, in run order, an upper bound of the sweep's wall time, and its time from earlier runs.");
  return [options] {
    auto experiment = load_or_report(options->file, options->allow_large, options->ssh);
    if (!experiment) {
      return k_exit_bad_input;
    }
    auto plan = experiment::make_plan(*experiment, server::RenderOptions{own_bindir()});
    // What earlier runs took, where `run` and `tune` put their result folders by default.
    std::vector<std::string> names;
    for (const auto& planned : plan.variants) {
      names.push_back(planned.variant->name);
    }
    auto history_dir = options->history.empty()
                           ? run::default_out_dir(*experiment, std::chrono::system_clock::now()).parent_path()
                           : std::filesystem::path(options->history);
    plan.history = report::read_history(experiment->name, history_dir, names);
    if (options->json) {
      auto j = experiment::plan_to_json(plan);
      if (experiment->tune) {
        j["tune"] = experiment::tune_plan_to_json(experiment::make_tune_plan(plan));
      }
      std::cout << j.dump(2) << '\n';
    } else if (experiment->tune) {
      // A tuning launches a few of its configurations, not the grid: the search's plan.
      std::cout << experiment::format_tune_plan(plan);
    } else {
      std::cout << experiment::format_plan(plan);
    }
    return options->probe ? probe(*experiment) : k_exit_ok;
  };
}

} // namespace specctl::cli
