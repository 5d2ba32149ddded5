#include "golden.hpp"

#include "files.hpp"

#include <doctest/doctest.h>

#include <cstdlib>

namespace specctl::test {

void check_golden(const std::string& actual, const std::filesystem::path& golden) {
  if (const char* update = std::getenv("SPECCTL_UPDATE_GOLDEN"); update != nullptr && std::string(update) == "1") {
    if (golden.has_parent_path()) {
      std::filesystem::create_directories(golden.parent_path());
    }
    write_file(golden, actual);
  }
  INFO("golden file: ", golden.string());
  CHECK(actual == read_file(golden));
}

} // namespace specctl::test
