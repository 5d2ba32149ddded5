#include <specctl/run/journal.hpp>
#include <specctl/util/bounded_read.hpp>

#include <cerrno>
#include <fmt/chrono.h>
#include <fmt/format.h>
#include <fstream>

namespace specctl::run {

namespace {

// True when the file is missing, empty or ends with a newline.
bool ends_whole(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in || in.tellg() <= 0) {
    return true;
  }
  in.seekg(-1, std::ios::end);
  return in.get() == '\n';
}

util::AppendFile open_or_throw(const std::filesystem::path& dir) {
  auto path = dir / Journal::k_file_name;
  if (auto ok = util::check_regular_file(path, util::k_max_journal_bytes, "a journal");
      !ok && ok.error().error != ENOENT) {
    throw Error(fmt::format("{}: cannot keep the journal: {}", path.string(), ok.error().reason), ErrorKind::bad_input);
  }
  bool torn = !ends_whole(path);
  auto file = util::AppendFile::open(path);
  if (!file) {
    throw file.error();
  }
  // A writer killed mid-line left half an entry: end it, so the next entry
  // starts on a line of its own instead of being lost with it.
  if (torn) {
    if (auto ended = file->append(""); !ended) {
      throw ended.error();
    }
  }
  return std::move(*file);
}

} // namespace

std::string utc_timestamp(std::chrono::system_clock::time_point when) {
  auto seconds = std::chrono::time_point_cast<std::chrono::seconds>(when);
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(when - seconds).count();
  return fmt::format("{:%Y-%m-%dT%H:%M:%S}.{:03d}Z", fmt::gmtime(std::chrono::system_clock::to_time_t(when)), ms);
}

Journal::Journal(const std::filesystem::path& dir, util::WriteFailures* failures)
    : m_file(open_or_throw(dir)), m_failures(failures) {}

void Journal::record(std::string_view event, nlohmann::json fields) {
  nlohmann::ordered_json entry;
  entry["t"] = utc_timestamp(std::chrono::system_clock::now());
  entry["event"] = event;
  for (auto& [key, value] : fields.items()) {
    entry[key] = value;
  }
  // dump's replacement mode: a log line with invalid UTF-8 must not stop the run.
  std::string line = entry.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  if (auto written = m_file.append(line); !written) {
    if (m_failures == nullptr) {
      throw written.error();
    }
    m_failures->record(written.error(), line.size() + 1);
  }
}

std::vector<nlohmann::json> read_journal(const std::filesystem::path& dir, int* torn) {
  std::vector<nlohmann::json> entries;
  int skipped = 0;
  // Not a regular file, or past the cap: no entries (opening the journal to write says why).
  if (!util::check_regular_file(dir / Journal::k_file_name, util::k_max_journal_bytes, "a journal")) {
    return entries;
  }
  std::ifstream in(dir / Journal::k_file_name);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) {
      continue;
    }
    auto entry = nlohmann::json::parse(line, nullptr, false);
    if (entry.is_discarded() || !entry.is_object()) {
      ++skipped;
      continue;
    }
    entries.push_back(std::move(entry));
  }
  if (torn != nullptr) {
    *torn = skipped;
  }
  return entries;
}

} // namespace specctl::run
