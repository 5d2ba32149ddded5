// ~/.ssh/config as specctl reads it for an experiment's SSH hosts: the first
// line of the input is the alias looked up, the rest is the config. The file
// reader must agree with the text reader, an error must be one line that
// starts with a file and a line number, and the glob matcher of Host patterns
// must agree with a plain dynamic-programming matcher.

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
  return a.hostname == b.hostname && a.user == b.user && a.port == b.port && a.identity_files == b.identity_files &&
         a.identities_only == b.identities_only && a.certificate_files == b.certificate_files &&
         a.proxy_jump == b.proxy_jump && a.proxy_command == b.proxy_command && a.connect_timeout == b.connect_timeout &&
         a.server_alive_interval == b.server_alive_interval && a.server_alive_count_max == b.server_alive_count_max &&
         a.strict_host_key_checking == b.strict_host_key_checking &&
         a.user_known_hosts_files == b.user_known_hosts_files && a.host_key_alias == b.host_key_alias &&
         a.unsupported == b.unsupported && a.notes == b.notes;
}

// "FILE:LINE: message" on one line.
bool well_formed(const Error& error) {
  std::string_view message = error.what();
  if (error.kind() != ErrorKind::bad_input || message.find('\n') != std::string_view::npos) {
    return false;
  }
  for (auto colon = message.find(':'); colon != std::string_view::npos; colon = message.find(':', colon + 1)) {
    auto digits = message.find_first_not_of("0123456789", colon + 1);
    if (digits != colon + 1 && digits != std::string_view::npos && message.substr(digits, 2) == ": ") {
      return true;
    }
  }
  return false;
}

void check(const remote::SshConfigEntry& entry) {
  if (entry.port && (*entry.port < 1 || *entry.port > 65535)) {
    std::abort();
  }
  for (auto seconds : {entry.connect_timeout, entry.server_alive_interval, entry.server_alive_count_max}) {
    if (seconds && *seconds < 0) {
      std::abort();
    }
  }
  if (entry.proxy_command && !entry.proxy_jump.empty()) {
    std::abort();
  }
  auto strict = entry.strict_host_key_checking;
  if (strict && *strict != "yes" && *strict != "no" && *strict != "ask" && *strict != "accept-new") {
    std::abort();
  }
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

  // Relative Include paths and "~" lead into the scratch folder, which holds only the config.
  static const remote::SshConfigContext context{(fuzz::ScratchDir::path() / "home").string(), "fuzz"};
  static const auto path = fuzz::ScratchDir::path() / "config";
  fuzz::write_file(path, config);

  auto entry = remote::lookup_ssh_config(config, alias, context, path.string());
  auto from_file = remote::lookup_ssh_config_file(path.string(), alias, context);
  if (entry.has_value() != from_file.has_value()) {
    std::abort();
  }
  if (entry) {
    check(*entry);
    (void)entry->empty();
    if (!same(*entry, *from_file)) {
      std::abort();
    }
  } else if (!well_formed(entry.error()) || std::string_view(entry.error().what()) != from_file.error().what()) {
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
