#pragma once

// A fresh folder under $TMPDIR for one test, removed with everything in it.

#include <filesystem>
#include <string>
#include <string_view>

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
  // Writes `text` to the file `name` in the folder; returns its path. Throws std::runtime_error when it cannot.
  std::string write(const std::string& name, std::string_view text) const;
  // A folder `home` in it, made on first use: the HOME of the specctl a test starts, so that
  // nothing it or the system ssh writes (~/.specctl/ssh) reaches the real home.
  std::filesystem::path home() const;

private:
  std::filesystem::path m_path;
};

} // namespace specctl::test
