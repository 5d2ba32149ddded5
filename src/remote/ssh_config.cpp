// The public face of the ~/.ssh/config reader: the passes ssh makes over the
// configuration (ssh.c main), and the expansion of tokens in what they set,
// with the values ssh uses when it connects.

#include <specctl/remote/ssh_config.hpp>

#include "ssh_config_internal.hpp"

#include <specctl/util/unique_fd.hpp>

#include <fmt/format.h>

#include <fcntl.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstdlib>
#include <system_error>

namespace specctl::remote {

namespace sshcfg {

namespace {

// An included file this large is not a config: ssh would read /dev/zero forever.
constexpr std::size_t k_max_config_size = std::size_t{1} << 20;
constexpr std::size_t k_read_block = 64 * 1024;
// ssh's default port, for %p and %C when no Port is set.
constexpr int k_default_port = 22;

std::string errno_text(int error) {
  return std::error_code(error, std::generic_category()).message();
}

std::string local_host_name() {
  std::array<char, 256> name{};
  if (::gethostname(name.data(), name.size() - 1) != 0) {
    return {};
  }
  return name.data();
}

// The password database's entry for this process's user: home and name.
std::pair<std::string, std::string> password_entry() {
  passwd entry{};
  passwd* found = nullptr;
  std::array<char, 16384> buffer{};
  if (::getpwuid_r(::getuid(), &entry, buffer.data(), buffer.size(), &found) != 0 || found == nullptr) {
    return {};
  }
  return {found->pw_dir != nullptr ? found->pw_dir : "", found->pw_name != nullptr ? found->pw_name : ""};
}

std::expected<std::string, Error> expand_at(const Located& value, std::string_view keyword,
                                            const std::vector<Token>& tokens, bool environment) {
  auto expanded = expand_tokens(value.value, tokens, environment);
  if (!expanded) {
    return std::unexpected(
        config_error(value.where, fmt::format("{} \"{}\": {}", keyword, value.value, expanded.error())));
  }
  return *expanded;
}

std::expected<std::vector<std::string>, Error> expand_all(const std::vector<Located>& values, std::string_view keyword,
                                                          const std::vector<Token>& tokens) {
  std::vector<std::string> out;
  for (const auto& value : values) {
    auto expanded = expand_at(value, keyword, tokens, true);
    if (!expanded) {
      return std::unexpected(expanded.error());
    }
    out.push_back(std::move(*expanded));
  }
  return out;
}

// The host name ssh connects to (ssh.c): HostName expanded, or the alias; lowercased unless an address.
std::expected<std::string, Error> connect_host(const Settings& s, std::string_view alias) {
  std::string host(alias);
  if (s.hostname) {
    auto expanded = expanded_hostname(*s.hostname, alias);
    if (!expanded) {
      return std::unexpected(expanded.error());
    }
    host = std::move(*expanded);
  }
  return is_address(host) ? host : lowercase(host);
}

std::expected<SshConfigEntry, Error> to_entry(const Settings& s, std::string_view alias,
                                              const SshConfigContext& context) {
  SshConfigEntry entry;
  if (s.hostname) {
    auto hostname = expanded_hostname(*s.hostname, alias);
    if (!hostname) {
      return std::unexpected(hostname.error());
    }
    entry.hostname = std::move(*hostname);
  }
  auto host = connect_host(s, alias);
  if (!host) {
    return std::unexpected(host.error());
  }
  entry.user = s.user;
  entry.port = s.port;
  entry.identities_only = s.identities_only;
  entry.connect_timeout = s.connect_timeout;
  entry.server_alive_interval = s.server_alive_interval;
  entry.server_alive_count_max = s.server_alive_count_max;
  entry.strict_host_key_checking = s.strict_host_key_checking;
  entry.host_key_alias = s.host_key_alias;
  entry.unsupported = s.unsupported;
  entry.notes = s.notes;

  // The values ssh gives the tokens when it connects (ssh.c, sshconnect.h
  // DEFAULT_CLIENT_PERCENT_EXPAND_ARGS, sshconnect.c expand_proxy_command).
  const std::string port = std::to_string(s.port.value_or(k_default_port));
  const std::string user = s.user.value_or(context.local_user);
  const std::string key_alias = s.host_key_alias ? lowercase(*s.host_key_alias) : std::string(alias);
  const std::string this_host = local_host_name();
  const std::string short_host = this_host.substr(0, this_host.find('.'));
  const std::vector<Token> file_tokens = {
      {'C', sha1_hex(this_host + *host + port + user)},
      {'L', short_host},
      {'i', std::to_string(::getuid())},
      {'k', key_alias},
      {'l', this_host},
      {'n', std::string(alias)},
      {'p', port},
      {'d', context.home},
      {'h', *host},
      {'r', user},
      {'u', context.local_user},
  };
  const std::vector<Token> proxy_tokens = {
      {'h', *host}, {'k', key_alias}, {'n', std::string(alias)}, {'p', port}, {'r', user},
  };

  auto identities = expand_all(s.identity_files, "IdentityFile", file_tokens);
  auto certificates = expand_all(s.certificate_files, "CertificateFile", file_tokens);
  if (!identities || !certificates) {
    return std::unexpected(!identities ? identities.error() : certificates.error());
  }
  entry.identity_files = std::move(*identities);
  entry.certificate_files = std::move(*certificates);

  const auto& known_hosts = s.user_known_hosts_files;
  if (known_hosts.size() == 1 && lowercase(known_hosts[0].value) == "none") {
    entry.user_known_hosts_files = {"none"};
  } else {
    auto files = expand_all(known_hosts, "UserKnownHostsFile", file_tokens);
    if (!files) {
      return std::unexpected(files.error());
    }
    entry.user_known_hosts_files = std::move(*files);
  }

  if (s.proxy_jump && !s.proxy_jump->none) {
    entry.proxy_jump = s.proxy_jump->hops;
  } else if (s.proxy_command && lowercase(s.proxy_command->value) != "none") {
    auto command = expand_at(*s.proxy_command, "ProxyCommand", proxy_tokens, false);
    if (!command) {
      return std::unexpected(command.error());
    }
    entry.proxy_command = std::move(*command);
  }
  return entry;
}

} // namespace

Error config_error(std::string_view where, std::string_view message) {
  return Error(fmt::format("{}: {}", where, message), ErrorKind::bad_input);
}

std::expected<std::string, Error> expanded_hostname(const Located& hostname, std::string_view alias) {
  return expand_at(hostname, "HostName", {{'h', std::string(alias)}}, false);
}

std::expected<std::optional<std::string>, std::string> read_config_file(const std::string& path, bool check_owner) {
  // Non-blocking, so that a FIFO without a writer reads as empty instead of hanging.
  util::UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK));
  if (!fd) {
    int error = errno;
    if (error == ENOENT || error == ENOTDIR) {
      return std::nullopt;
    }
    return std::unexpected(fmt::format("cannot read \"{}\": {}", path, errno_text(error)));
  }
  struct stat info {};
  if (::fstat(fd.get(), &info) != 0) {
    return std::unexpected(fmt::format("cannot read \"{}\": {}", path, errno_text(errno)));
  }
  // readconf.c SSHCONF_CHECKPERM: ssh stops at such a file.
  if (check_owner && ((info.st_uid != 0 && info.st_uid != ::getuid()) || (info.st_mode & (S_IWGRP | S_IWOTH)) != 0)) {
    return std::unexpected(fmt::format("bad owner or permissions on \"{}\" (ssh refuses a file that another user "
                                       "owns or that others may write)",
                                       path));
  }
  // ssh reads a folder as an empty file.
  if (S_ISDIR(info.st_mode)) {
    return std::string{};
  }
  std::string text;
  std::array<char, k_read_block> block{};
  while (true) {
    ssize_t got = ::read(fd.get(), block.data(), block.size());
    if (got < 0) {
      if (errno == EINTR) {
        continue;
      }
      if (errno == EAGAIN || errno == EISDIR) {
        break;
      }
      return std::unexpected(fmt::format("cannot read \"{}\": {}", path, errno_text(errno)));
    }
    if (got == 0) {
      break;
    }
    text.append(block.data(), static_cast<std::size_t>(got));
    if (text.size() > k_max_config_size) {
      return std::unexpected(
          fmt::format("\"{}\" is larger than {} KiB: not a config file", path, k_max_config_size / 1024));
    }
  }
  return text;
}

} // namespace sshcfg

bool SshConfigEntry::empty() const {
  return !hostname && !user && !port && identity_files.empty() && !identities_only && certificate_files.empty() &&
         proxy_jump.empty() && !proxy_command && !connect_timeout && !server_alive_interval &&
         !server_alive_count_max && !strict_host_key_checking && user_known_hosts_files.empty() && !host_key_alias &&
         unsupported.empty();
}

SshConfigContext default_ssh_config_context() {
  SshConfigContext context;
  const char* home = std::getenv("HOME");
  const char* user = std::getenv("USER");
  if (home == nullptr || *home == '\0' || user == nullptr || *user == '\0') {
    auto [pw_home, pw_name] = sshcfg::password_entry();
    context.home = pw_home;
    context.local_user = pw_name;
  }
  if (home != nullptr && *home != '\0') {
    context.home = home;
  }
  if (user != nullptr && *user != '\0') {
    context.local_user = user;
  }
  return context;
}

std::expected<SshConfigEntry, Error> lookup_ssh_config(std::string_view config_text, std::string_view alias,
                                                       const SshConfigContext& context, std::string_view origin) {
  sshcfg::Settings settings;
  // As ssh's -l and -p: read before the file, so they win, and %r, %p, %C and
  // Match user see them.
  settings.user = context.user;
  settings.port = context.port;
  const std::string file(origin);
  sshcfg::Pass pass{alias, std::string(alias), false};
  if (auto done = sshcfg::read_pass(config_text, file, pass, context, settings); !done) {
    return std::unexpected(done.error());
  }
  // ssh.c: a "Match final", or hostname canonicalisation, makes ssh read the files
  // again, Host lines now matching the host name it will connect to. specctl does not
  // look names up in DNS: the name stays as written, as when ssh finds no better one.
  if (settings.want_final_pass || settings.canonicalize_hostname.value_or(0) != 0) {
    auto host = sshcfg::connect_host(settings, alias);
    if (!host) {
      return std::unexpected(host.error());
    }
    settings.hostname_fixed = true;
    pass = sshcfg::Pass{alias, *host, true};
    if (auto done = sshcfg::read_pass(config_text, file, pass, context, settings); !done) {
      return std::unexpected(done.error());
    }
  }
  auto entry = sshcfg::to_entry(settings, alias, context);
  if (entry) {
    // What the file says, which for these is nothing: the caller's own won.
    if (context.user) {
      entry->user.reset();
    }
    if (context.port) {
      entry->port.reset();
    }
  }
  return entry;
}

std::expected<SshConfigEntry, Error> lookup_ssh_config_file(const std::string& path, std::string_view alias,
                                                            const SshConfigContext& context) {
  auto text = sshcfg::read_config_file(path, false);
  if (!text) {
    return std::unexpected(Error(text.error(), ErrorKind::bad_input));
  }
  if (!*text) {
    return SshConfigEntry{};
  }
  return lookup_ssh_config(**text, alias, context, path);
}

std::string default_ssh_config_path() {
  if (const char* path = std::getenv("SPECCTL_SSH_CONFIG"); path != nullptr && *path != '\0') {
    return path;
  }
  const char* home = std::getenv("HOME");
  return std::string(home != nullptr ? home : "") + "/.ssh/config";
}

} // namespace specctl::remote
