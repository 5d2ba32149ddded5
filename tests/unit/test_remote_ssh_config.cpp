// ~/.ssh/config as OpenSSH 9.2 reads it. The reference is Debian's own ssh: a table of configs
// and aliases is put to `ssh -G -F FILE ALIAS` and every field of SshConfigEntry is compared with
// what ssh prints; the cases after it pin what ssh -G cannot show (notes, exact messages).

#include "../support/files.hpp"
#include "../support/process.hpp"
#include "../support/skip.hpp"
#include "../support/temp_dir.hpp"

#include <specctl/remote/ssh_config.hpp>
#include <specctl/util/text.hpp>

#include <doctest/doctest.h>
#include <fmt/format.h>

#include <pwd.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <sstream>

namespace fs = std::filesystem;
using specctl::remote::lookup_ssh_config;
using specctl::remote::lookup_ssh_config_file;
using specctl::remote::SshConfigContext;
using specctl::remote::SshConfigEntry;
using specctl::test::TempDir;

namespace {

// ssh's own view of the user: the password database's home and name (not $HOME).
SshConfigContext password_context() {
  passwd entry{};
  passwd* found = nullptr;
  std::array<char, 16384> buffer{};
  REQUIRE((::getpwuid_r(::getuid(), &entry, buffer.data(), buffer.size(), &found) == 0 && found != nullptr));
  return {found->pw_dir, found->pw_name};
}

// A context that owns nothing on this machine, for the cases that do not ask ssh.
const SshConfigContext k_alice{"/home/alice", "alice"};

std::string lower(std::string text) {
  std::ranges::transform(text, text.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return text;
}

std::string replace_all(std::string text, std::string_view from, std::string_view to) {
  for (auto at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size())) {
    text.replace(at, from.size(), to);
  }
  return text;
}

// An expected's error, for a message that doctest may print after a success too.
template <typename T> std::string why(const T& result) {
  return result ? std::string() : std::string(result.error().what());
}

SshConfigEntry lookup(std::string_view text, std::string_view alias) {
  auto entry = lookup_ssh_config(text, alias, k_alice);
  REQUIRE_MESSAGE(entry.has_value(), why(entry));
  return *entry;
}

std::string error_of(std::string_view text, std::string_view alias = "a") {
  auto entry = lookup_ssh_config(text, alias, k_alice, "~/.ssh/config");
  REQUIRE_FALSE(entry.has_value());
  CHECK(entry.error().kind() == specctl::ErrorKind::bad_input);
  return entry.error().what();
}

// Why `ssh -G` cannot be the reference here, if it cannot.
std::optional<std::string> ssh_unavailable() {
  if (specctl::test::pretend_missing("ssh")) {
    return "no ssh (SPECCTL_TEST_WITHOUT names it)";
  }
  if (specctl::test::find_program("ssh").find('/') == std::string::npos) {
    return "no ssh (the OpenSSH client, Debian's openssh-client) in PATH to compare with";
  }
  return std::nullopt;
}

// What `ssh -G` printed: each keyword's values, one a line, in order.
using SshView = std::map<std::string, std::vector<std::string>>;

struct SshAnswer : specctl::test::ProgramResult {
  SshView view;
};

SshAnswer ssh_g(const fs::path& config, const std::string& alias, const TempDir& scratch,
                const std::vector<std::string>& env = {}) {
  // -T: no "Pseudo-terminal will not be allocated" message in the output.
  auto result = specctl::test::run_program({"ssh", "-G", "-T", "-F", config.string(), alias}, scratch.path(), env);
  SshAnswer answer{result, {}};
  std::istringstream lines(result.output);
  std::string line;
  while (std::getline(lines, line)) {
    auto space = line.find(' ');
    if (space != std::string::npos) {
      answer.view[line.substr(0, space)].push_back(line.substr(space + 1));
    }
  }
  return answer;
}

// ssh -G prints IdentityFile, CertificateFile and ProxyCommand as written: their tokens
// are expanded here with the values ssh printed itself, so that the comparison does not
// lean on the expansion under test.
std::string expand_like_ssh(std::string_view text, const SshView& ssh, const std::string& alias,
                            const SshConfigContext& context) {
  auto first = [&](const std::string& key) { return ssh.contains(key) ? ssh.at(key).front() : alias; };
  const std::map<char, std::string> tokens = {
      {'%', "%"},   {'h', first("hostname")},     {'p', first("port")},      {'r', first("user")},
      {'n', alias}, {'k', first("hostkeyalias")}, {'u', context.local_user}, {'d', context.home}};
  std::string out;
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text.substr(i, 2) == "${") {
      auto close = text.find('}', i);
      const char* value = std::getenv(std::string(text.substr(i + 2, close - i - 2)).c_str());
      out += value != nullptr ? value : "<unset>";
      i = close;
    } else if (text[i] == '%' && i + 1 < text.size()) {
      ++i;
      out += tokens.contains(text[i]) ? tokens.at(text[i]) : fmt::format("<%{} not expanded by the test>", text[i]);
    } else {
      out += text[i];
    }
  }
  return out;
}

std::string yes_no(std::string value) {
  return value == "true" ? "yes" : value == "false" ? "no" : value;
}

// Every difference between SshConfigEntry and ssh -G for one alias, as "field: ours / ssh".
std::vector<std::string> differences(const SshConfigEntry& e, const SshView& ssh, const std::string& alias,
                                     const SshConfigContext& context) {
  std::vector<std::string> out;
  auto one = [&](const std::string& key) { return ssh.contains(key) ? ssh.at(key).front() : "<absent>"; };
  auto expect = [&](const std::string& field, const std::string& ours, const std::string& theirs) {
    if (ours != theirs) {
      out.push_back(fmt::format("{}: specctl \"{}\", ssh \"{}\"", field, ours, theirs));
    }
  };
  auto expanded = [&](const std::string& key) {
    std::vector<std::string> list;
    for (const auto& v : ssh.contains(key) ? ssh.at(key) : std::vector<std::string>{}) {
      list.push_back(expand_like_ssh(v, ssh, alias, context));
    }
    return specctl::util::join(list, " | ");
  };

  // ssh lowercases a host name before it uses it; SshConfigEntry keeps it as written.
  expect("hostname", lower(e.hostname.value_or(alias)), lower(one("hostname")));
  expect("user", e.user.value_or(context.local_user), one("user"));
  expect("port", std::to_string(e.port.value_or(22)), one("port"));
  // Without IdentityFile, ssh prints its defaults, ~/.ssh/id_rsa first.
  expect("identityfile", e.identity_files.empty() ? "~/.ssh/id_rsa" : specctl::util::join(e.identity_files, " | "),
         e.identity_files.empty() ? one("identityfile") : expanded("identityfile"));
  expect("identitiesonly", e.identities_only.value_or(false) ? "yes" : "no", one("identitiesonly"));
  expect("certificatefile", specctl::util::join(e.certificate_files, " | "), expanded("certificatefile"));
  // ssh prints the last hop as it parsed it: an ssh:// URL loses its scheme.
  auto hops = e.proxy_jump;
  if (!hops.empty() && hops.back().starts_with("ssh://")) {
    hops.back() = hops.back().substr(6);
  }
  expect("proxyjump", hops.empty() ? "<absent>" : specctl::util::join(hops, ","), one("proxyjump"));
  expect("proxycommand", e.proxy_command.value_or("<absent>"),
         ssh.contains("proxycommand") ? expand_like_ssh(one("proxycommand"), ssh, alias, context) : "<absent>");
  expect("connecttimeout", e.connect_timeout ? std::to_string(*e.connect_timeout) : "none", one("connecttimeout"));
  expect("serveraliveinterval", std::to_string(e.server_alive_interval.value_or(0)), one("serveraliveinterval"));
  expect("serveralivecountmax", std::to_string(e.server_alive_count_max.value_or(3)), one("serveralivecountmax"));
  expect("stricthostkeychecking", e.strict_host_key_checking.value_or("ask"), yes_no(one("stricthostkeychecking")));
  // ssh expands a leading "~" of these (misc.c tilde_expand).
  std::vector<std::string> files;
  for (const auto& f : e.user_known_hosts_files) {
    files.push_back(f.starts_with("~/") ? context.home + f.substr(1) : f);
  }
  auto known = files.empty() ? context.home + "/.ssh/known_hosts " + context.home + "/.ssh/known_hosts2"
                             : specctl::util::join(files, " ");
  expect("userknownhostsfile", known, one("userknownhostsfile"));
  expect("hostkeyalias", e.host_key_alias ? lower(*e.host_key_alias) : "<absent>", one("hostkeyalias"));
  // Each unsupported keyword is one ssh applies, with the value ssh took (ssh prints some
  // converted: ControlPath and IdentityAgent expanded, ControlPersist in seconds).
  for (const auto& setting : e.unsupported) {
    auto space = setting.find(' ');
    auto key = lower(setting.substr(0, space));
    if (!ssh.contains(key)) {
      out.push_back(fmt::format("unsupported \"{}\": ssh -G prints no {}", setting, key));
    } else if (key != "controlpath" && key != "identityagent" && key != "controlpersist") {
      expect("unsupported " + key, setting.substr(space + 1), yes_no(one(key)));
    }
  }
  return out;
}

struct ConfigCase {
  std::string name;
  // File name (under the case's folder) → text; "config" is the one ssh -F reads.
  // "@DIR@" stands for the folder, "@LOCALUSER@" for the local user.
  std::vector<std::pair<std::string, std::string>> files;
  std::vector<std::string> aliases;
};

const char* const k_first_match_config =
    "# global defaults come first in effect only where nothing more specific was said\n"
    "Host gpu1\n  HostName 10.1.230.174\n  User root\n  Port 2222\n  IdentityFile ~/.ssh/gpu_ed25519\n\n"
    "Host gpu* !gpu-bastion\n  User ubuntu\n  HostName %h.cluster.internal\n\n"
    "Host \"quoted\"\n  HostName=quoted.example\n\nHost *\n  User fallback\n  Port 22\n";

std::vector<ConfigCase> config_cases() {
  return {
      {"first match", {{"config", k_first_match_config}}, {"gpu1", "gpu7", "gpu-bastion", "quoted", "elsewhere"}},
      {"several patterns and negation",
       {{"config", "Host web? db-* !db-admin bastion\n  User ops\n  IdentityFile ~/.ssh/ops\nHost db-admin\n"
                   "  User dba\n  IdentityFile ~/.ssh/dba\nHost *.internal\n  ProxyJump jump@bastion:2222\n"
                   "  IdentitiesOnly yes\nHost *\n  IdentityFile ~/.ssh/common\n  IdentityFile ~/.ssh/ops\n"
                   "  ServerAliveInterval 30\n  ServerAliveCountMax 4\n  ConnectTimeout 1m\n"}},
       {"web1", "web12", "db-main", "db-admin", "bastion", "node.internal", "other"}},
      {"Match",
       {{"config", "Host gpu*\n  HostName %h.example.com\nMatch host *.example.com user alice\n  Port 2201\n"
                   "Match host *.EXAMPLE.com\n  User bob\nMatch user bob\n  IdentityFile ~/.ssh/bob\n"
                   "Match originalhost gpu2\n  StrictHostKeyChecking accept-new\n"
                   "Match localuser @LOCALUSER@ originalhost gpu3,other\n  HostKeyAlias Local-Alias\n"
                   "Match !localuser @LOCALUSER@\n  Port 1\nMatch exec \"exit 1\" host *\n  Port 9999\n"
                   "Match host real-*.example\n  ConnectTimeout 3\nMatch all\n  ServerAliveCountMax 9\n"}},
       {"gpu1", "gpu2", "gpu3", "other", "real-x.example"}},
      {"Match sees what is set so far",
       {{"config", "Host k1\n  HostName real-k1.example\n  User kuser\nMatch host real-*.example\n  Port 2444\n"
                   "Match host k1\n  Port 1111\nMatch user kuser\n  ConnectTimeout 11\nHost k2\n  User late\n"
                   "Match user late\n  IdentitiesOnly yes\nMatch originalhost k1\n  HostKeyAlias k1-alias\n"}},
       {"k1", "k2", "k3"}},
      {"Include",
       {{"config", "Include @DIR@/conf.d/*.conf @DIR@/missing-*.conf @DIR@/nothing.conf\nHost included-*\n"
                   "  Include @DIR@/inside.conf\n  IdentityFile ~/.ssh/after-include\nHost *\n  User last\n"
                   "  Port 2099\n"},
        {"inside.conf", "User from-inside\nHost included-b\n  Port 2022\nMatch all\n  ConnectTimeout 8\n"},
        {"conf.d/10-a.conf", "Host alpha\n  HostName alpha.example\n  User a10\n"},
        {"conf.d/20-b.conf", "Host alpha beta\n  User b20\n  Port 2020\n  IdentityFile ~/.ssh/b20\n"},
        {"conf.d/ignored.txt", "Host *\n  User never\n"}},
       {"alpha", "beta", "included-a", "included-b", "zeta"}},
      {"tokens",
       {{"config", "Host tok*\n  HostName %h.Tokens.example\n  User tokuser\n  Port 2200\n"
                   "  IdentityFile ~/.ssh/id_%h_%r_%p\n  IdentityFile /keys/%n/%u/%%/%d\n"
                   "  CertificateFile ~/.ssh/cert_%h-cert.pub\n"
                   "  UserKnownHostsFile ~/.ssh/kh_%h_%n_%p_%r_%u_%l_%L_%i_%C_%k /etc/kh_%%_%d\n"
                   "  ProxyCommand nc -X connect -x proxy:3128 %h %p # %r %n %k %%\n  HostKeyAlias TokAlias\n"
                   "Host pct*\n  HostName PCT%%%h\n  IdentityFile ~/.ssh/${SPECCTL_TEST_SSH_CONFIG_VAR}/key\n"
                   "  UserKnownHostsFile ${SPECCTL_TEST_SSH_CONFIG_VAR}/known\n"}},
       {"tok1", "tokB", "pct1"}},
      {"ProxyJump and ProxyCommand",
       {{"config", "Host pj-first\n  ProxyJump a@hop1:2201,hop2\n  ProxyCommand nc %h %p\nHost pc-first\n"
                   "  ProxyCommand ssh -W %h:%p gate\n  ProxyJump hop3\nHost none-jump\n  ProxyJump none\n"
                   "Host none-cmd\n  ProxyCommand none\nHost uri-jump\n  ProxyJump ssh://u@hop5:2205\nHost none-*\n"
                   "  ProxyJump hop4\n  ProxyCommand nc x 1\n  UserKnownHostsFile none\n  ConnectTimeout none\n"
                   "  ServerAliveInterval none\n  StrictHostKeyChecking off\n  IdentitiesOnly no\nHost *\n"
                   "  ConnectTimeout 5\n  ServerAliveInterval 6\n  ProxyCommand nc %h %p\n  IdentitiesOnly yes\n"}},
       {"pj-first", "pc-first", "none-jump", "none-cmd", "uri-jump", "plain"}},
      {"unsupported keywords",
       {{"config", "Host unsup\n  GSSAPIAuthentication yes\n  PKCS11Provider /usr/lib/x.so\n  ControlMaster auto\n"
                   "  ControlPath ~/.ssh/cm-%C\n  ControlPersist 10m\n  HostbasedAuthentication yes\n"
                   "  PasswordAuthentication yes\n  KbdInteractiveAuthentication yes\n  BindAddress 127.0.0.1\n"
                   "  Ciphers aes128-ctr\n  ForwardAgent yes\n  SendEnv LANG\nHost unsup-off\n"
                   "  GSSAPIAuthentication no\n  PKCS11Provider none\n  ControlMaster no\n  ControlPath none\n"
                   "  AddressFamily any\nHost *\n  GSSAPIAuthentication yes\n  ControlMaster auto\n"
                   "  IdentityAgent /tmp/agent.sock\n  AddressFamily inet\n"}},
       {"unsup", "unsup-off", "elsewhere"}},
      {"Match final and canonical",
       {{"config", "Host fin\n  HostName Final.Example.COM\nMatch final host final.example.com\n  User finaluser\n"
                   "Match canonical\n  Port 2345\nMatch !final\n  IdentityFile ~/.ssh/first-pass\n"
                   "Host final.example.com\n  IdentitiesOnly yes\nHost fin\n  ConnectTimeout 4\n"}},
       {"fin", "other"}},
      {"CanonicalizeHostname",
       {{"config", "Host can\n  CanonicalizeHostname yes\n  HostName can.example\nHost can.example\n  User canuser\n"}},
       {"can", "other"}},
      {"syntax",
       {{"config", "IgnoreUnknown UseKeychain,Add*X\nHOST CaseAlias\n  hostNAME = case.example # comment\n"
                   "  \"User\" \"spaced user\"\n  Port=2022\n  UseKeychain yes\nHost 'single' \"dq\" tab\tsep\n"
                   "  IdentityFile \"/keys/with space\"\n  IdentityFile /keys/back\\ slash\n"
                   "  IdentityFile '/keys/single # not a comment'\n  CertificateFile /certs/a#b\nHost *\n"
                   "  ServerAliveInterval 1h\n  AddKeysToAgentX whatever\n"}},
       {"CaseAlias", "single", "dq", "sep", "caseALIAS"}},
      {"first value wins, lists gather",
       {{"config", "Host multi\n  IdentityFile ~/.ssh/one\n  CertificateFile ~/.ssh/one-cert.pub\n"
                   "  UserKnownHostsFile ~/.ssh/kh1 ~/.ssh/kh2\n  User first\nHost multi\n"
                   "  IdentityFile ~/.ssh/two\n  IdentityFile ~/.ssh/one\n  CertificateFile ~/.ssh/two-cert.pub\n"
                   "  UserKnownHostsFile ~/.ssh/kh3\n  User second\n  Port 2\nHost *\n  Port 3\n"
                   "  StrictHostKeyChecking yes\n"}},
       {"multi", "other"}},
  };
}

// Writes a file as ssh wants an included one: not writable by others.
void put(const fs::path& path, std::string_view text) {
  fs::create_directories(path.parent_path());
  specctl::test::write_file(path, text);
  fs::permissions(path, fs::perms::owner_read | fs::perms::owner_write);
}

fs::path write_case(const ConfigCase& c, const fs::path& dir, const SshConfigContext& context) {
  for (const auto& [name, text] : c.files) {
    put(dir / name, replace_all(replace_all(text, "@DIR@", dir.string()), "@LOCALUSER@", context.local_user));
  }
  return dir / "config";
}

} // namespace

TEST_CASE("ssh config agrees with ssh -G on every keyword specctl reads") {
  if (auto why = ssh_unavailable()) {
    specctl::test::skip(*why);
    return;
  }
  ::setenv("SPECCTL_TEST_SSH_CONFIG_VAR", "envdir", 1);
  const auto context = password_context();
  TempDir scratch("specctl-ssh-config");
  int compared = 0;
  int index = 0;
  for (const auto& c : config_cases()) {
    auto dir = scratch.path() / std::to_string(++index);
    auto config = write_case(c, dir, context);
    for (const auto& alias : c.aliases) {
      CAPTURE(c.name);
      CAPTURE(alias);
      auto ours = lookup_ssh_config_file(config.string(), alias, context);
      REQUIRE_MESSAGE(ours.has_value(), why(ours));
      auto ssh = ssh_g(config, alias, scratch);
      REQUIRE_MESSAGE(ssh.exit_code == 0, ssh.output);
      auto diffs = differences(*ours, ssh.view, alias, context);
      CHECK_MESSAGE(diffs.empty(), specctl::util::join(diffs, "\n"));
      ++compared;
    }
  }
  // 12 configs, 48 aliases: every SshConfigEntry field for each.
  CHECK(compared == 48);
}

TEST_CASE("ssh config errors name the file and line, and ssh -G refuses the same configs") {
  if (auto why = ssh_unavailable()) {
    specctl::test::skip(*why);
    return;
  }
  // Where specctl says the error is, after the config's path; whether ssh -G names the line.
  struct BadConfig {
    std::string name, text, where;
    bool ssh_names_line = true;
  };
  const std::vector<BadConfig> cases = {
      {"unknown keyword", "Host a\n  HostNmae x\n", ":2: ", true},
      {"unknown keyword where no block applies", "Host other\n  Frobnicate yes\n", ":2: ", true},
      {"bad port", "Host a\n  Port abc\n", ":2: ", true},
      {"port zero", "Port 0\n", ":1: ", true},
      {"bad time", "ConnectTimeout soon\n", ":1: ", true},
      {"bad flag", "IdentitiesOnly maybe\n", ":1: ", true},
      {"bad StrictHostKeyChecking", "StrictHostKeyChecking sometimes\n", ":1: ", true},
      {"negative count", "ServerAliveCountMax -1\n", ":1: ", true},
      {"unknown Match criterion", "Match hots a\n", ":1: ", true},
      {"Match criterion without value", "Host x\nMatch host\n", ":2: ", true},
      {"Match all with others", "Match all host a\n", ":1: ", true},
      {"Match alone", "Match # nothing\n", ":1: ", true},
      {"unbalanced quotes", "User \"a b\n", ":1: ", true},
      {"no value", "User\n", ":1: ", true},
      {"extra words", "Port 22 23\n", ":1: ", true},
      {"bad ProxyJump", "Host other\n  ProxyJump a@\n", ":2: ", true},
      {"none with other files", "UserKnownHostsFile none /x\n", ":1: ", true},
      {"Include nested too deep", "Include @DIR@/config\n", ":1: ", false},
  };
  const auto context = password_context();
  TempDir scratch("specctl-ssh-config");
  int index = 0;
  for (const auto& c : cases) {
    CAPTURE(c.name);
    auto dir = scratch.path() / std::to_string(++index);
    auto config = write_case({c.name, {{"config", c.text}}, {}}, dir, context);
    auto ours = lookup_ssh_config_file(config.string(), "a", context);
    REQUIRE_FALSE(ours.has_value());
    CHECK(std::string(ours.error().what()).starts_with(config.string() + c.where));
    CHECK(ours.error().kind() == specctl::ErrorKind::bad_input);
    auto ssh = ssh_g(config, "a", scratch);
    CHECK_MESSAGE(ssh.exit_code != 0, ssh.output);
    if (c.ssh_names_line) {
      CHECK_MESSAGE(ssh.output.find("line " + c.where.substr(1, c.where.size() - 3)) != std::string::npos, ssh.output);
    }
  }

  // An included file that others may write, or that cannot be opened.
  {
    auto dir = scratch.path() / "include";
    auto config = write_case(
        {"include", {{"config", "Include @DIR@/writable.conf\n"}, {"writable.conf", "User x\n"}}, {}}, dir, context);
    fs::permissions(dir / "writable.conf", fs::perms::others_write, fs::perm_options::add);
    auto ours = lookup_ssh_config_file(config.string(), "a", context);
    REQUIRE_FALSE(ours.has_value());
    CHECK(std::string(ours.error().what()) ==
          fmt::format("{}:1: Include: bad owner or permissions on \"{}/writable.conf\" (ssh refuses a file that "
                      "another user owns or that others may write)",
                      config.string(), dir.string()));
    CHECK(ssh_g(config, "a", scratch).exit_code != 0);

    fs::create_symlink("loop.conf", dir / "loop.conf");
    specctl::test::write_file(dir / "config", "Include " + (dir / "loop.conf").string() + "\n");
    ours = lookup_ssh_config_file(config.string(), "a", context);
    REQUIRE_FALSE(ours.has_value());
    CHECK(std::string(ours.error().what()).starts_with(config.string() + ":1: Include: cannot read \""));
    CHECK(ssh_g(config, "a", scratch).exit_code != 0);
  }
}

TEST_CASE("ssh config resolves a relative Include in ~/.ssh, as ssh does with the same HOME") {
  TempDir home("specctl-ssh-home");
  auto ssh_dir = home.path() / ".ssh";
  put(ssh_dir / "extra.conf", "Host rel\n  User relative\n");
  put(ssh_dir / "conf.d/a.conf", "Host rel\n  Port 2201\n");
  put(ssh_dir / "tilde.conf", "Host rel\n  HostName rel.example\n");
  put(ssh_dir / "bad.conf", "\n  Port x\n");
  const SshConfigContext context{home.path().string(), "alice"};
  const std::string config = "Include extra.conf conf.d/*.conf ~/.ssh/tilde.conf ~/.ssh/none-*.conf\n";
  auto entry = lookup_ssh_config(config, "rel", context);
  REQUIRE_MESSAGE(entry.has_value(), why(entry));
  CHECK(entry->user == "relative");
  CHECK(entry->port == 2201);
  CHECK(entry->hostname == "rel.example");

  // An error inside an included file names that file.
  auto bad = lookup_ssh_config("Include bad.conf\n", "rel", context, "~/.ssh/config");
  REQUIRE_FALSE(bad.has_value());
  CHECK(std::string(bad.error().what()) ==
        (ssh_dir / "bad.conf").string() + ":2: Port \"x\" is not a port number (1 to 65535) or a TCP service name");

  if (auto why = ssh_unavailable()) {
    specctl::test::skip(*why);
    return;
  }
  // ssh's glob(3) expands Include's "~" with $HOME (not the password database).
  auto ssh = ssh_g(home.write("config", config), "rel", home, {"HOME=" + home.path().string()});
  REQUIRE_MESSAGE(ssh.exit_code == 0, ssh.output);
  auto diffs = differences(*entry, ssh.view, "rel", password_context());
  CHECK_MESSAGE(diffs.empty(), specctl::util::join(diffs, "\n"));
}

TEST_CASE("ssh config lookup follows OpenSSH's first-match rules") {
  const char* config = k_first_match_config;
  // The exact alias: the first value wins.
  auto gpu1 = lookup(config, "gpu1");
  CHECK(gpu1.hostname == "10.1.230.174");
  CHECK(gpu1.user == "root");
  CHECK(gpu1.port == 2222);
  CHECK(gpu1.identity_files == std::vector<std::string>{"~/.ssh/gpu_ed25519"});
  // A glob, with %h.
  auto gpu7 = lookup(config, "gpu7");
  CHECK(gpu7.hostname == "gpu7.cluster.internal");
  CHECK(gpu7.user == "ubuntu");
  CHECK(gpu7.port == 22);
  CHECK(gpu7.identity_files.empty());
  // Negation rules the block out.
  CHECK_FALSE(lookup(config, "gpu-bastion").hostname.has_value());
  CHECK(lookup(config, "gpu-bastion").user == "fallback");
  // Key=value and quotes.
  CHECK(lookup(config, "quoted").hostname == "quoted.example");
  // An unknown host only gets the catch-all, which still makes it an alias.
  CHECK(lookup(config, "elsewhere").user == "fallback");
  CHECK_FALSE(lookup(config, "elsewhere").empty());
  // A host no block names is no alias; an unsupported keyword alone makes one.
  CHECK(lookup("Host gpu1\n  User root\n", "gpu2").empty());
  CHECK_FALSE(lookup("Host gpu1\n  GSSAPIAuthentication yes\n", "gpu1").empty());
  // Host patterns are case-sensitive, Match host is not.
  CHECK(lookup("Host gpu1\n  User a\n", "GPU1").empty());
  CHECK(lookup("Match host gpu1\n  User a\n", "GPU1").user == "a");
  // A '*' in the alias is matched by a pattern's '*' (what fuzz_ssh_config found,
  // tests/data/fuzz/ssh_config-star-in-alias.bin).
  CHECK(lookup("Host *\n  User root\n  Port 222\n", "*quotet").user == "root");
  CHECK(lookup("Host a*c\n  User x\n", "a*b").empty());
}

TEST_CASE("ssh config keeps the first value and gathers the lists as ssh does") {
  auto e = lookup("Host multi\n  IdentityFile ~/.ssh/one\n  User first\n  ConnectTimeout none\n"
                  "Host multi\n  IdentityFile ~/.ssh/two\n  IdentityFile ~/.ssh/one\n  User second\n"
                  "  ConnectTimeout 1m30s\n  StrictHostKeyChecking off\n",
                  "multi");
  CHECK(e.identity_files == std::vector<std::string>{"~/.ssh/one", "~/.ssh/two"});
  CHECK(e.user == "first");
  // "none" leaves a time unset, so that a later line still sets it.
  CHECK(e.connect_timeout == 90);
  CHECK(e.strict_host_key_checking == "no");

  // ProxyJump and ProxyCommand: the first set wins, "none" included.
  {
    auto jump = lookup("ProxyJump user@hop1:2201,hop2\nProxyCommand nc %h %p\n", "x");
    CHECK(jump.proxy_jump == std::vector<std::string>{"user@hop1:2201", "hop2"});
    CHECK_FALSE(jump.proxy_command.has_value());
    auto command = lookup("ProxyCommand ssh -W %h:%p gate\nProxyJump hop\n", "x");
    CHECK(command.proxy_command == "ssh -W x:22 gate");
    CHECK(command.proxy_jump.empty());
    CHECK(lookup("ProxyCommand none\nProxyJump hop\n", "x").empty());
    // Debian's ssh 9.2 lets a ProxyCommand follow "ProxyJump none" (OpenSSH 9.2 did not).
    auto jump_none = lookup("ProxyJump none\nProxyJump hop\nProxyCommand nc %h %p\n", "x");
    CHECK(jump_none.proxy_command == "nc x 22");
    CHECK(jump_none.proxy_jump.empty());
  }
  CHECK(lookup("UserKnownHostsFile none\nUserKnownHostsFile /x\n", "x").user_known_hosts_files ==
        std::vector<std::string>{"none"});
}

TEST_CASE("ssh config expands tokens only in the keywords OpenSSH expands them in") {
  const auto e = lookup("Host tok\n  HostName %h.Example.com\n  User u%h\n  Port 2200\n  HostKeyAlias a%h\n"
                        "  IdentityFile ~/.ssh/%h_%r_%p_%n_%u_%d_%%\n  CertificateFile %k.pub\n"
                        "  UserKnownHostsFile ~/kh/%h\n  ProxyCommand nc %h %p %r %n %k %%\n",
                        "tok");
  CHECK(e.hostname == "tok.Example.com");
  CHECK(e.user == "u%h");
  CHECK(e.host_key_alias == "a%h");
  // The tokens use the host name as ssh connects to it: lowercased.
  CHECK(e.identity_files == std::vector<std::string>{"~/.ssh/tok.example.com_u%h_2200_tok_alice_/home/alice_%"});
  CHECK(e.certificate_files == std::vector<std::string>{"a%h.pub"});
  CHECK(e.user_known_hosts_files == std::vector<std::string>{"~/kh/tok.example.com"});
  CHECK(e.proxy_command == "nc tok.example.com 2200 u%h tok a%h %");

  // Unknown tokens and environment variables.
  CHECK(error_of("IdentityFile ~/%x\n") ==
        "~/.ssh/config:1: IdentityFile \"~/%x\": unknown token %x (this keyword takes %C %L %i %k %l %n %p %d "
        "%h %r %u and %%)");
  CHECK(error_of("HostName %p.example\n") ==
        "~/.ssh/config:1: HostName \"%p.example\": unknown token %p (this keyword takes %h and %%)");
  ::setenv("SPECCTL_TEST_SSH_CONFIG_VAR", "envdir", 1);
  CHECK(lookup("IdentityFile ~/${SPECCTL_TEST_SSH_CONFIG_VAR}/key\n", "x").identity_files ==
        std::vector<std::string>{"~/envdir/key"});
  CHECK(error_of("IdentityFile ${SPECCTL_TEST_SSH_CONFIG_UNSET}\n") ==
        "~/.ssh/config:1: IdentityFile \"${SPECCTL_TEST_SSH_CONFIG_UNSET}\": environment variable "
        "${SPECCTL_TEST_SSH_CONFIG_UNSET} is not set");
}

TEST_CASE("ssh config does not run Match exec and lists what specctl's transport does not implement") {
  auto exec = lookup("Host gpu*\n  User early\nMatch exec \"test -e /etc/%h\" host gpu1\n  Port 2222\n"
                     "Match host other exec false\n  Port 3333\n",
                     "gpu1");
  CHECK_FALSE(exec.port.has_value());
  CHECK(exec.user == "early");
  // Only the exec that ssh would have run is noted: the second line failed before it.
  CHECK(exec.notes == std::vector<std::string>{"Match exec at ssh config:3 (specctl does not run commands from "
                                               "ssh_config; treated as not matching)"});

  auto e = lookup("Host unsup\n  GSSAPIAuthentication yes\n  PKCS11Provider /usr/lib/x.so\n  ControlMaster auto\n"
                  "  ControlPath ~/.ssh/cm-%C\n  PasswordAuthentication yes\n  KbdInteractiveAuthentication yes\n"
                  "  ForwardAgent yes\n  KnownHostsCommand /bin/kh %H\n  SmartcardDevice /x\n"
                  "Host *\n  GSSAPIAuthentication no\n  HostbasedAuthentication no\n  ControlPersist no\n"
                  "  IdentityAgent SSH_AUTH_SOCK\n  AddressFamily any\n  SecurityKeyProvider internal\n",
                  "unsup");
  CHECK(e.notes.empty());
  CHECK(e.unsupported == std::vector<std::string>{"GSSAPIAuthentication yes", "PKCS11Provider /usr/lib/x.so",
                                                  "ControlMaster auto", "ControlPath ~/.ssh/cm-%C",
                                                  "KnownHostsCommand /bin/kh %H", "SecurityKeyProvider internal"});
}

TEST_CASE("ssh config error messages") {
  CHECK(error_of("Host a\n  HostNmae x\n") ==
        "~/.ssh/config:2: unknown keyword \"HostNmae\" (did you mean \"HostName\"?)");
  CHECK(error_of("Port abc\n") ==
        "~/.ssh/config:1: Port \"abc\" is not a port number (1 to 65535) or a TCP service name");
  CHECK(error_of("Match hots a\n") == "~/.ssh/config:1: Match has an unknown criterion \"hots\" (OpenSSH 9.2 knows "
                                      "all, canonical, final, exec, host, originalhost, user, localuser)");
  CHECK(error_of("User \"a b\n") == "~/.ssh/config:1: unbalanced quotes");
  CHECK(error_of("\n\nPort 22 23\n") == "~/.ssh/config:3: Port takes one value: \"23\" is one too many");
  CHECK(error_of("ConnectTimeout soon\n") ==
        "~/.ssh/config:1: ConnectTimeout \"soon\" is not a time (seconds, or with s, m, h, d, w: \"1m30s\")");
  // IgnoreUnknown covers what it names, once it is set.
  CHECK(lookup("IgnoreUnknown UseKeychain\nUseKeychain yes\nUser x\n", "a").user == "x");
  CHECK(error_of("UseKeychain yes\nIgnoreUnknown UseKeychain\n").starts_with("~/.ssh/config:1: unknown keyword"));
  // Lines ssh ignores: deprecated keywords, an unclosed quote in the keyword itself.
  CHECK(lookup("Cipher blowfish\nUseRoaming no\n\"User a\nUser b\n", "a").user == "b");
}

TEST_CASE("ssh config file lookups") {
  TempDir dir("specctl-ssh-config");
  auto missing = lookup_ssh_config_file((dir.path() / "missing").string(), "gpu1", k_alice);
  REQUIRE(missing.has_value());
  CHECK(missing->empty());
  auto path = dir.write("config", "Host gpu1\n  User root\n");
  auto found = lookup_ssh_config_file(path, "gpu1", k_alice);
  REQUIRE(found.has_value());
  CHECK(found->user == "root");

  const char* set = std::getenv("SPECCTL_SSH_CONFIG");
  const auto saved = set != nullptr ? std::optional<std::string>(set) : std::nullopt;
  ::setenv("SPECCTL_SSH_CONFIG", path.c_str(), 1);
  CHECK(specctl::remote::default_ssh_config_path() == path);
  ::unsetenv("SPECCTL_SSH_CONFIG");
  const char* home = std::getenv("HOME");
  CHECK(specctl::remote::default_ssh_config_path() == std::string(home != nullptr ? home : "") + "/.ssh/config");
  if (saved) {
    ::setenv("SPECCTL_SSH_CONFIG", saved->c_str(), 1);
  }
}
