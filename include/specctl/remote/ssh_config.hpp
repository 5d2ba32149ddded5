#pragma once

// The OpenSSH client configuration (~/.ssh/config), read as OpenSSH 9.2's ssh
// reads it (readconf.c is the reference; docs/ssh.md says what specctl does
// differently and why).

#include <specctl/util/error.hpp>

#include <expected>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace specctl::remote {

// Who is asking: for "~", relative Include paths (HOME/.ssh/...), %d, %u and Match localuser.
struct SshConfigContext {
  std::string home;       // the user's home directory
  std::string local_user; // the local user name
  // Given by the caller, as ssh's -l and -p: they win over the file, feed %r, %p
  // and %C, and Match user sees the user; the entry then leaves them unset.
  std::optional<std::string> user{};
  std::optional<int> port{};
};

// $HOME (else the password database's home) and $USER (else the password database's name).
SshConfigContext default_ssh_config_context();

// What an OpenSSH client config says about one destination, for the keywords specctl reads.
// A value is the first one obtained, as in ssh; the lists gather every line, as in ssh.
struct SshConfigEntry {
  // HostName with %h (the alias) and %% expanded, as written otherwise: ssh lowercases a
  // name (not an address) before it connects, and so do the tokens below.
  std::optional<std::string> hostname;
  std::optional<std::string> user;
  std::optional<int> port;
  // Every IdentityFile, in order, without repeats; tokens (%h %p %r %u %d %n %k %l %L %i %C
  // %%) and ${VAR} expanded, a leading "~" kept.
  std::vector<std::string> identity_files;
  std::optional<bool> identities_only;
  // Every CertificateFile, expanded as identity_files.
  std::vector<std::string> certificate_files;
  // ProxyJump's hops as written ("user@host:port", "host", "ssh://...", an alias), first
  // hop first; empty when unset, "none", or when a ProxyCommand came first.
  std::vector<std::string> proxy_jump;
  // ProxyCommand with %h %p %r %n %k %% expanded, as /bin/sh is to run it; unset when
  // "none" or when a ProxyJump came first.
  std::optional<std::string> proxy_command;
  std::optional<int> connect_timeout;       // seconds ("1m30s" is 90)
  std::optional<int> server_alive_interval; // seconds
  std::optional<int> server_alive_count_max;
  // Normalised: "yes", "no", "accept-new" or "ask" ("true", "false", "off" are spelled out).
  std::optional<std::string> strict_host_key_checking;
  // UserKnownHostsFile's files, expanded as identity_files; {"none"} for "none"
  // (no file: every host key is unknown); empty when unset (ssh's default:
  // ~/.ssh/known_hosts and ~/.ssh/known_hosts2).
  std::vector<std::string> user_known_hosts_files;
  // As written (ssh lowercases it before it looks in known_hosts).
  std::optional<std::string> host_key_alias;
  // Keywords set for this destination that change how ssh connects but that specctl's own
  // (libssh2) transport does not implement, each as OpenSSH spells the keyword, a space and
  // the value as written: "GSSAPIAuthentication yes", "ControlPath ~/.ssh/cm-%C". Values
  // that turn the feature off ("no", "none") are not listed. docs/ssh.md lists them.
  std::vector<std::string> unsupported;
  // Blocks specctl could not evaluate, with file:line: "Match exec at
  // /home/u/.ssh/config:12 (specctl does not run commands from ssh_config; treated as
  // not matching)".
  std::vector<std::string> notes;

  // Nothing at all was set for this destination (used to tell an alias from a plain
  // host name). Notes do not count; keywords specctl neither reads nor lists do not either.
  bool empty() const;
};

// Applies config text to `alias` as ssh does. `origin` names the text in errors
// ("~/.ssh/config"). Errors (ErrorKind::bad_input, one line, "FILE:LINE: ..."): an
// unknown keyword (unless IgnoreUnknown covers it), a bad value for a keyword specctl
// reads (Port abc), a Match criterion OpenSSH does not know, unbalanced quotes, an
// Include nested too deep (more than 16 levels, as in ssh), and an Include file that
// cannot be read for a reason other than not existing. As in ssh, lines of blocks that
// do not apply to `alias` are checked too.
std::expected<SshConfigEntry, Error> lookup_ssh_config(std::string_view config_text, std::string_view alias,
                                                       const SshConfigContext& context,
                                                       std::string_view origin = "ssh config");

// The file at `path` (a missing file is an empty entry, not an error).
std::expected<SshConfigEntry, Error>
lookup_ssh_config_file(const std::string& path, std::string_view alias,
                       const SshConfigContext& context = default_ssh_config_context());

// The user's config file: $SPECCTL_SSH_CONFIG if set, else ~/.ssh/config.
std::string default_ssh_config_path();

} // namespace specctl::remote
