// `specctl job`: the payload of a Slurm job that `specctl run` submitted. It
// runs one variant of the experiment on this node (the one Slurm picked) as a
// local host, with the GPUs of the allocation, into DIR/run: a result folder of
// one variant, which the coordinating run reads back. Its exit code is Slurm's
// ExitCode; the verdict is in DIR/run/variants/NAME/result.json.

#include "commands.hpp"

#include <specctl/run/runner.hpp>
#include <specctl/util/atomic_file.hpp>
#include <specctl/util/error.hpp>
#include <specctl/util/parse.hpp>

#include <cstdlib>
#include <fmt/format.h>
#include <iostream>
#include <nlohmann/json.hpp>
#include <unistd.h>

namespace specctl::cli {

namespace {

struct JobArgs {
  std::string file;
  std::string variant;
  std::string dir;
  std::string hash;
};

std::string env_or_empty(const char* name) {
  const char* value = std::getenv(name);
  return value == nullptr ? std::string() : std::string(value);
}

// "0,1,3" as indices; nullopt for anything else (UUIDs, "NoDevFiles").
std::optional<std::vector<int>> gpu_indices(const std::string& text) {
  if (text.empty()) {
    return std::nullopt;
  }
  std::vector<int> ids;
  std::size_t at = 0;
  while (at <= text.size()) {
    auto comma = text.find(',', at);
    auto word = text.substr(at, comma == std::string::npos ? std::string::npos : comma - at);
    const auto id = word.size() <= 4 && word.find_first_not_of("0123456789") == std::string::npos
                        ? util::parse_number<int>(word)
                        : std::nullopt;
    if (!id) {
      return std::nullopt;
    }
    ids.push_back(*id);
    if (comma == std::string::npos) {
      break;
    }
    at = comma + 1;
  }
  return ids;
}

int run_job(const JobArgs& args) {
  auto loaded = load_or_report(args.file, /*allow_large=*/true);
  if (!loaded) {
    return k_exit_bad_input;
  }
  if (!args.hash.empty() && loaded->content_hash != args.hash) {
    throw Error(fmt::format("{}: the experiment file changed since the sweep started ({} then, {} now)", args.file,
                            args.hash, loaded->content_hash),
                ErrorKind::bad_input);
  }
  const auto* found = loaded->find_variant(args.variant);
  if (found == nullptr) {
    throw Error(fmt::format("{}: no variant \"{}\"", args.file, args.variant), ErrorKind::bad_input);
  }
  // This experiment, reduced to the variant, on this node, with the allocation's GPUs.
  experiment::Experiment job = *loaded;
  experiment::Variant variant = *found;
  variant.server.host = "local";
  std::string visible = env_or_empty("CUDA_VISIBLE_DEVICES");
  std::string job_gpus = env_or_empty("SLURM_JOB_GPUS");
  auto gpus = gpu_indices(!visible.empty() ? visible : job_gpus);
  if (gpus) {
    variant.server.gpus = gpus;
  }
  job.variants = {variant};
  // The coordinator writes the report of the whole sweep.
  job.report = {};
  job.report.formats = {};

  std::filesystem::path dir(args.dir);
  char hostname[256] = {};
  ::gethostname(hostname, sizeof hostname - 1);
  nlohmann::json allocation = {{"job_id", env_or_empty("SLURM_JOB_ID")},
                               {"node", env_or_empty("SLURMD_NODENAME")},
                               {"hostname", hostname},
                               {"cuda_visible_devices", visible},
                               {"slurm_job_gpus", job_gpus},
                               {"gpus", gpus ? nlohmann::json(*gpus) : nlohmann::json(nullptr)}};
  if (auto written = util::write_file_atomic(dir / "allocation.json", allocation.dump(2) + "\n"); !written) {
    throw written.error();
  }
  // A requeued job (preempted, node failure) starts its variant over.
  std::error_code ec;
  std::filesystem::remove_all(dir / "run", ec);

  run::RunOptions options;
  options.out_dir = dir / "run";
  options.retries = 0;
  options.render.specctl_bindir = own_bindir();
  // Each job its own: on a node shared with other jobs, cleanup must never
  // find another job's servers.
  options.state_dir = (dir / "state").string();
  options.stop = stop_flag();
  std::cout << fmt::format("specctl job: variant {} on {} (Slurm job {}), GPUs {}\n", variant.name, hostname,
                           allocation["job_id"].get<std::string>(),
                           gpus ? allocation["gpus"].dump() : std::string("as the node has them"))
            << std::flush;
  auto display = run::make_display(stdout, run::Verbosity::normal);
  install_stop_handlers();
  auto outcome = run::run_experiment(job, options, *display);
  std::cout << outcome.summary << std::flush;
  return outcome.exit_code();
}

} // namespace

Action setup_job(CLI::App& command) {
  auto args = std::make_shared<JobArgs>();
  command.add_option("file", args->file, "Experiment file")->required();
  command.add_option("--variant", args->variant, "The variant to run")->required();
  command.add_option("--dir", args->dir, "The job's folder on the shared filesystem")->required();
  command.add_option("--hash", args->hash, "Refuse to run when the experiment's content hash is not this");
  command.footer("Not for people: `specctl run` submits it as a Slurm batch job for each variant on a slurm host.");
  return [args] { return run_job(*args); };
}

} // namespace specctl::cli
