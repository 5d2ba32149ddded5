#pragma once

// Slurm as specctl uses it: sbatch to submit, scontrol to ask, scancel to stop.
// Every command is a shell line on a remote::Host (this machine, or a login node
// over SSH), built with util::shell_quote. Slurm's own answers are the truth:
// the job id from `sbatch --parsable`, JobState/Reason/ExitCode from
// `scontrol show job --oneliner`; nothing is inferred from a process's exit.

#include <specctl/remote/host.hpp>
#include <specctl/util/duration.hpp>
#include <specctl/util/error.hpp>

#include <expected>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace specctl::remote {

// How long one Slurm client command may take: they wait at most MessageTimeout
// per call, so only a hung controller gets there.
inline constexpr util::Duration k_slurm_command_timeout = std::chrono::seconds{60};

struct SbatchRequest {
  std::string script; // the batch script's path, as the login node sees it
  std::string job_name;
  std::string output;  // --output (may hold %j)
  std::string workdir; // --chdir
  std::optional<std::string> partition;
  std::optional<std::string> account;
  std::optional<int> gpus; // --gres=gpu:N
  std::optional<util::Duration> time_limit;
  std::vector<std::string> extra_args; // one argv word each
  // --comment: what lets a resumed run find a job it never recorded.
  std::optional<std::string> comment;
};

// "sbatch --parsable --job-name=... ... SCRIPT", every value quoted.
std::string sbatch_command(const SbatchRequest& request);

// Slurm's --time for a duration: "D-HH:MM:SS", rounded up to whole minutes
// (Slurm's own resolution).
std::string slurm_time(util::Duration duration);

// The job id `sbatch --parsable` printed ("12" or "12;cluster"); nullopt for anything else.
std::optional<std::string> parse_parsable(std::string_view output);

struct JobInfo {
  std::string id;
  // JobState without the "+" or reason that may follow ("CANCELLED by 0").
  std::string state;
  std::string reason;
  // "0:0": exit code and signal of the batch script.
  std::string exit_code;
  std::string nodes;
  std::string run_time;
  std::string time_limit;
  int restarts = 0;
  // Every Key=Value of scontrol's line, for what the above leaves out.
  std::map<std::string, std::string> fields;

  // No state after it: the job will not run (again) by itself.
  bool finished() const;
  // The job still holds (or waits for) resources: PENDING, RUNNING, COMPLETING, ...
  bool active() const { return !finished(); }
};

// One job of `scontrol show job --oneliner`. Values may hold spaces
// (Command=, Comment=): a word without "=" belongs to the value before it.
std::optional<JobInfo> parse_scontrol_job(std::string_view line);

// Whether Slurm considers this state final.
bool is_finished_state(std::string_view state);

// Asks Slurm about jobs through a host. Not safe for concurrent use: the
// caller serializes (an SSH host is one connection).
class SlurmClient {
public:
  explicit SlurmClient(Host& host) : m_host(host) {}

  std::expected<std::string, Error> submit(const SbatchRequest& request);
  // nullopt when Slurm no longer knows the job (purged after MinJobAge).
  std::expected<std::optional<JobInfo>, Error> query(const std::string& job_id);
  std::expected<void, Error> cancel(const std::string& job_id);
  // The jobs named `job_name` in any state Slurm still remembers
  // (`squeue --states=all`), as (id, comment) pairs.
  std::expected<std::vector<std::pair<std::string, std::string>>, Error> jobs_named(const std::string& job_name);

  Host& host() { return m_host; }

private:
  Host& m_host;
};

} // namespace specctl::remote
