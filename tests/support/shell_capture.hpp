#pragma once

// Test support: runs a command line through /bin/sh and splits its output at NUL
// bytes, for checking exactly which words a quoted shell line comes to.

#include <string>
#include <vector>

namespace specctl::test {

// The words of `text` that each end with a NUL byte (what `printf '%s\0'` prints);
// anything after the last NUL is dropped.
std::vector<std::string> split_nul(const std::string& text);

std::vector<std::string> run_shell(const std::string& line);

} // namespace specctl::test
