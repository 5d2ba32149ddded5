#include <specctl/report/result_writer.hpp>

#include <specctl/report/results.hpp>
#include <specctl/util/atomic_file.hpp>
#include <specctl/util/bounded_read.hpp>

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
  m_doc["status"] = status_name(interrupted ? VariantStatus::interrupted : VariantStatus::failed);
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
  return m_doc.contains("status") && status() != VariantStatus::ok;
}

void ResultWriter::finish(const std::string& finished, double duration_s) {
  if (!failed()) {
    m_doc["status"] = status_name(VariantStatus::ok);
  }
  m_doc["finished"] = finished;
  m_doc["duration_s"] = duration_s;
}

void ResultWriter::judge_failed_requests(double max_failed_pct) {
  if (status() != VariantStatus::ok || !m_doc.contains("benchmarks") || !m_doc["benchmarks"].is_object()) {
    return;
  }
  for (const auto& [name, entry] : m_doc["benchmarks"].items()) {
    if (!entry.is_object() || entry.value("kind", "") == benchmark_kind_name(experiment::BenchmarkKind::command)) {
      continue;
    }
    if (auto why = too_many_failed(nlohmann::json(entry), max_failed_pct)) {
      // Keys are added after the loop: adding them may move what the loop looks at.
      std::string phase = "bench " + name;
      std::string message = *why + ": not measured";
      m_doc["status"] = status_name(VariantStatus::failed);
      m_doc["reason"] = fmt::format("{}: {}", phase, message);
      m_doc["failure"] = {{"phase", phase}, {"kind", error_kind_name(ErrorKind::failed)}, {"message", message}};
      return;
    }
  }
}

void ResultWriter::take_payload(const ordered& payload) {
  ordered host = m_doc["host"];
  ordered attempt = m_doc["attempt"];
  for (const auto& [key, value] : payload.items()) {
    m_doc[key] = value;
  }
  m_doc["host"] = std::move(host);
  m_doc["attempt"] = std::move(attempt);
}

void ResultWriter::complete_on_resume(std::string why) {
  m_doc["status"] = status_name(VariantStatus::ok);
  m_doc.erase("reason");
  m_doc.erase("failure");
  warn(std::move(why));
}

ordered& ResultWriter::at(std::string_view key) {
  if (key == "status" || key == "reason" || key == "failure") {
    throw std::logic_error(fmt::format("result.json's \"{}\" is set by ResultWriter's own methods", key));
  }
  return m_doc[std::string(key)];
}

std::expected<ResultWriter, Error> ResultWriter::read(const std::filesystem::path& path) {
  auto text = util::read_regular_file(path, util::k_max_result_bytes, "a result file");
  if (!text) {
    return std::unexpected(Error(fmt::format("{}: {}", path.string(), text.error().reason), ErrorKind::bad_input));
  }
  auto doc = ordered::parse(*text, nullptr, false);
  if (!doc.is_object()) {
    return std::unexpected(
        Error(fmt::format("{}: not a result (no JSON object)", path.string()), ErrorKind::bad_input));
  }
  return ResultWriter(Adopt{}, std::move(doc));
}

std::string ResultWriter::text() const {
  return m_doc.dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n";
}

bool ResultWriter::write(const std::filesystem::path& path, util::WriteFailures& failures) const {
  return failures.write(path, text());
}

std::expected<void, Error> ResultWriter::write(const std::filesystem::path& path) const {
  return util::write_file_atomic(path, text());
}

bool ResultWriter::write_progress(const std::filesystem::path& path, const std::string& reason,
                                  util::WriteFailures& failures) const {
  ResultWriter progress(Adopt{}, m_doc);
  progress.m_doc["status"] = status_name(VariantStatus::interrupted);
  progress.m_doc["reason"] = reason;
  return progress.write(path, failures);
}

} // namespace specctl::report
