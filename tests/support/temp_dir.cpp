#include "temp_dir.hpp"

#include "files.hpp"

#include <cstdlib>
#include <stdexcept>

namespace specctl::test {

TempDir::TempDir(const std::string& prefix) {
  std::string pattern = (std::filesystem::temp_directory_path() / (prefix + "-XXXXXX")).string();
  if (::mkdtemp(pattern.data()) == nullptr) {
    throw std::runtime_error("mkdtemp failed for " + pattern);
  }
  m_path = pattern;
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(m_path, ec);
}

std::string TempDir::write(const std::string& name, std::string_view text) const {
  const auto path = m_path / name;
  write_file(path, text);
  return path.string();
}

std::filesystem::path TempDir::home() const {
  const auto path = m_path / "home";
  std::filesystem::create_directories(path);
  return path;
}

} // namespace specctl::test
