#include "result_folder.hpp"

#include "files.hpp"

#include <fstream>

namespace specctl::test {

nlohmann::json read_json(const std::filesystem::path& path) {
  auto doc = nlohmann::json::parse(read_file(path), nullptr, false);
  return doc.is_discarded() ? nlohmann::json() : doc;
}

std::vector<nlohmann::json> journal(const std::filesystem::path& out) {
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

std::vector<nlohmann::json> journal_events(const std::filesystem::path& out, const std::string& event) {
  auto all = journal(out);
  std::erase_if(all, [&](const nlohmann::json& e) { return e.value("event", "") != event; });
  return all;
}

} // namespace specctl::test
