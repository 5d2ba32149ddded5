#pragma once

// One owner per result folder: a run (or a tuning) holds flock(2) on DIR/.owner for
// as long as it lives, so a second `--resume DIR`, or a run into DIR, is refused
// while the first is alive, naming it; the lock dies with its process (a kill -9
// included), so a folder whose run is gone is free again at once.

#include <specctl/util/error.hpp>

#include <expected>
#include <filesystem>
#include <string>

namespace specctl::run::detail {

class FolderOwnership {
public:
  // Takes DIR (created if missing, unless `create` is false: a folder to resume) for this process, recording `owner`
  // (who it is: pid, host, since) in DIR/.owner. Taking a folder this process already holds succeeds (a tuning's trials
  // run inside it). Fails, naming the holder, while another process holds it.
  static std::expected<FolderOwnership, Error> take(const std::filesystem::path& dir, const std::string& owner,
                                                    bool create = true);

  FolderOwnership(FolderOwnership&& other) noexcept;
  FolderOwnership& operator=(FolderOwnership&&) = delete;
  FolderOwnership(const FolderOwnership&) = delete;
  FolderOwnership& operator=(const FolderOwnership&) = delete;
  ~FolderOwnership();

private:
  explicit FolderOwnership(std::string key) : m_key(std::move(key)) {}
  // The folder's canonical path; empty once moved from.
  std::string m_key;
};

} // namespace specctl::run::detail
