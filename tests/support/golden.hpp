#pragma once

// Test support: output checked against a golden file (doctest). Its own file in
// the library, so that only the suites that call it need doctest's runner.

#include <filesystem>
#include <string>

namespace specctl::test {

// CHECKs that `actual` equals the golden file's content. With SPECCTL_UPDATE_GOLDEN=1
// it rewrites the file (and its folder) first: read the diff before committing it.
void check_golden(const std::string& actual, const std::filesystem::path& golden);

} // namespace specctl::test
