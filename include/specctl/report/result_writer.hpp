#pragma once

// The one writer of a variant's result.json (its layout: results.hpp). The
// variant run, the Slurm follower, the scheduler, resume and tune all build and
// write the file through it: its status, reason and failure are set here and
// nowhere else, and the fields and the names of kinds are spelled in one place.

#include <specctl/experiment/experiment.hpp>
#include <specctl/report/variant_status.hpp>
#include <specctl/util/error.hpp>

#include <expected>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

namespace specctl::util {
class WriteFailures;
}

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
  // A result.json written before (resume, a reused tune trial), carried on.
  static std::expected<ResultWriter, Error> read(const std::filesystem::path& path);

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
  // What result.json says; failed before finish() or fail().
  VariantStatus status() const { return status_of(m_doc); }

  // A finished variant whose benchmark has more than max_failed_pct of its
  // requests failed is failed by the rule of too_many_failed (results.hpp): its
  // figures stay, and --resume measures that benchmark again. The only place
  // the failure share fails a variant.
  void judge_failed_requests(double max_failed_pct);
  // A Slurm job's own result.json, measured on the node: its fields (status,
  // reason and failure among them) replace this one's, but for host and attempt.
  void take_payload(const ordered& payload);
  // An interrupted result whose every benchmark was measured, completed by
  // --resume (which stopped the server since): ok, with `why` as a warning.
  void complete_on_resume(std::string why);

  // The other fields (cleanup, load, server, slot, slurm, telemetry, ...): any
  // key but status, reason and failure, which only the methods above set.
  ordered& at(std::string_view key);
  const ordered& doc() const { return m_doc; }

  // The file, atomically. A failed write is recorded in `failures` (a full disk
  // loses nothing else) and returns false.
  bool write(const std::filesystem::path& path, util::WriteFailures& failures) const;
  std::expected<void, Error> write(const std::filesystem::path& path) const;
  // The result so far, on disk the moment a benchmark ends so that a kill loses
  // nothing measured: as this one, but interrupted with `reason`, until the
  // variant's final result replaces it.
  bool write_progress(const std::filesystem::path& path, const std::string& reason,
                      util::WriteFailures& failures) const;

private:
  struct Adopt {};
  ResultWriter(Adopt, ordered doc) : m_doc(std::move(doc)) {}
  std::string text() const;

  ordered m_doc;
};

} // namespace specctl::report
