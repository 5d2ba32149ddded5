#pragma once

#include <specctl/util/atomic_file.hpp>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string_view>
#include <vector>

namespace specctl::run {

// The run's append-only log of what happened, one JSON object per line, each
// fsynced before the run moves on: the record a resumed run trusts and the
// story a person reads the morning after. Entries carry "t" (UTC, ms),
// "event" and, for a variant's events, "variant". Safe from several threads.
class Journal {
public:
  static constexpr const char* k_file_name = "journal.jsonl";

  // Opens (or continues) DIR/journal.jsonl. Throws specctl::Error when it cannot.
  // An entry that cannot be written (a full disk) goes to `failures`, which stops
  // the run from launching more; without `failures` it throws specctl::Error.
  explicit Journal(const std::filesystem::path& dir, util::WriteFailures* failures = nullptr);

  void record(std::string_view event, nlohmann::json fields = nlohmann::json::object());

private:
  util::AppendFile m_file;
  util::WriteFailures* m_failures = nullptr;
};

// The entries of a journal, oldest first. A torn last line (the writer was
// killed mid-write) is skipped; `torn` counts skipped lines.
std::vector<nlohmann::json> read_journal(const std::filesystem::path& dir, int* torn = nullptr);

// "2026-11-29T20:01:31.123Z".
std::string utc_timestamp(std::chrono::system_clock::time_point when);

} // namespace specctl::run
