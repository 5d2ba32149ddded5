#include "ssh_hosts.hpp"

#include <specctl/experiment/connect.hpp>
#include <specctl/remote/ssh_config.hpp>
#include <specctl/util/text.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <expected>
#include <regex>
#include <set>

namespace specctl::experiment::detail {

namespace {

// OpenSSH follows ProxyJump chains without a limit; a chain this long is a loop.
constexpr int k_max_hops = 8;

struct WrittenTarget {
  std::optional<std::string> user;
  std::string hostname;
  std::optional<int> port;
};

// "user@host", "host:2222", "user@[::1]:2222"; nullopt when it cannot be an SSH target.
std::optional<WrittenTarget> parse_target(const std::string& text) {
  static const std::regex k_target(
      R"(^(?:([A-Za-z0-9._-]+)@)?(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9._-]+)(?::([0-9]{1,5}))?$)");
  std::smatch m;
  if (!std::regex_match(text, m, k_target)) {
    return std::nullopt;
  }
  WrittenTarget target;
  if (m[1].matched) {
    target.user = m[1].str();
  }
  target.hostname = m[2].str();
  if (target.hostname.front() == '[') {
    target.hostname = target.hostname.substr(1, target.hostname.size() - 2);
  }
  if (m[3].matched) {
    int port = 0;
    std::string digits = m[3].str();
    std::from_chars(digits.data(), digits.data() + digits.size(), port);
    if (port < 1 || port > 65535) {
      return std::nullopt;
    }
    target.port = port;
  }
  return target;
}

std::string current_user() {
  const char* user = std::getenv("USER");
  return user != nullptr && *user != '\0' ? user : "root";
}

HostKeyPolicy policy_of(const std::string& strict) {
  // BatchMode never asks, so "ask" is strict; "no" still refuses a changed
  // key here, so it is accept-new.
  return strict == "accept-new" || strict == "no" ? HostKeyPolicy::accept_new : HostKeyPolicy::strict;
}

// The connection of `written` as ~/.ssh/config completes it. The experiment's
// own settings (identity, known_hosts, host_key) are applied by the caller
// after this, so they win.
void apply_config(const WrittenTarget& written, const remote::SshConfigEntry& config, HostSpec& spec) {
  spec.kind = HostKind::ssh;
  if (!config.empty()) {
    spec.ssh_alias = written.hostname;
  }
  spec.destination = written.hostname;
  spec.given_user = written.user;
  spec.given_port = written.port;
  spec.hostname = config.hostname.value_or(written.hostname);
  spec.user = written.user.value_or(config.user.value_or(current_user()));
  spec.port = written.port.value_or(config.port.value_or(22));
  spec.identities = config.identity_files;
  spec.identities_only = config.identities_only.value_or(false);
  if (!config.user_known_hosts_files.empty()) {
    // "none": no file, so every key is unknown.
    auto first = config.user_known_hosts_files.front();
    spec.known_hosts = first == "none" ? "/dev/null" : first;
  }
  if (config.strict_host_key_checking) {
    spec.host_key = policy_of(*config.strict_host_key_checking);
  }
  spec.host_key_alias = config.host_key_alias;
  if (config.connect_timeout) {
    spec.connect_timeout = std::chrono::seconds{*config.connect_timeout};
  }
  if (config.server_alive_interval) {
    spec.keepalive = std::chrono::seconds{*config.server_alive_interval};
  }
  spec.keepalive_count = config.server_alive_count_max;
  spec.proxy_command = config.proxy_command;
  spec.unsupported_config = config.unsupported;
}

// ~/.ssh/config for `written` as `ssh [-l user] [-p port] alias` reads it.
std::expected<remote::SshConfigEntry, std::string> lookup(const WrittenTarget& written) {
  auto context = remote::default_ssh_config_context();
  context.user = written.user;
  context.port = written.port;
  auto config = remote::lookup_ssh_config_file(remote::default_ssh_config_path(), written.hostname, context);
  if (!config) {
    return std::unexpected(std::string(config.error().what()));
  }
  return std::move(*config);
}

// One hop of a ProxyJump (or `jump:`) that is not a host of the experiment,
// resolved with ~/.ssh/config as `ssh -J` would. Only the first hop's own
// ProxyJump or ProxyCommand counts, as in OpenSSH.
std::expected<HostSpec, std::string> resolve_hop(const std::string& text, const HostSpec& owner, bool first, int depth);

std::expected<std::vector<HostSpec>, std::string> resolve_hop_list(const std::vector<std::string>& hops,
                                                                   const HostSpec& owner, int depth) {
  if (depth + static_cast<int>(hops.size()) > k_max_hops) {
    return std::unexpected(fmt::format("more than {} jump hosts (a ProxyJump loop?)", k_max_hops));
  }
  std::vector<HostSpec> out;
  for (std::size_t i = 0; i < hops.size(); ++i) {
    auto hop = resolve_hop(hops[i], owner, i == 0, depth + static_cast<int>(i) + 1);
    if (!hop) {
      return std::unexpected(hop.error());
    }
    out.push_back(std::move(*hop));
  }
  return out;
}

std::expected<HostSpec, std::string> resolve_hop(const std::string& text, const HostSpec& owner, bool first,
                                                 int depth) {
  auto written = parse_target(text);
  if (!written) {
    return std::unexpected(
        fmt::format("jump host \"{}\" is not an SSH target (user@host[:port] or a ~/.ssh/config alias)", text));
  }
  auto config = lookup(*written);
  if (!config) {
    return std::unexpected(config.error());
  }
  HostSpec hop;
  hop.name = text;
  hop.known_hosts = owner.known_hosts;
  hop.host_key = owner.host_key;
  apply_config(*written, *config, hop);
  if (!first) {
    hop.proxy_command.reset();
  } else if (!config->proxy_jump.empty()) {
    auto hops = resolve_hop_list(config->proxy_jump, hop, depth);
    if (!hops) {
      return std::unexpected(hops.error());
    }
    hop.jumps = std::move(*hops);
  }
  return hop;
}

// "bastion", "a,b", or a list of them.
std::optional<std::vector<std::string>> jump_entries(const util::YamlField& field) {
  std::vector<std::string> out;
  auto add = [&](const std::string& text) {
    std::size_t at = 0;
    while (at <= text.size()) {
      auto comma = std::min(text.find(',', at), text.size());
      if (auto word = util::trim(std::string_view(text).substr(at, comma - at)); !word.empty()) {
        out.push_back(word);
      }
      at = comma + 1;
    }
  };
  if (field.is_list()) {
    auto items = field.as_string_list();
    if (!items) {
      return std::nullopt;
    }
    for (const auto& item : *items) {
      add(item);
    }
  } else if (auto text = field.as_string()) {
    add(*text);
  } else {
    return std::nullopt;
  }
  return out;
}

} // namespace

bool parse_ssh_host(const util::YamlField& field, HostSpec& spec) {
  spec.kind = HostKind::ssh;
  auto text = field["ssh"].as_string();
  if (!text) {
    return false;
  }
  auto written = parse_target(*text);
  if (!written) {
    field["ssh"].error(fmt::format("\"{}\" is not an SSH target (user@host[:port] or a ~/.ssh/config alias)", *text));
    return false;
  }
  // An alias from ~/.ssh/config fills what the experiment leaves out.
  auto config = lookup(*written);
  if (!config) {
    field["ssh"].error(config.error());
    return false;
  }
  apply_config(*written, *config, spec);
  for (const auto& note : config->notes) {
    field["ssh"].warning(note);
  }
  if (field["identity"].present()) {
    if (auto identity = field["identity"].as_string()) {
      spec.identities = {*identity};
    }
  }
  if (field["host_key"].present()) {
    auto policy = field["host_key"].as_choice({"strict", "accept-new"}).value_or("strict");
    spec.host_key = policy == "accept-new" ? HostKeyPolicy::accept_new : HostKeyPolicy::strict;
  }
  if (field["known_hosts"].present()) {
    spec.known_hosts = field["known_hosts"].as_string().value_or(spec.known_hosts);
  }
  if (field["transport"].present()) {
    auto transport = field["transport"].as_choice({"libssh2", "openssh"}).value_or("libssh2");
    spec.transport = transport == "openssh" ? SshTransport::openssh : SshTransport::libssh2;
  }
  // Hops inherit the host's known_hosts and policy, so they are resolved last.
  if (!config->proxy_jump.empty() && !field["jump"].present()) {
    spec.proxy_command.reset();
    auto hops = resolve_hop_list(config->proxy_jump, spec, 0);
    if (!hops) {
      field["ssh"].error(hops.error());
      return false;
    }
    spec.jumps = std::move(*hops);
  }
  if (spec.transport == SshTransport::libssh2 && !spec.unsupported_config.empty()) {
    field["ssh"].warning(fmt::format("the ssh config sets {} for \"{}\", which specctl's own SSH client does not do; "
                                     "if connecting fails, use transport: openssh (or --ssh openssh)",
                                     util::join(spec.unsupported_config, ", "), written->hostname));
  }
  return true;
}

void resolve_jumps(std::map<std::string, HostSpec>& hosts,
                   const std::vector<std::pair<std::string, util::YamlField>>& ssh_fields) {
  std::map<std::string, const util::YamlField*> fields;
  for (const auto& [name, field] : ssh_fields) {
    fields.emplace(name, &field);
  }
  std::set<std::string> done;
  std::set<std::string> resolving;
  // Resolves `name`'s jumps first when another host jumps through it, so a
  // host copied as a hop carries its own route.
  auto resolve = [&](auto& self, const std::string& name) -> bool {
    if (done.contains(name)) {
      return true;
    }
    auto field_it = fields.find(name);
    if (field_it == fields.end() || !(*field_it->second)["jump"].present()) {
      done.insert(name);
      return true;
    }
    const util::YamlField& jump = (*field_it->second)["jump"];
    if (resolving.contains(name)) {
      jump.error(fmt::format("\"{}\" jumps through itself (a loop of jump hosts)", name));
      return false;
    }
    resolving.insert(name);
    HostSpec& spec = hosts.at(name);
    auto entries = jump_entries(jump);
    bool ok = entries.has_value();
    if (!entries) {
      jump.error("a jump host or a list of them: [bastion, login2]");
    }
    std::vector<HostSpec> hops;
    std::vector<std::string> given;
    bool none = entries && entries->size() == 1 && entries->front() == "none";
    for (std::size_t i = 0; ok && !none && i < entries->size(); ++i) {
      const auto& entry = (*entries)[i];
      auto host = hosts.find(entry);
      if (host == hosts.end()) {
        auto hop = resolve_hop(entry, spec, i == 0, static_cast<int>(i) + 1);
        if (!hop) {
          jump.error(hop.error());
          ok = false;
          break;
        }
        hops.push_back(std::move(*hop));
        given.push_back(entry);
        continue;
      }
      if (entry == name || host->second.kind != HostKind::ssh) {
        jump.error(entry == name ? fmt::format("\"{}\" cannot jump through itself", name)
                                 : fmt::format("\"{}\" is not an SSH host; a jump host is one", entry));
        ok = false;
        break;
      }
      if (!self(self, entry)) {
        ok = false;
        break;
      }
      HostSpec hop = host->second;
      if (i > 0) {
        // Only the first hop has a route of its own.
        hop.jumps.clear();
        hop.proxy_command.reset();
      }
      given.push_back(fmt::format("{}{}{}", hop.given_user ? *hop.given_user + "@" : "", hop.destination,
                                  hop.given_port ? fmt::format(":{}", *hop.given_port) : ""));
      hops.push_back(std::move(hop));
    }
    if (ok && static_cast<int>(hops.size()) > k_max_hops) {
      jump.error(fmt::format("more than {} jump hosts", k_max_hops));
      ok = false;
    }
    if (ok) {
      spec.jumps = std::move(hops);
      spec.given_jumps = std::move(given);
      // The experiment's jump replaces the ssh config's ProxyCommand and ProxyJump.
      spec.proxy_command.reset();
    }
    resolving.erase(name);
    done.insert(name);
    return ok;
  };
  for (const auto& [name, field] : ssh_fields) {
    resolve(resolve, name);
  }
}

} // namespace specctl::experiment::detail

namespace specctl::experiment {

std::string HostSpec::route() const {
  return ssh_target(*this).route();
}

} // namespace specctl::experiment
