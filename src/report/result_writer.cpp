#include <specctl/report/result_writer.hpp>

#include <specctl/report/results.hpp>

#include <array>
#include <fmt/format.h>
#include <utility>

namespace specctl::report {

namespace {

using ordered = nlohmann::ordered_json;

constexpr std::array<std::pair<ErrorKind, std::string_view>, 5> k_error_kinds = {{
    {ErrorKind::failed, "failed"},
    {ErrorKind::timed_out, "timed_out"},
    {ErrorKind::bad_input, "bad_input"},
    {ErrorKind::interrupted, "interrupted"},
    {ErrorKind::unreachable, "unreachable"},
}};

// By experiment::BenchmarkKind.
constexpr std::array<std::string_view, 4> k_benchmark_kinds = {"single_stream", "concurrency", "rate", "command"};

} // namespace

std::string_view error_kind_name(ErrorKind kind) {
  for (const auto& [k, name] : k_error_kinds) {
    if (k == kind) {
      return name;
    }
  }
  return "failed";
}

ErrorKind error_kind_named(std::string_view name) {
  for (const auto& [kind, n] : k_error_kinds) {
    if (n == name) {
      return kind;
    }
  }
  return ErrorKind::failed;
}

std::string_view benchmark_kind_name(experiment::BenchmarkKind kind) {
  return k_benchmark_kinds.at(static_cast<std::size_t>(kind));
}

ResultWriter::ResultWriter(const Start& start) {
  m_doc["format"] = k_result_format;
  m_doc["version"] = k_results_version;
  m_doc["variant"] = start.variant;
  m_doc["description"] = start.description;
  m_doc["host"] = start.host;
  m_doc["attempt"] = start.attempt;
  m_doc["started"] = start.started;
  m_doc["phases"] = ordered::object();
  m_doc["benchmarks"] = ordered::object();
  m_doc["flags"] = ordered::array();
  m_doc["warnings"] = ordered::array();
}

void ResultWriter::phase(const std::string& name, double seconds) {
  m_doc["phases"][name] = seconds;
}

void ResultWriter::benchmark(const std::string& name, ordered entry) {
  m_doc["benchmarks"][name] = std::move(entry);
}

void ResultWriter::flag(std::string text) {
  if (!m_doc["flags"].is_array()) {
    m_doc["flags"] = ordered::array();
  }
  m_doc["flags"].push_back(std::move(text));
}

void ResultWriter::warn(std::string text) {
  if (!m_doc["warnings"].is_array()) {
    m_doc["warnings"] = ordered::array();
  }
  m_doc["warnings"].push_back(std::move(text));
}

void ResultWriter::fail(const std::string& phase, const Error& error, std::vector<std::string> log_tail) {
  const bool interrupted = error.kind() == ErrorKind::interrupted;
  const std::string message = error.what();
  m_doc["status"] = interrupted ? "interrupted" : "failed";
  // The first line is the reason; the rest (log excerpts) stays in "failure".
  m_doc["reason"] = fmt::format("{}: {}", phase, message.substr(0, message.find('\n')));
  ordered failure = {{"phase", phase}, {"kind", error_kind_name(error.kind())}, {"message", message}};
  if (!log_tail.empty()) {
    failure["log_tail"] = std::move(log_tail);
  }
  // A Slurm job's payload's own failure (a crash while loading, say) stays beside the verdict.
  if (m_doc.contains("failure") && m_doc["failure"].is_object()) {
    failure["job_failure"] = std::move(m_doc["failure"]);
  }
  m_doc["failure"] = std::move(failure);
}

bool ResultWriter::failed() const {
  auto it = m_doc.find("status");
  return it != m_doc.end() && it->is_string() && *it != "ok";
}

void ResultWriter::finish(const std::string& finished, double duration_s) {
  if (!failed()) {
    m_doc["status"] = "ok";
  }
  m_doc["finished"] = finished;
  m_doc["duration_s"] = duration_s;
}

void fail_on_failed_requests(ordered& result, double max_failed_pct) {
  if (result.value("status", "") != "ok" || !result.contains("benchmarks") || !result["benchmarks"].is_object()) {
    return;
  }
  std::optional<std::string> failed;
  std::string failed_why;
  for (const auto& [name, entry] : result["benchmarks"].items()) {
    if (!entry.is_object() || entry.value("kind", "") == benchmark_kind_name(experiment::BenchmarkKind::command)) {
      continue;
    }
    auto counts = benchmark_counts(nlohmann::json(entry));
    if (auto why = too_many_failed(counts.requests, counts.failed, max_failed_pct)) {
      failed = std::string(name);
      failed_why = *why;
      break;
    }
  }
  if (!failed) {
    return;
  }
  // Written after the loop: adding keys to `result` may move what the loop looked at.
  std::string message = failed_why + ": not measured";
  result["status"] = "failed";
  result["reason"] = fmt::format("bench {}: {}", *failed, message);
  result["failure"] = {
      {"phase", "bench " + *failed}, {"kind", error_kind_name(ErrorKind::failed)}, {"message", message}};
}

} // namespace specctl::report
