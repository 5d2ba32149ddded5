#include <specctl/cli/main.hpp>

#include "commands.hpp"

#include <specctl/util/error.hpp>

#include <array>
#include <fmt/format.h>
#include <iostream>

namespace specctl::cli {

namespace {

constexpr std::array k_commands = {
    CommandSpec{"validate", "Check experiment files without running anything", &setup_validate},
    CommandSpec{"plan", "Show exactly what a run would do: commands, env, cleanup, benchmarks, time", &setup_plan},
    CommandSpec{"run",
                "Run the sweep: every variant launched, benchmarked and torn down; results that survive the night",
                &setup_run},
    CommandSpec{"tune",
                "Find the best configuration per load under latency SLOs in the fewest model loads, and where "
                "speculation stops paying",
                &setup_tune},
    CommandSpec{"report", "Write the comparison report of a result folder: Markdown, CSV, JSON, HTML, JUnit",
                &setup_report},
    CommandSpec{"compare", "Compare two runs of the same experiment, variant by variant, with confidence intervals",
                &setup_compare},
    CommandSpec{"bench", "Benchmark a running OpenAI-compatible server: single stream, concurrency, request rate",
                &setup_bench},
    CommandSpec{"job", "Run one variant inside a Slurm allocation (the payload of the jobs `specctl run` submits)",
                &setup_job},
    CommandSpec{"bench-job", "Run a built-in benchmark on the GPU node (started there by `specctl run`)",
                &setup_bench_job},
    CommandSpec{"template", "Check a server template against a real log: what specctl would conclude from it",
                &setup_template},
};

constexpr const char* k_footer = R"(Exit codes: 0 ok, 1 a run finished with failures or missed expectations,
2 bad input, 129 interrupted by SIGHUP (the terminal closed), 130 interrupted.)";

} // namespace

int main(int argc, char** argv) {
  CLI::App app{"specctl: one YAML file in, an LLM-inference tuning sweep out.", "specctl"};
  app.set_version_flag("--version", std::string("specctl ") + SPECCTL_VERSION);
  app.require_subcommand(1);
  app.footer(k_footer);
  std::vector<std::pair<CLI::App*, Action>> actions;
  for (const auto& spec : k_commands) {
    CLI::App* command = app.add_subcommand(spec.name, spec.summary);
    actions.emplace_back(command, spec.setup(*command));
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::cerr << fmt::format("specctl: error: {}\nRun \"specctl --help\" for usage.\n", e.what());
    return k_exit_bad_input;
  }
  try {
    for (auto& [command, action] : actions) {
      if (command->parsed()) {
        return action();
      }
    }
    return k_exit_bad_input;
  } catch (const Error& e) {
    std::cerr << fmt::format("specctl: error: {}\n", e.what());
    switch (e.kind()) {
    case ErrorKind::bad_input:
      return k_exit_bad_input;
    case ErrorKind::interrupted:
      return k_exit_interrupted;
    default:
      return k_exit_failures;
    }
  } catch (const std::exception& e) {
    std::cerr << fmt::format("specctl: error: {}\n", e.what());
    return k_exit_failures;
  }
}

} // namespace specctl::cli
