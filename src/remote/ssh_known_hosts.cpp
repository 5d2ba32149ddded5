#include "ssh_connection.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string_view>
#include <system_error>
#include <vector>

namespace specctl::remote::ssh {

namespace {

namespace fs = std::filesystem;

struct KeyType {
  int hostkey_type;   // LIBSSH2_HOSTKEY_TYPE_*
  int known_host_bit; // LIBSSH2_KNOWNHOST_KEY_*
  std::string_view name;
};

// In OpenSSH's order of preference; libssh2 1.10 on its own would pick ECDSA
// before Ed25519 and then miss the Ed25519 key that OpenSSH recorded.
constexpr std::array k_key_types = {
    KeyType{LIBSSH2_HOSTKEY_TYPE_ED25519, LIBSSH2_KNOWNHOST_KEY_ED25519, "ssh-ed25519"},
    KeyType{LIBSSH2_HOSTKEY_TYPE_ECDSA_256, LIBSSH2_KNOWNHOST_KEY_ECDSA_256, "ecdsa-sha2-nistp256"},
    KeyType{LIBSSH2_HOSTKEY_TYPE_ECDSA_384, LIBSSH2_KNOWNHOST_KEY_ECDSA_384, "ecdsa-sha2-nistp384"},
    KeyType{LIBSSH2_HOSTKEY_TYPE_ECDSA_521, LIBSSH2_KNOWNHOST_KEY_ECDSA_521, "ecdsa-sha2-nistp521"},
    KeyType{LIBSSH2_HOSTKEY_TYPE_RSA, LIBSSH2_KNOWNHOST_KEY_SSHRSA, "ssh-rsa"},
};

const KeyType* find_key_type(int hostkey_type) {
  auto it = std::find_if(k_key_types.begin(), k_key_types.end(),
                         [&](const KeyType& k) { return k.hostkey_type == hostkey_type; });
  return it == k_key_types.end() ? nullptr : &*it;
}

std::string base64_unpadded(const unsigned char* data, std::size_t size) {
  static constexpr std::string_view k_alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  std::size_t i = 0;
  for (; i + 2 < size; i += 3) {
    unsigned v = (unsigned{data[i]} << 16) | (unsigned{data[i + 1]} << 8) | unsigned{data[i + 2]};
    out += k_alphabet[(v >> 18) & 63];
    out += k_alphabet[(v >> 12) & 63];
    out += k_alphabet[(v >> 6) & 63];
    out += k_alphabet[v & 63];
  }
  if (size - i == 1) {
    unsigned v = unsigned{data[i]} << 16;
    out += k_alphabet[(v >> 18) & 63];
    out += k_alphabet[(v >> 12) & 63];
  } else if (size - i == 2) {
    unsigned v = (unsigned{data[i]} << 16) | (unsigned{data[i + 1]} << 8);
    out += k_alphabet[(v >> 18) & 63];
    out += k_alphabet[(v >> 12) & 63];
    out += k_alphabet[(v >> 6) & 63];
  }
  return out;
}

// "SHA256:..." as `ssh-keygen -l` and OpenSSH's prompts print it.
std::string fingerprint(LIBSSH2_SESSION* session) {
  constexpr std::size_t k_sha256_size = 32;
  const char* hash = libssh2_hostkey_hash(session, LIBSSH2_HOSTKEY_HASH_SHA256);
  if (hash == nullptr) {
    return "SHA256:?";
  }
  return "SHA256:" + base64_unpadded(reinterpret_cast<const unsigned char*>(hash), k_sha256_size);
}

// The name OpenSSH writes into known_hosts for this host and port.
std::string known_hosts_name(const SshTarget& target) {
  if (target.host_key_alias) {
    // As OpenSSH: the alias alone, whatever the port.
    return *target.host_key_alias;
  }
  if (target.port == 22) {
    return target.hostname;
  }
  return fmt::format("[{}]:{}", target.hostname, target.port);
}

std::vector<std::string> read_lines(const fs::path& path) {
  std::vector<std::string> lines;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    lines.push_back(line);
  }
  return lines;
}

// Loads the lines libssh2 understands. libssh2_knownhost_readfile gives up at
// the first line it cannot parse (certificate authorities, security keys),
// which would hide every entry after it.
void load_known_hosts(LIBSSH2_KNOWNHOSTS* hosts, const fs::path& path) {
  for (const auto& line : read_lines(path)) {
    if (line.empty() || line[0] == '#' || line[0] == '@') {
      continue;
    }
    libssh2_knownhost_readline(hosts, line.c_str(), line.size(), LIBSSH2_KNOWNHOST_FILE_OPENSSH);
  }
}

std::expected<void, std::string> append_known_host(LIBSSH2_KNOWNHOSTS* hosts, const fs::path& path,
                                                   const SshTarget& target, const char* key, std::size_t key_size,
                                                   int key_bits) {
  libssh2_knownhost* entry = nullptr;
  auto name = known_hosts_name(target);
  int rc = libssh2_knownhost_addc(hosts, name.c_str(), nullptr, key, key_size, nullptr, 0,
                                  LIBSSH2_KNOWNHOST_TYPE_PLAIN | LIBSSH2_KNOWNHOST_KEYENC_RAW | key_bits, &entry);
  if (rc != 0) {
    return std::unexpected("libssh2 could not add the key");
  }
  std::array<char, 8192> line{};
  std::size_t length = 0;
  rc = libssh2_knownhost_writeline(hosts, entry, line.data(), line.size(), &length, LIBSSH2_KNOWNHOST_FILE_OPENSSH);
  if (rc != 0) {
    return std::unexpected("libssh2 could not format the entry");
  }
  std::error_code ec;
  auto dir = path.parent_path();
  if (!dir.empty() && !fs::exists(dir, ec)) {
    fs::create_directories(dir, ec);
    fs::permissions(dir, fs::perms::owner_all, ec);
  }
  bool needs_newline = false;
  if (fs::exists(path, ec) && fs::file_size(path, ec) > 0) {
    std::ifstream in(path, std::ios::binary);
    in.seekg(-1, std::ios::end);
    needs_newline = in.get() != '\n';
  }
  // Appending keeps every line we could not parse; rewriting the file would not.
  std::ofstream out(path, std::ios::app | std::ios::binary);
  if (!out) {
    return std::unexpected(fmt::format("cannot write {}", path.string()));
  }
  if (needs_newline) {
    out << '\n';
  }
  out.write(line.data(), static_cast<std::streamsize>(length));
  out.flush();
  if (!out) {
    return std::unexpected(fmt::format("cannot write {}", path.string()));
  }
  return {};
}

ConnectFailure refused(std::string message) {
  return {Error(std::move(message)), Retry::no};
}

} // namespace

std::string preferred_host_key_methods(const SshTarget& target) {
  // Plain (unhashed) entries tell which key types are recorded for the host;
  // offering those first avoids a spurious mismatch with another key type.
  std::vector<std::string_view> order;
  auto name = known_hosts_name(target);
  for (const auto& line : read_lines(expand_home(target.known_hosts))) {
    std::istringstream words(line);
    std::string names;
    std::string type;
    if (!(words >> names >> type) || names.empty() || names[0] == '#' || names[0] == '@' || names[0] == '|') {
      continue;
    }
    std::istringstream list(names);
    std::string one;
    bool listed = false;
    while (std::getline(list, one, ',')) {
      listed = listed || one == name;
    }
    if (!listed) {
      continue;
    }
    for (const auto& k : k_key_types) {
      if (k.name == type && std::find(order.begin(), order.end(), k.name) == order.end()) {
        order.push_back(k.name);
      }
    }
  }
  for (const auto& k : k_key_types) {
    if (std::find(order.begin(), order.end(), k.name) == order.end()) {
      order.push_back(k.name);
    }
  }
  std::string methods;
  for (auto method : order) {
    if (!methods.empty()) {
      methods += ',';
    }
    methods += method;
  }
  return methods;
}

std::expected<void, ConnectFailure> verify_host_key(LIBSSH2_SESSION* session, const SshTarget& target) {
  auto where = target.describe();
  std::size_t key_size = 0;
  int hostkey_type = 0;
  const char* key = libssh2_session_hostkey(session, &key_size, &hostkey_type);
  const KeyType* type = find_key_type(hostkey_type);
  if (key == nullptr || type == nullptr) {
    return std::unexpected(refused(fmt::format("{}: the server offered no host key of a supported type", where)));
  }
  auto offered = fmt::format("{} {}", type->name, fingerprint(session));
  auto name = known_hosts_name(target);
  fs::path path = expand_home(target.known_hosts);

  KnownHosts hosts(libssh2_knownhost_init(session));
  if (!hosts) {
    return std::unexpected(ConnectFailure{Error(fmt::format("{}: libssh2 could not check known hosts", where))});
  }
  load_known_hosts(hosts.get(), path);
  constexpr int k_plain_raw = LIBSSH2_KNOWNHOST_TYPE_PLAIN | LIBSSH2_KNOWNHOST_KEYENC_RAW;
  // Port -1 makes libssh2 look up exactly `name`, as OpenSSH does; with the
  // port it would also accept a plain "host" entry that belongs to port 22.
  int check = libssh2_knownhost_checkp(hosts.get(), name.c_str(), -1, key, key_size, k_plain_raw | type->known_host_bit,
                                       nullptr);
  if (check == LIBSSH2_KNOWNHOST_CHECK_MATCH) {
    return {};
  }
  if (check == LIBSSH2_KNOWNHOST_CHECK_NOTFOUND) {
    // Without a key type libssh2 compares against every key recorded for the
    // host, which tells "never seen" from "seen with another key".
    check = libssh2_knownhost_checkp(hosts.get(), name.c_str(), -1, key, key_size, k_plain_raw, nullptr);
  }
  if (check == LIBSSH2_KNOWNHOST_CHECK_MISMATCH) {
    return std::unexpected(refused(fmt::format(
        "{}: HOST KEY CHANGED for {}: the server offered {}, which is not the key recorded in {}; refusing to "
        "connect (the connection may be intercepted; if the host was reinstalled, remove the old key with "
        "ssh-keygen -R '{}' -f {})",
        where, name, offered, path.string(), name, path.string())));
  }
  if (check != LIBSSH2_KNOWNHOST_CHECK_NOTFOUND) {
    return std::unexpected(refused(fmt::format("{}: cannot check the host key against {}: {}", where, path.string(),
                                               last_error_message(session))));
  }
  if (target.host_key_policy == HostKeyPolicy::strict) {
    return std::unexpected(refused(
        fmt::format("{}: host key for {} is not in {} (the server offered {}); check the fingerprint and add it, e.g. "
                    "ssh-keyscan -p {} {} >> {}, or use the accept-new host key policy",
                    where, name, path.string(), offered, target.port, target.hostname, path.string())));
  }
  if (auto added = append_known_host(hosts.get(), path, target, key, key_size, type->known_host_bit); !added) {
    return std::unexpected(refused(
        fmt::format("{}: cannot record the new host key {} in {}: {}", where, offered, path.string(), added.error())));
  }
  return {};
}

} // namespace specctl::remote::ssh
