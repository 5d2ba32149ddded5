#pragma once

// A fresh folder under $TMPDIR for one test, removed with everything in it.

#include <filesystem>
#include <string>

namespace specctl::test {

class TempDir {
public:
  // $TMPDIR/`prefix`-XXXXXX; throws std::runtime_error when it cannot be made.
  explicit TempDir(const std::string& prefix = "specctl-test");
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  ~TempDir();

  const std::filesystem::path& path() const { return m_path; }
  std::filesystem::path operator/(const std::string& name) const { return m_path / name; }

private:
  std::filesystem::path m_path;
};

} // namespace specctl::test
