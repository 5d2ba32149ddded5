#pragma once

// Test support: whole files in and out, byte for byte.

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace specctl::test {

// The file's bytes; empty when it is missing or unreadable.
std::string read_file(const std::filesystem::path& path);

// The lines of `text`, without their ends.
std::vector<std::string> lines_of(const std::string& text);

// Replaces the file's content with `content`.
void write_file(const std::filesystem::path& path, std::string_view content);

} // namespace specctl::test
