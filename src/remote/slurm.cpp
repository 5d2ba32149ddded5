#include <specctl/remote/slurm.hpp>

#include <specctl/util/parse.hpp>
#include <specctl/util/shell.hpp>
#include <specctl/util/text.hpp>

#include <algorithm>
#include <array>
#include <cctype>
#include <fmt/format.h>

namespace specctl::remote {

namespace {

// Slurm's final states (squeue(1), JOB STATE CODES). REQUEUED, SUSPENDED and
// the like are not final: the job runs again by itself.
constexpr std::array<std::string_view, 10> k_finished_states = {
    "COMPLETED", "FAILED",    "TIMEOUT",       "CANCELLED", "PREEMPTED",
    "NODE_FAIL", "BOOT_FAIL", "OUT_OF_MEMORY", "DEADLINE",  "SPECIAL_EXIT"};

} // namespace

std::string slurm_time(util::Duration duration) {
  auto minutes = std::chrono::ceil<std::chrono::minutes>(duration).count();
  minutes = std::max<decltype(minutes)>(minutes, 1);
  return fmt::format("{}-{:02}:{:02}:00", minutes / (24 * 60), minutes / 60 % 24, minutes % 60);
}

std::string sbatch_command(const SbatchRequest& request) {
  std::vector<std::string> argv = {"sbatch", "--parsable", "--job-name=" + request.job_name,
                                   "--output=" + request.output, "--chdir=" + request.workdir};
  if (request.partition) {
    argv.push_back("--partition=" + *request.partition);
  }
  if (request.account) {
    argv.push_back("--account=" + *request.account);
  }
  if (request.gpus) {
    argv.push_back(fmt::format("--gres=gpu:{}", *request.gpus));
  }
  if (request.time_limit) {
    argv.push_back("--time=" + slurm_time(*request.time_limit));
  }
  if (request.comment) {
    argv.push_back("--comment=" + *request.comment);
  }
  argv.insert(argv.end(), request.extra_args.begin(), request.extra_args.end());
  argv.push_back(request.script);
  return util::shell_join(argv);
}

std::optional<std::string> parse_parsable(std::string_view output) {
  auto text = util::trim(output);
  // Warnings may come first; the id is the last line.
  if (auto newline = text.rfind('\n'); newline != std::string::npos) {
    text = util::trim(text.substr(newline + 1));
  }
  auto id = text.substr(0, text.find(';'));
  if (id.empty() || !std::all_of(id.begin(), id.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    return std::nullopt;
  }
  return id;
}

bool is_finished_state(std::string_view state) {
  return std::find(k_finished_states.begin(), k_finished_states.end(), state) != k_finished_states.end();
}

bool JobInfo::finished() const {
  return is_finished_state(state);
}

std::optional<JobInfo> parse_scontrol_job(std::string_view line) {
  JobInfo job;
  std::string last_key;
  std::size_t at = 0;
  while (at < line.size()) {
    auto begin = line.find_first_not_of(" \t\r\n", at);
    if (begin == std::string_view::npos) {
      break;
    }
    auto end = line.find_first_of(" \t\r\n", begin);
    auto word = line.substr(begin, end == std::string_view::npos ? std::string_view::npos : end - begin);
    at = end == std::string_view::npos ? line.size() : end;
    auto eq = word.find('=');
    // A key is a word of letters and digits before "=".
    bool is_key = eq != std::string_view::npos && eq > 0 &&
                  std::all_of(word.begin(), word.begin() + static_cast<std::ptrdiff_t>(eq),
                              [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == ':'; });
    if (is_key) {
      last_key = std::string(word.substr(0, eq));
      job.fields[last_key] = std::string(word.substr(eq + 1));
    } else if (!last_key.empty()) {
      job.fields[last_key] += " " + std::string(word);
    }
  }
  auto get = [&](const char* key) {
    auto it = job.fields.find(key);
    return it == job.fields.end() ? std::string() : it->second;
  };
  job.id = get("JobId");
  job.state = get("JobState");
  if (job.id.empty() || job.state.empty()) {
    return std::nullopt;
  }
  job.reason = get("Reason");
  job.exit_code = get("ExitCode");
  job.nodes = get("NodeList");
  job.run_time = get("RunTime");
  job.time_limit = get("TimeLimit");
  job.restarts = util::parse_number<int>(get("Restarts")).value_or(0);
  return job;
}

std::expected<std::string, Error> SlurmClient::submit(const SbatchRequest& request) {
  auto ran = m_host.exec(sbatch_command(request), k_slurm_command_timeout);
  if (!ran) {
    return std::unexpected(ran.error());
  }
  if (ran->timed_out) {
    return std::unexpected(Error(fmt::format("{}: sbatch did not answer within {}", m_host.describe(),
                                             util::format_duration(k_slurm_command_timeout)),
                                 ErrorKind::timed_out));
  }
  auto id = ran->exit_code == 0 ? parse_parsable(ran->out) : std::nullopt;
  if (!id) {
    std::string why = util::first_line(ran->err.empty() ? ran->out : ran->err);
    return std::unexpected(Error(fmt::format("{}: sbatch refused the job (exit code {}): {}", m_host.describe(),
                                             ran->exit_code, why.empty() ? "no output" : why)));
  }
  return *id;
}

std::expected<std::optional<JobInfo>, Error> SlurmClient::query(const std::string& job_id) {
  auto ran = m_host.exec(util::shell_join({"scontrol", "show", "job", "--oneliner", job_id}), k_slurm_command_timeout);
  if (!ran) {
    return std::unexpected(ran.error());
  }
  if (ran->timed_out) {
    return std::unexpected(Error(fmt::format("{}: scontrol did not answer about job {} within {}", m_host.describe(),
                                             job_id, util::format_duration(k_slurm_command_timeout)),
                                 ErrorKind::timed_out));
  }
  if (ran->exit_code != 0) {
    // The controller forgets finished jobs after MinJobAge.
    if ((ran->err + ran->out).find("Invalid job id") != std::string::npos) {
      return std::optional<JobInfo>{};
    }
    return std::unexpected(Error(fmt::format("{}: scontrol show job {} failed (exit code {}): {}", m_host.describe(),
                                             job_id, ran->exit_code, util::first_line(ran->err + ran->out))));
  }
  auto job = parse_scontrol_job(util::first_line(ran->out));
  if (!job) {
    return std::unexpected(Error(fmt::format("{}: cannot read scontrol's answer about job {}: \"{}\"",
                                             m_host.describe(), job_id, util::first_line(ran->out))));
  }
  return job;
}

std::expected<void, Error> SlurmClient::cancel(const std::string& job_id) {
  auto ran = m_host.exec(util::shell_join({"scancel", job_id}), k_slurm_command_timeout);
  if (!ran) {
    return std::unexpected(ran.error());
  }
  if (ran->exit_code != 0 || ran->timed_out) {
    return std::unexpected(Error(fmt::format("{}: scancel {} failed (exit code {}): {}", m_host.describe(), job_id,
                                             ran->exit_code, util::first_line(ran->err + ran->out))));
  }
  return {};
}

std::expected<std::vector<std::pair<std::string, std::string>>, Error>
SlurmClient::jobs_named(const std::string& job_name) {
  auto ran =
      m_host.exec(util::shell_join({"squeue", "--noheader", "--states=all", "--name=" + job_name, "--format=%i|%k"}),
                  k_slurm_command_timeout);
  if (!ran) {
    return std::unexpected(ran.error());
  }
  if (ran->exit_code != 0 || ran->timed_out) {
    return std::unexpected(Error(fmt::format("{}: squeue --name={} failed (exit code {}): {}", m_host.describe(),
                                             job_name, ran->exit_code, util::first_line(ran->err + ran->out))));
  }
  std::vector<std::pair<std::string, std::string>> jobs;
  std::size_t at = 0;
  const std::string& out = ran->out;
  while (at < out.size()) {
    auto end = out.find('\n', at);
    auto line = util::trim(std::string_view(out).substr(at, end == std::string::npos ? std::string::npos : end - at));
    at = end == std::string::npos ? out.size() : end + 1;
    auto bar = line.find('|');
    if (bar != std::string::npos) {
      jobs.emplace_back(line.substr(0, bar), line.substr(bar + 1));
    }
  }
  return jobs;
}

} // namespace specctl::remote
