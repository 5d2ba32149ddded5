// A variant on a Slurm cluster: the coordinator's side. The variant becomes a
// batch job whose payload is `specctl job` (src/cli/cmd_job.cpp), which runs
// the same lifecycle on the node Slurm picks, against that node as a local
// host, with the GPUs Slurm allocated, into a folder of its own under the
// cluster's shared work folder. Here the job is submitted, followed through
// `scontrol show job` until Slurm says it ended, and its result is taken
// back into the run's folder with Slurm's verdict: a time limit, a preemption
// or a cancellation is the variant's reason, whatever the payload wrote.

#include "run_context.hpp"

#include <specctl/remote/host_ops.hpp>
#include <specctl/remote/slurm.hpp>
#include <specctl/report/result_writer.hpp>
#include <specctl/report/results.hpp>
#include <specctl/util/hash.hpp>
#include <specctl/util/parse.hpp>
#include <specctl/util/shell.hpp>
#include <specctl/util/text.hpp>

#include <fmt/format.h>
#include <fstream>
#include <sstream>
#include <thread>

namespace specctl::run::detail {

namespace {

// After scancel, how long Slurm gets to end the job (its KillWait included).
constexpr util::Duration k_cancel_wait = std::chrono::minutes{2};
// How long Slurm may stay unreachable before the variant fails (the job may
// still run; --resume follows it again).
constexpr util::Duration k_lost_contact = std::chrono::minutes{10};
// How soon a Ctrl-C is noticed between two polls of Slurm.
constexpr auto k_stop_check = std::chrono::milliseconds{100};
// The most of a job's journal read per poll, and of its result.
constexpr std::size_t k_max_read = 16 * 1024 * 1024;

// A JSON document the job wrote; nullopt while it is not there (or not whole).
std::optional<json> read_remote_json(remote::Host& host, const std::string& path) {
  auto text = remote::read_file_from(host, path, 0, k_max_read);
  if (!text) {
    return std::nullopt;
  }
  auto doc = json::parse(*text, nullptr, false);
  if (!doc.is_object()) {
    return std::nullopt;
  }
  return doc;
}

// Where this run keeps its jobs' folders on the cluster.
std::string job_root(const VariantContext& c, const experiment::SlurmSpec& slurm) {
  auto out = std::filesystem::absolute(c.options.out_dir).lexically_normal();
  if (slurm.work_dir) {
    // One folder per run: a work folder is shared by every run of every experiment.
    auto stamp = out.filename().empty() ? out.parent_path().filename() : out.filename();
    return (std::filesystem::path(*slurm.work_dir) / (c.experiment.name + "-" + stamp.string())).string();
  }
  return (out / "slurm").string();
}

bool retried_on(const experiment::SlurmSpec& slurm, const std::string& state) {
  auto has = [&](experiment::SlurmRetry r) {
    return std::find(slurm.retry_on.begin(), slurm.retry_on.end(), r) != slurm.retry_on.end();
  };
  return (state == "PREEMPTED" && has(experiment::SlurmRetry::preempted)) ||
         (state == "NODE_FAIL" && has(experiment::SlurmRetry::node_fail)) ||
         (state == "BOOT_FAIL" && has(experiment::SlurmRetry::boot_fail)) ||
         (state == "TIMEOUT" && has(experiment::SlurmRetry::timeout));
}

class SlurmVariantRun {
public:
  SlurmVariantRun(const VariantContext& c, const experiment::PlannedVariant& planned, const experiment::HostSpec& host,
                  int index, int total, int attempt)
      : m_c(c), m_variant(*planned.variant), m_host(host), m_slurm(host.slurm), m_index(index), m_total(total),
        m_attempt(attempt), m_login(c.slurm.login(host.slurm.login)), m_client(m_login) {}

  Attempted run(const std::optional<Adoption>& adopt) {
    auto started = Clock::now();
    m_result.emplace(report::ResultWriter::Start{m_variant.name, m_variant.description, m_host.name, m_attempt,
                                                 utc_timestamp(std::chrono::system_clock::now())});
    bool transient = false;
    try {
      if (adopt) {
        m_job_id = adopt->job_id;
        m_job_dir = adopt->job_dir;
        m_c.journal.record(
            "slurm_adopted",
            {{"variant", m_variant.name}, {"job_id", m_job_id}, {"attempt", m_attempt}, {"job_dir", m_job_dir}});
        message(Severity::info, fmt::format("following Slurm job {}, which the interrupted run submitted", m_job_id));
      } else if (!adopt_unrecorded()) {
        submit();
      }
      follow();
      transient = conclude();
    } catch (const Error& e) {
      // A job never submitted may be tried again; one that may run must not be doubled.
      transient = detail::transient(m_phase, e) && m_job_id.empty();
      fail(m_phase, e);
    } catch (const std::exception& e) {
      fail(m_phase, Error(fmt::format("internal error: {}", e.what())));
    }
    m_result->finish(utc_timestamp(std::chrono::system_clock::now()), util::seconds_since(started));
    return {std::move(*m_result), transient};
  }

private:
  bool stopped() const { return m_c.options.stop != nullptr && m_c.options.stop->load(); }

  void phase(const std::string& name) {
    if (name != m_shown) {
      m_shown = name;
      m_c.display.phase(m_variant.name, m_index, m_total, name);
    }
  }

  void message(Severity severity, const std::string& text) { m_c.display.message(m_variant.name, severity, text); }

  std::string specctl_path() const {
    if (m_slurm.specctl) {
      return *m_slurm.specctl;
    }
    return (std::filesystem::path(m_c.options.render.specctl_bindir) / "specctl").string();
  }

  // The experiment file as the job reads it: the file itself when the
  // coordinator shares the cluster's filesystem, else a copy beside the jobs.
  std::string experiment_for_job(const std::string& root) {
    if (m_slurm.login.empty() || m_c.experiment.hosts.at(m_slurm.login).kind == experiment::HostKind::local) {
      return std::filesystem::absolute(m_c.experiment.file).lexically_normal().string();
    }
    std::ifstream in(m_c.experiment.file, std::ios::binary);
    std::ostringstream text;
    text << in.rdbuf();
    auto copy = root + "/experiment.yaml";
    if (auto written = remote::put_file(m_login, copy, text.str()); !written) {
      throw written.error();
    }
    return copy;
  }

  std::string job_name() const { return fmt::format("specctl-{}-{}", m_c.experiment.name, m_variant.name); }

  // "specctl:<run>:<attempt>": which run and attempt a job belongs to, whatever its journal says.
  std::string comment_prefix() const {
    return fmt::format("specctl:{}:",
                       util::fingerprint(std::filesystem::absolute(m_c.options.out_dir).lexically_normal().string()));
  }

  // A resumed run asks Slurm for this run's jobs of the variant that the
  // journal never recorded (the run was killed between sbatch and the
  // journal's fsync) and follows the newest instead of submitting again.
  bool adopt_unrecorded() {
    if (m_c.journaled_jobs == nullptr) {
      return false;
    }
    auto jobs = m_client.jobs_named(job_name());
    if (!jobs) {
      message(Severity::warning,
              fmt::format("cannot ask Slurm for jobs this run may have left: {}", jobs.error().what()));
      return false;
    }
    auto prefix = comment_prefix();
    std::optional<std::pair<long, int>> newest;
    for (const auto& [id, comment] : *jobs) {
      if (!comment.starts_with(prefix) || m_c.journaled_jobs->contains(id)) {
        continue;
      }
      auto number = util::parse_number<long>(id);
      auto attempt = util::parse_number<int>(std::string_view(comment).substr(prefix.size()));
      if (number && attempt && (!newest || *number > newest->first)) {
        newest = std::pair{*number, *attempt};
      }
    }
    if (!newest) {
      return false;
    }
    m_job_id = std::to_string(newest->first);
    m_attempt = newest->second;
    m_result->at("attempt") = m_attempt;
    m_job_dir = fmt::format("{}/{}/attempt-{}", job_root(m_c, m_slurm), m_variant.name, m_attempt);
    m_c.journal.record("slurm_adopted", {{"variant", m_variant.name},
                                         {"job_id", m_job_id},
                                         {"attempt", m_attempt},
                                         {"job_dir", m_job_dir},
                                         {"unrecorded", true}});
    message(Severity::info, fmt::format("following Slurm job {}, which the interrupted run submitted but never "
                                        "recorded",
                                        m_job_id));
    return true;
  }

  void submit() {
    m_phase = "submit";
    phase("submit");
    auto root = job_root(m_c, m_slurm);
    m_job_dir = fmt::format("{}/{}/attempt-{}", root, m_variant.name, m_attempt);
    auto file = experiment_for_job(root);
    std::string script = "#!/bin/bash\n";
    script += fmt::format("# specctl: variant {} of experiment {}, attempt {}\n", m_variant.name, m_c.experiment.name,
                          m_attempt);
    for (const auto& line : m_slurm.setup) {
      script += line + "\n";
    }
    script += "exec " +
              util::shell_join({specctl_path(), "job", file, "--variant", m_variant.name, "--dir", m_job_dir, "--hash",
                                m_c.experiment.content_hash}) +
              "\n";
    if (auto written = remote::put_file(m_login, m_job_dir + "/job.sh", script); !written) {
      throw written.error();
    }
    remote::SbatchRequest request;
    request.script = m_job_dir + "/job.sh";
    request.job_name = job_name();
    request.comment = comment_prefix() + std::to_string(m_attempt);
    request.output = m_job_dir + "/slurm-%j.out";
    request.workdir = m_job_dir;
    request.partition = m_slurm.partition;
    request.account = m_slurm.account;
    request.gpus = m_slurm.gpus;
    request.time_limit = m_slurm.time_limit;
    request.extra_args = m_slurm.sbatch_args;
    auto id = m_client.submit(request);
    if (!id) {
      throw id.error();
    }
    m_job_id = *id;
    // Before anything else: a coordinator killed from here on leaves a job
    // that --resume adopts.
    m_c.journal.record("slurm_submitted", {{"variant", m_variant.name},
                                           {"job_id", m_job_id},
                                           {"attempt", m_attempt},
                                           {"job_dir", m_job_dir},
                                           {"host", m_host.name},
                                           {"command", remote::sbatch_command(request)}});
    message(Severity::info, fmt::format("submitted as Slurm job {}", m_job_id));
  }

  // Polls until Slurm says the job ended; cancels it at Ctrl-C.
  void follow() {
    m_phase = "queued";
    auto last_contact = Clock::now();
    std::optional<Clock::time_point> cancelled_at;
    for (;;) {
      if (stopped() && !cancelled_at) {
        cancel();
        cancelled_at = Clock::now();
      }
      auto answer = m_client.query(m_job_id);
      if (!answer) {
        if (Clock::now() - last_contact > k_lost_contact) {
          throw Error(fmt::format("lost track of Slurm job {}: {} (it may still run; --resume follows it)", m_job_id,
                                  answer.error().what()),
                      ErrorKind::unreachable);
        }
      } else {
        last_contact = Clock::now();
        if (!*answer) {
          // Purged after MinJobAge: what the job wrote is all that is left.
          m_job = remote::JobInfo{};
          m_job->id = m_job_id;
          m_job->state = "UNKNOWN";
          m_job->reason = "Slurm no longer knows the job";
          return;
        }
        m_job = **answer;
        observe();
        if (m_job->finished()) {
          return;
        }
      }
      if (cancelled_at && Clock::now() - *cancelled_at > k_cancel_wait) {
        throw Error(fmt::format("Slurm job {} was still {} {} after scancel", m_job_id, m_job ? m_job->state : "there",
                                util::format_duration(k_cancel_wait)),
                    ErrorKind::interrupted);
      }
      // Ctrl-C is noticed within a tenth of a second, not a poll interval.
      auto wake = Clock::now() + std::chrono::duration_cast<Clock::duration>(m_slurm.poll);
      while (Clock::now() < wake && (cancelled_at || !stopped())) {
        std::this_thread::sleep_for(k_stop_check);
      }
    }
  }

  void cancel() {
    message(Severity::warning, fmt::format("cancelling Slurm job {}", m_job_id));
    if (auto done = m_client.cancel(m_job_id); !done) {
      message(Severity::warning, done.error().what());
    }
    m_c.journal.record("slurm_cancelled", {{"variant", m_variant.name}, {"job_id", m_job_id}});
  }

  // What the job is doing: its state, its node, and the phases its own journal tells.
  void observe() {
    const auto& job = *m_job;
    if (job.state == "PENDING") {
      phase(job.reason.empty() || job.reason == "None" ? fmt::format("queued as job {}", job.id)
                                                       : fmt::format("queued as job {} ({})", job.id, job.reason));
      return;
    }
    if (job.restarts != m_restarts) {
      // Requeued: the job starts its variant over, with a new journal.
      m_restarts = job.restarts;
      m_journal_offset = 0;
      m_job_phase.clear();
      m_running = false;
    }
    if (!m_running && job.state == "RUNNING") {
      m_running = true;
      m_c.journal.record("slurm_running", {{"variant", m_variant.name}, {"job_id", job.id}, {"node", job.nodes}});
    }
    auto journal = remote::read_file_from(m_login, m_job_dir + "/run/journal.jsonl", m_journal_offset, k_max_read);
    if (journal && !journal->empty()) {
      // Only whole lines; the rest is read at the next poll.
      auto end = journal->rfind('\n');
      if (end != std::string::npos) {
        m_journal_offset += end + 1;
        std::istringstream lines(journal->substr(0, end + 1));
        for (std::string line; std::getline(lines, line);) {
          auto entry = json::parse(line, nullptr, false);
          if (entry.is_object() && entry.value("event", "") == "phase_started") {
            m_job_phase = entry.value("phase", "");
          }
        }
      }
    }
    std::string where = job.nodes.empty() || job.nodes == "(null)" ? "" : " on " + job.nodes;
    std::string doing = m_job_phase.empty() ? job.state == "RUNNING" ? "starting" : job.state : m_job_phase;
    phase(fmt::format("{} (job {}{})", doing, job.id, where));
  }

  // The variant's result from the job's own and Slurm's verdict.
  // Whether the job ended in a state the experiment retries (retry_on): the
  // transient failures of a Slurm host.
  bool conclude() {
    const auto& job = *m_job;
    m_c.journal.record("slurm_finished", {{"variant", m_variant.name},
                                          {"job_id", job.id},
                                          {"state", job.state},
                                          {"reason", job.reason},
                                          {"exit_code", job.exit_code},
                                          {"node", job.nodes}});
    auto run_dir = m_job_dir + "/run";
    auto payload = read_remote_json(m_login, run_dir + "/variants/" + m_variant.name + "/result.json");
    if (payload) {
      // What the job measured is kept, whatever Slurm did to it after.
      m_result->take_payload(*payload);
    }
    ordered info = {
        {"job_id", job.id},    {"state", job.state},       {"reason", job.reason},         {"exit_code", job.exit_code},
        {"node", job.nodes},   {"run_time", job.run_time}, {"time_limit", job.time_limit}, {"restarts", job.restarts},
        {"job_dir", m_job_dir}};
    if (auto allocation = read_remote_json(m_login, m_job_dir + "/allocation.json")) {
      info["allocation"] = *allocation;
    }
    m_result->at("slurm") = info;
    bring_back(run_dir);

    std::string where = job.nodes.empty() || job.nodes == "(null)" ? "" : " on " + job.nodes;
    const bool has_status = payload && payload->contains("status");
    const bool payload_interrupted = has_status && report::status_of(*payload) == report::VariantStatus::interrupted;
    if (stopped() && (job.state == "CANCELLED" || payload_interrupted)) {
      fail("interrupted", Error(fmt::format("Slurm job {} cancelled at Ctrl-C", job.id), ErrorKind::interrupted));
      return false;
    }
    if (job.state == "TIMEOUT") {
      fail("slurm", Error(fmt::format("job {} reached its time limit ({}){}", job.id, job.time_limit, where),
                          ErrorKind::timed_out));
      return retried_on(m_slurm, job.state);
    }
    if (job.state == "PREEMPTED" || job.state == "NODE_FAIL" || job.state == "BOOT_FAIL") {
      std::string what = job.state == "PREEMPTED"   ? "was preempted"
                         : job.state == "NODE_FAIL" ? "lost its node"
                                                    : "could not boot its node";
      fail("slurm", Error(fmt::format("job {} {}{}", job.id, what, where)));
      return retried_on(m_slurm, job.state);
    }
    if (job.state == "CANCELLED") {
      fail("slurm", Error(fmt::format("job {} was cancelled outside specctl{}", job.id, where)));
      return false;
    }
    if (job.state == "OUT_OF_MEMORY" || job.state == "DEADLINE") {
      fail("slurm",
           Error(fmt::format("job {} ended {}{}", job.id,
                             job.state == "DEADLINE" ? "at its deadline" : "out of memory (host RAM: --mem)", where)));
      return false;
    }
    // COMPLETED, FAILED, or a job Slurm forgot: the payload's own verdict.
    if (!has_status) {
      fail("slurm", Error(fmt::format("job {} ended {} (exit code {}){} without a result; {}", job.id, job.state,
                                      job.exit_code.empty() ? "unknown" : job.exit_code, where, output_tail())));
      return false;
    }
    if (payload_interrupted) {
      fail("slurm", Error(fmt::format("job {} was stopped{} ({})", job.id, where, job.state)));
    }
    return false;
  }

  // The last line of the job's output, which says why a payload could not start.
  std::string output_tail() {
    auto ran = m_login.exec(fmt::format("tail -n 5 {}", util::shell_quote(m_job_dir + "/slurm-" + m_job_id + ".out")));
    if (!ran || ran->exit_code != 0 || ran->out.empty()) {
      return "the job wrote no output";
    }
    std::string text = ran->out;
    while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) {
      text.pop_back();
    }
    return "its output ends: " + text.substr(text.rfind('\n') == std::string::npos ? 0 : text.rfind('\n') + 1);
  }

  // The job's server log, request records and provenance, into the run's folder.
  void bring_back(const std::string& run_dir) {
    auto from = run_dir + "/variants/" + m_variant.name;
    auto listed = m_login.exec(fmt::format("cd {} 2>/dev/null && ls -1", util::shell_quote(from)));
    if (listed && listed->exit_code == 0) {
      std::istringstream names(listed->out);
      for (std::string name; std::getline(names, name);) {
        if (name == "server.log" || (name.starts_with("requests-") && name.ends_with(".jsonl"))) {
          auto copied =
              remote::copy_back(m_login, from + "/" + name, (m_c.paths.variant_dir(m_variant.name) / name).string());
          if (!copied) {
            warn(fmt::format("could not copy {} back from the job: {}", name, copied.error().what()));
          }
        }
      }
    }
    auto provenance = read_remote_json(m_login, run_dir + "/provenance.json");
    if (provenance) {
      auto node = m_job && !m_job->nodes.empty() ? m_job->nodes : std::string("node");
      if (provenance->contains("hosts") && (*provenance)["hosts"].contains("local")) {
        m_c.provenance.set_host(m_host.name + "/" + node, (*provenance)["hosts"]["local"]);
      }
      const auto& entry = report::dig(*provenance, {"variants", m_variant.name});
      if (entry.is_object()) {
        json copy = entry;
        copy["host"] = m_host.name + "/" + node;
        copy["slurm_job"] = m_job_id;
        m_c.provenance.set_variant(m_variant.name, copy);
      }
    }
  }

  void warn(const std::string& text) {
    m_result->warn(text);
    message(Severity::warning, text);
  }

  void fail(const std::string& phase, const Error& error) { m_result->fail(phase, error); }

  const VariantContext& m_c;
  const experiment::Variant& m_variant;
  const experiment::HostSpec& m_host;
  const experiment::SlurmSpec& m_slurm;
  int m_index;
  int m_total;
  int m_attempt;
  remote::Host& m_login;
  remote::SlurmClient m_client;
  std::optional<report::ResultWriter> m_result;
  std::string m_phase = "submit";
  std::string m_shown;
  std::string m_job_id;
  std::string m_job_dir;
  std::optional<remote::JobInfo> m_job;
  bool m_running = false;
  int m_restarts = 0;
  std::uint64_t m_journal_offset = 0;
  std::string m_job_phase;
};

} // namespace

Attempted run_slurm_variant(const VariantContext& context, const experiment::PlannedVariant& planned,
                            const experiment::HostSpec& host, int index, int total, int attempt,
                            const std::optional<Adoption>& adopt) {
  return SlurmVariantRun(context, planned, host, index, total, attempt).run(adopt);
}

} // namespace specctl::run::detail
