#pragma once

// The one writer of a variant's result.json (its layout: results.hpp). The
// variant run, the Slurm follower and the scheduler all write through it, so
// the fields and the names of kinds are spelled in one place.

#include <specctl/experiment/experiment.hpp>
#include <specctl/util/error.hpp>

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

namespace specctl::report {

// "timed_out", "bad_input", "interrupted", "unreachable", "failed": a failure's "kind".
std::string_view error_kind_name(ErrorKind kind);
// The kind a name stands for; "failed" for a name it does not know.
ErrorKind error_kind_named(std::string_view name);
// "single_stream", "concurrency", "rate", "command": a benchmark entry's "kind".
std::string_view benchmark_kind_name(experiment::BenchmarkKind kind);

class ResultWriter {
public:
  using ordered = nlohmann::ordered_json;

  // What every attempt's result starts with.
  struct Start {
    std::string variant;
    std::string description;
    std::string host;
    int attempt = 1;
    // UTC, as the journal writes it.
    std::string started;
  };

  // A result with the format, version, the start's fields and empty phases,
  // benchmarks, flags and warnings.
  explicit ResultWriter(const Start& start);

  void phase(const std::string& name, double seconds);
  void benchmark(const std::string& name, ordered entry);
  void flag(std::string text);
  void warn(std::string text);
  // Failed, or interrupted when the error says so: "reason" is "PHASE: first
  // line of the message", "failure" keeps all of it with its kind and the log's
  // last lines, and any earlier "failure" (a Slurm job's payload's) as
  // "job_failure".
  void fail(const std::string& phase, const Error& error, std::vector<std::string> log_tail = {});
  bool failed() const;
  // "finished" and "duration_s"; "ok" unless failed.
  void finish(const std::string& finished, double duration_s);

  // The other fields (cleanup, load, server, slot, slurm, ...).
  ordered& doc() { return m_doc; }
  const ordered& doc() const { return m_doc; }

private:
  ordered m_doc;
};

// A finished variant whose benchmark has more than max_failed_pct of its
// requests failed is failed by the rule of too_many_failed (results.hpp): its
// figures stay, and --resume measures that benchmark again.
void fail_on_failed_requests(nlohmann::ordered_json& result, double max_failed_pct);

} // namespace specctl::report
