#pragma once

// Private to src/run: what the runner shares with each variant it runs.

#include "retry.hpp"

#include <specctl/experiment/connect.hpp>
#include <specctl/experiment/experiment.hpp>
#include <specctl/experiment/plan.hpp>
#include <specctl/remote/host.hpp>
#include <specctl/report/result_writer.hpp>
#include <specctl/report/results.hpp>
#include <specctl/run/display.hpp>
#include <specctl/run/journal.hpp>
#include <specctl/run/runner.hpp>
#include <specctl/server/lifecycle.hpp>
#include <specctl/util/atomic_file.hpp>

#include <atomic>
#include <filesystem>
#include <fmt/format.h>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>

namespace specctl::run::detail {

// What src/run measures time with, and the JSON it reads and writes (ordered:
// result documents keep their keys in the order written).
using Clock = std::chrono::steady_clock;
using json = nlohmann::json;
using ordered = nlohmann::ordered_json;

// Sleeps, waking early when `stop` is set. True when stopped.
bool sleep_or_stop(util::Duration duration, const std::atomic<bool>* stop);

class HostPool {
public:
  explicit HostPool(const experiment::Experiment& experiment) : m_experiment(experiment) {}

  // Connects outside the lock: hosts of a pool connect at once, and a slow one
  // holds up no other. Each host is used by one variant at a time.
  std::expected<remote::Host*, Error> get(const std::string& name) {
    experiment::HostSpec spec;
    {
      std::lock_guard lock(m_mutex);
      if (auto it = m_hosts.find(name); it != m_hosts.end()) {
        return it->second.get();
      }
      // A GPU slot ("node1#1") is its host, on a connection of its own: slots run at once.
      if (const auto* machine = experiment::machine_of(m_experiment, name)) {
        spec = *machine;
      } else if (!name.empty() && name != "local") {
        return std::unexpected(
            Error(fmt::format("no host named \"{}\" in the experiment", name), ErrorKind::bad_input));
      }
    }
    auto host = experiment::connect_host(spec);
    if (!host) {
      return std::unexpected(host.error());
    }
    std::lock_guard lock(m_mutex);
    auto& slot = m_hosts[name];
    if (!slot) {
      slot = std::move(*host);
    }
    return slot.get();
  }

  // Forgets a connection that failed for good, so the next get() opens a new one.
  void drop(const std::string& name) {
    std::lock_guard lock(m_mutex);
    m_hosts.erase(name);
  }

private:
  const experiment::Experiment& m_experiment;
  std::mutex m_mutex;
  std::map<std::string, std::unique_ptr<remote::Host>> m_hosts;
};

// provenance.json: what was run where, rewritten atomically as it grows.
class Provenance {
public:
  Provenance(std::filesystem::path path, const experiment::Experiment& experiment, util::WriteFailures& failures)
      : m_path(std::move(path)), m_failures(failures) {
    std::ifstream in(m_path);
    if (in) {
      auto earlier = nlohmann::json::parse(in, nullptr, false);
      if (earlier.is_object()) {
        m_doc = earlier;
      }
    }
    m_doc["format"] = "specctl-provenance";
    m_doc["version"] = report::k_results_version;
    m_doc["specctl_version"] = SPECCTL_VERSION;
    m_doc["experiment"] = {
        {"name", experiment.name}, {"file", experiment.file}, {"content_hash", experiment.content_hash}};
    if (!m_doc.contains("hosts")) {
      m_doc["hosts"] = nlohmann::json::object();
    }
    if (!m_doc.contains("variants")) {
      m_doc["variants"] = nlohmann::json::object();
    }
  }

  bool has_host(const std::string& name) {
    std::lock_guard lock(m_mutex);
    return m_doc["hosts"].contains(name);
  }
  void set_host(const std::string& name, nlohmann::json facts) {
    std::lock_guard lock(m_mutex);
    m_doc["hosts"][name] = std::move(facts);
    write_locked();
  }
  std::optional<std::string> engine_version(const std::string& key) {
    std::lock_guard lock(m_mutex);
    if (auto it = m_versions.find(key); it != m_versions.end()) {
      return it->second;
    }
    return std::nullopt;
  }
  void set_engine_version(const std::string& key, std::string version) {
    std::lock_guard lock(m_mutex);
    m_versions[key] = std::move(version);
  }
  void set_variant(const std::string& name, nlohmann::json entry) {
    std::lock_guard lock(m_mutex);
    m_doc["variants"][name] = std::move(entry);
    write_locked();
  }

private:
  void write_locked() {
    m_failures.write(m_path, m_doc.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n");
  }
  std::filesystem::path m_path;
  util::WriteFailures& m_failures;
  std::mutex m_mutex;
  nlohmann::json m_doc = nlohmann::json::object();
  std::map<std::string, std::string> m_versions;
};

// The login nodes of the experiment's Slurm clusters, as hosts that run one
// command at a time: every job of a cluster asks Slurm through one connection.
// A lost SSH connection is dropped and reopened by the next command.
class SlurmLogins {
public:
  explicit SlurmLogins(HostPool& pool) : m_pool(pool) {}
  // The host that runs a cluster's Slurm commands: the experiment's host
  // `login_name`, or this machine for "".
  remote::Host& login(const std::string& login_name);

private:
  class Serial;
  HostPool& m_pool;
  std::mutex m_mutex;
  std::map<std::string, std::unique_ptr<remote::Host>> m_hosts;
};

// Everything a variant's run shares with the sweep.
struct VariantContext {
  const experiment::Experiment& experiment;
  const RunOptions& options;
  const report::ResultPaths& paths;
  Journal& journal;
  Display& display;
  HostPool& pool;
  Provenance& provenance;
  SlurmLogins& slurm;
  // Every failure to write the run's files: after the first, no variant starts.
  util::WriteFailures& failures;
  // This run, as its servers record it: another run's cleanup never touches them while it lives.
  const server::RunOwner& owner;
  // Resuming: every Slurm job the earlier run's journal names. A job of this
  // run that Slurm knows and the journal does not was submitted just before
  // the run was killed.
  const std::set<std::string>* journaled_jobs = nullptr;
  // Resuming: by variant, the benchmarks an earlier attempt measured completely
  // (its result.json's entries with status ok). They are kept, not run again.
  const std::map<std::string, nlohmann::ordered_json>* measured = nullptr;
};

// A Slurm job an earlier, killed run submitted and never saw finish: a resumed
// run follows it instead of submitting the variant again.
struct Adoption {
  std::string job_id;
  std::string job_dir;
  int attempt = 1;
};

// What one attempt at a variant ended with: its result (status ok, failed or
// interrupted), and whether its failure was transient (retry.hpp).
struct Attempted {
  report::ResultWriter result;
  bool transient = false;
};

// One attempt at a variant on `node` (its host, or a member of its pool), from
// connect to teardown.
Attempted run_variant(const VariantContext& context, const experiment::PlannedVariant& planned, const std::string& node,
                      int index, int total, int attempt);

// One attempt at a variant on a Slurm host: a batch job that runs `specctl job`
// on the node Slurm picks, followed until Slurm says it ended (src/run/slurm_run.cpp).
// With `adopt`, the job an earlier run submitted is followed instead.
Attempted run_slurm_variant(const VariantContext& context, const experiment::PlannedVariant& planned,
                            const experiment::HostSpec& host, int index, int total, int attempt,
                            const std::optional<Adoption>& adopt);

// The jobs of Slurm hosts that `entries` (an earlier run's journal) submitted
// and never recorded an end for, by variant.
std::map<std::string, Adoption> unfinished_slurm_jobs(const std::vector<nlohmann::json>& entries);
// Every job id the journal names.
std::set<std::string> journaled_slurm_jobs(const std::vector<nlohmann::json>& entries);

// A variant to run and its 1-based position in the sweep.
struct Job {
  const experiment::PlannedVariant* planned = nullptr;
  int index = 0;
  std::optional<Adoption> adopt;
};

// Called (under the scheduler's lock, one at a time) with each variant's final
// result document: ok, failed after its last attempt, or interrupted.
using FinishedFn = std::function<void(report::ResultWriter& result)>;

// Runs the jobs on the hosts they may use: a variant's host, or any member of
// its pool, one variant per host at a time and all hosts at once. A transient
// failure is tried again (on another member when there is one, after a backoff
// otherwise); a pool member that fails k_node_failures variants in a row for
// reasons of its own is taken out, and variants left without a host fail.
// Returns when every job finished, or at Ctrl-C or --fail-fast: whether the sweep was
// interrupted. The ok and failed variants are counted by `finished`'s caller, from the
// results it is given (the one place that sees a result's final status).
bool run_jobs(const VariantContext& context, std::vector<Job> jobs, int total, const FinishedFn& finished);

} // namespace specctl::run::detail
