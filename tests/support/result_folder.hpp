#pragma once

// Reading a result folder of `specctl run` back in end-to-end tests.

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace specctl::test {

// A JSON file, or null when it is missing or torn.
nlohmann::json read_json(const std::filesystem::path& path);

// The run's journal entries in the order they were appended; torn lines skipped.
std::vector<nlohmann::json> journal(const std::filesystem::path& out);

// The journal entries whose "event" is `event`, in order.
std::vector<nlohmann::json> journal_events(const std::filesystem::path& out, const std::string& event);

} // namespace specctl::test
