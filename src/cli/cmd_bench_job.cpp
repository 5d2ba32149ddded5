// `specctl bench-job JOB.json` (hidden): a built-in benchmark that `specctl
// run` started on the GPU node beside the server. It writes its progress and
// its result where the job file says; SIGTERM stops it, and what it measured
// until then is still written.

#include "commands.hpp"

#include <specctl/run/bench_job.hpp>

#include <memory>

namespace specctl::cli {

Action setup_bench_job(CLI::App& command) {
  auto file = std::make_shared<std::string>();
  command.add_option("job", *file, "The job file specctl run wrote")->required();
  command.group("");
  return [file] {
    install_stop_handlers();
    return run::run_bench_job(*file, stop_flag());
  };
}

} // namespace specctl::cli
