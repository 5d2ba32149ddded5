#pragma once

// Test support: whole files in and out, byte for byte.

#include <filesystem>
#include <string>
#include <string_view>

namespace specctl::test {

// The file's bytes; empty when it is missing or unreadable.
std::string read_file(const std::filesystem::path& path);

// Replaces the file's content with `content`.
void write_file(const std::filesystem::path& path, std::string_view content);

} // namespace specctl::test
