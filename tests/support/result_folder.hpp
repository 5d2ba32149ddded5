#pragma once

// Reading a result folder of `specctl run` back in end-to-end tests.

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

namespace specctl::test {

// A JSON file, or null when it is missing or torn.
inline nlohmann::json read_json(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  auto doc = nlohmann::json::parse(text.str(), nullptr, false);
  return doc.is_discarded() ? nlohmann::json() : doc;
}

// The run's journal entries in the order they were appended; torn lines skipped.
inline std::vector<nlohmann::json> journal(const std::filesystem::path& out) {
  std::vector<nlohmann::json> entries;
  std::ifstream in(out / "journal.jsonl");
  std::string line;
  while (std::getline(in, line)) {
    auto entry = nlohmann::json::parse(line, nullptr, false);
    if (!entry.is_discarded()) {
      entries.push_back(entry);
    }
  }
  return entries;
}

} // namespace specctl::test
