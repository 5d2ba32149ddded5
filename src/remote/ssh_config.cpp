#include <specctl/remote/ssh_config.hpp>

#include <specctl/util/text.hpp>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <vector>

namespace specctl::remote {

namespace {

std::string lower(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(), [](unsigned char c) { return std::tolower(c); });
  return text;
}

// Splits "Key value", "Key=value" and quoted values.
std::vector<std::string> split_words(const std::string& line) {
  std::vector<std::string> words;
  std::string current;
  bool quoted = false;
  bool have = false;
  for (char c : line) {
    if (c == '"') {
      quoted = !quoted;
      have = true;
    } else if (!quoted && (std::isspace(static_cast<unsigned char>(c)) || (c == '=' && words.empty()))) {
      if (have) {
        words.push_back(current);
        current.clear();
        have = false;
      }
    } else {
      current += c;
      have = true;
    }
  }
  if (have) {
    words.push_back(current);
  }
  return words;
}

bool host_matches(const std::vector<std::string>& patterns, std::string_view alias) {
  bool matched = false;
  for (const auto& pattern : patterns) {
    if (!pattern.empty() && pattern[0] == '!') {
      if (util::glob_match(pattern.substr(1), alias)) {
        return false;
      }
    } else if (util::glob_match(pattern, alias)) {
      matched = true;
    }
  }
  return matched;
}

} // namespace

SshConfigEntry lookup_ssh_config(std::string_view config_text, std::string_view alias) {
  SshConfigEntry entry;
  std::istringstream in{std::string(config_text)};
  std::string line;
  bool active = true; // options before the first Host block apply to every host
  while (std::getline(in, line)) {
    auto hash = line.find('#');
    if (hash != std::string::npos) {
      line.resize(hash);
    }
    auto words = split_words(line);
    if (words.empty()) {
      continue;
    }
    std::string key = lower(words[0]);
    std::vector<std::string> values(words.begin() + 1, words.end());
    if (key == "host") {
      active = host_matches(values, alias);
      continue;
    }
    if (key == "match") {
      // Match blocks need information we do not have; skip them rather than guess.
      active = false;
      continue;
    }
    if (!active || values.empty()) {
      continue;
    }
    const std::string& value = values[0];
    if (key == "hostname" && !entry.hostname) {
      std::string host = value;
      for (auto pos = host.find("%h"); pos != std::string::npos; pos = host.find("%h", pos + alias.size())) {
        host.replace(pos, 2, alias);
      }
      entry.hostname = host;
    } else if (key == "user" && !entry.user) {
      entry.user = value;
    } else if (key == "port" && !entry.port) {
      int port = 0;
      auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), port);
      if (ec == std::errc() && end == value.data() + value.size() && port > 0 && port < 65536) {
        entry.port = port;
      }
    } else if (key == "identityfile" && !entry.identity_file) {
      entry.identity_file = value;
    }
  }
  return entry;
}

std::string default_ssh_config_path() {
  if (const char* path = std::getenv("SPECCTL_SSH_CONFIG"); path != nullptr && *path != '\0') {
    return path;
  }
  const char* home = std::getenv("HOME");
  return std::string(home != nullptr ? home : "") + "/.ssh/config";
}

SshConfigEntry lookup_ssh_config_file(const std::string& path, std::string_view alias) {
  std::ifstream in(path);
  if (!in) {
    return {};
  }
  std::ostringstream text;
  text << in.rdbuf();
  return lookup_ssh_config(text.str(), alias);
}

} // namespace specctl::remote
