#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace specctl::remote {

// What ~/.ssh/config says about one host alias.
struct SshConfigEntry {
  std::optional<std::string> hostname;
  std::optional<std::string> user;
  std::optional<int> port;
  std::optional<std::string> identity_file;

  bool empty() const { return !hostname && !user && !port && !identity_file; }
};

// Applies an OpenSSH client config to `alias` as ssh does: every matching `Host`
// block (globs with * and ?, negation with !) in order, the first value of each
// option wins. Understands HostName (with %h), User, Port and IdentityFile; other
// options are ignored.
SshConfigEntry lookup_ssh_config(std::string_view config_text, std::string_view alias);

// The user's config file: $SPECCTL_SSH_CONFIG if set, else ~/.ssh/config.
std::string default_ssh_config_path();

// Reads the file at `path` and looks up `alias`; a missing file gives an empty entry.
SshConfigEntry lookup_ssh_config_file(const std::string& path, std::string_view alias);

} // namespace specctl::remote
