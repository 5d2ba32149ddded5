// ~/.ssh/config as specctl reads it for an experiment's SSH hosts: the first
// line of the input is the alias looked up, the rest is the config. The file
// reader must agree with the text reader, and the glob matcher of Host
// patterns with a plain dynamic-programming matcher.

#include "fuzz_support.hpp"

#include <specctl/remote/ssh_config.hpp>
#include <specctl/util/text.hpp>

#include <cstdlib>
#include <sstream>
#include <vector>

using namespace specctl;

namespace {

// * matches any run of characters, ? any one character.
bool reference_glob(std::string_view pattern, std::string_view text) {
  // row[j]: pattern[0, i) matches text[0, j).
  std::vector<char> row(text.size() + 1, 0);
  row[0] = 1;
  for (char p : pattern) {
    std::vector<char> next(text.size() + 1, 0);
    next[0] = p == '*' && row[0];
    for (std::size_t j = 1; j <= text.size(); ++j) {
      if (p == '*') {
        next[j] = row[j] || next[j - 1];
      } else {
        next[j] = row[j - 1] && (p == '?' || p == text[j - 1]);
      }
    }
    row = std::move(next);
  }
  return row[text.size()] != 0;
}

bool same(const remote::SshConfigEntry& a, const remote::SshConfigEntry& b) {
  return a.hostname == b.hostname && a.user == b.user && a.port == b.port && a.identity_file == b.identity_file;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size > fuzz::k_max_input) {
    return -1;
  }
  std::string_view text = fuzz::as_text(data, size);
  auto newline = text.find('\n');
  std::string_view alias = text.substr(0, std::min<std::size_t>(newline, 255));
  std::string_view config = newline == std::string_view::npos ? std::string_view{} : text.substr(newline + 1);

  auto entry = remote::lookup_ssh_config(config, alias);
  (void)entry.empty();
  if (entry.port && (*entry.port < 1 || *entry.port > 65535)) {
    std::abort();
  }
  static const auto path = fuzz::ScratchDir::path() / "config";
  fuzz::write_file(path, config);
  if (!same(entry, remote::lookup_ssh_config_file(path.string(), alias))) {
    std::abort();
  }

  // Every word of the config as a Host pattern against the alias.
  std::istringstream words{std::string(config.substr(0, 4096))};
  std::string word;
  for (int i = 0; i < 64 && words >> word; ++i) {
    std::string_view pattern = std::string_view(word).substr(0, 64);
    if (util::glob_match(pattern, alias) != reference_glob(pattern, alias)) {
      std::abort();
    }
  }
  return 0;
}
