#pragma once

// Every file specctl reads whole is first checked to be a regular file (a folder, a
// FIFO or /dev/zero in its place is refused, never read or waited on) and no larger
// than a cap its caller names: a damaged or hostile file is a clear error, not an
// exception from the C++ library, a hang or an exhausted memory.

#include <cstdint>
#include <expected>
#include <filesystem>
#include <string>

namespace specctl::util {

// Caps of the files specctl reads.
inline constexpr std::uint64_t k_max_yaml_bytes = 16ull << 20;    // experiment files, templates
inline constexpr std::uint64_t k_max_result_bytes = 256ull << 20; // result.json, run.json, tune.json
inline constexpr std::uint64_t k_max_journal_bytes = 1ull << 30;  // journal.jsonl
inline constexpr std::uint64_t k_max_dataset_bytes = 4ull << 30;  // datasets, prompt files

struct ReadRefusal {
  // errno of a failed open or read (ENOENT: there is no such file); 0 when the file
  // was refused for its kind or its size.
  int error = 0;
  // "it is a directory", "it is a FIFO", "it is 1.2 GiB, more than the 256.0 MiB ...".
  std::string reason;
};

// Why `path` may not be read (kind or size), or nothing; follows symbolic links.
// `what` names the file's kind in the size refusal ("a result file").
std::expected<void, ReadRefusal> check_regular_file(const std::filesystem::path& path, std::uint64_t max_bytes,
                                                    const std::string& what);

// The whole content of a regular file of at most `max_bytes`.
std::expected<std::string, ReadRefusal> read_regular_file(const std::filesystem::path& path, std::uint64_t max_bytes,
                                                          const std::string& what);

} // namespace specctl::util
