#pragma once

// The pieces of the ~/.ssh/config reader (src/remote/ssh_config*.cpp): OpenSSH
// 9.2's keyword table, its way of cutting a line into words, its value syntaxes
// and its %-tokens. Each follows the readconf.c or misc.c function named in its
// comment, so that a difference from ssh can be traced to one place.

#include <specctl/remote/ssh_config.hpp>
#include <specctl/util/error.hpp>

#include <array>
#include <expected>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace specctl::remote::sshcfg {

// What the reader does with a keyword's value.
enum class Op : unsigned char {
  host,
  match,
  include,
  ignore_unknown,
  hostname,
  user,
  port,
  identity_file,
  certificate_file,
  identities_only,
  proxy_jump,
  proxy_command,
  connect_timeout,
  server_alive_interval,
  server_alive_count_max,
  strict_host_key_checking,
  user_known_hosts_file,
  host_key_alias,
  canonicalize_hostname,
  // The rest of the line is the value (LocalCommand, RemoteCommand, KnownHostsCommand).
  command,
  // A keyword specctl does not read: only its number of words is checked.
  other,
  // Deprecated or removed from OpenSSH: ssh ignores the line, whatever it holds.
  ignored,
};

inline constexpr int k_unlimited = -1;

// How the reader checks the first value of a keyword it does not read otherwise, so
// that it refuses what ssh refuses.
enum class Check : unsigned char {
  none,
  flag,         // yes, no, true, false
  choice,       // one of Keyword::choices, without regard to case
  time,         // convtime() or "none"
  count,        // 0 to INT_MAX
  flag_or_time, // ControlPersist: yes, no, true, false or a time
};

struct Keyword {
  // As ssh_config(5) spells it; looked up without regard to case.
  std::string_view name;
  Op op;
  int min_words;
  int max_words; // k_unlimited: no limit
  // Setting it changes how ssh connects in a way specctl's transport does not follow
  // (SshConfigEntry::unsupported).
  bool unsupported = false;
  // Values that leave the feature off, besides "no", "none" and "false" ("any" for AddressFamily).
  std::array<std::string_view, 3> also_off{};
  Check check = Check::none;
  // For Check::choice: the values, comma-separated.
  std::string_view choices{};
};

// The keyword with this lower-case name, or null when OpenSSH 9.2 (as Debian builds it) has none.
const Keyword* find_keyword(std::string_view lowercase_name);

// Every keyword's name, for did-you-mean suggestions.
std::vector<std::string> keyword_names();

// What is wrong with the value of a keyword specctl does not read (Keyword::check), as
// ssh would refuse it; nullopt when nothing is.
std::optional<std::string> value_problem(const Keyword& keyword, const std::string& value);

std::string lowercase(std::string_view text);

// misc.c strdelim(): the next word of a line, split at whitespace, a double quote
// or one '=' (split_equals); nullopt where strdelim returns NULL.
class Delimiter {
public:
  explicit Delimiter(std::string text) : m_text(std::move(text)) {}

  std::optional<std::string> next(bool split_equals = true);
  // What is left: empty where strdelim's pointer is NULL or at the end.
  std::string rest() const;
  bool done() const { return m_pos == std::string::npos || m_pos >= m_text.size(); }
  // As strdelim's caller setting the pointer to NULL: the rest is consumed.
  void finish() { m_pos = std::string::npos; }

private:
  std::string m_text;
  std::size_t m_pos = 0; // npos where strdelim's pointer is NULL
};

// misc.c argv_split(): words split at spaces and tabs, with "..." and '...' quotes,
// backslash escapes and a '#' that starts a word ending the line; nullopt when a
// quote is left open.
std::optional<std::vector<std::string>> split_words(std::string_view text);

// misc.c convtime(): "90", "90s", "1m30s", "2h", "1d", "1w"; nullopt when invalid.
std::optional<int> parse_seconds(std::string_view text);
// misc.c a2port(): 0 to 65535 or a TCP service name from /etc/services; nullopt otherwise.
std::optional<int> parse_port(std::string_view text);
// misc.c atoi_err(): 0 to INT_MAX.
std::optional<int> parse_count(std::string_view text);
// readconf.c multistate_flag: yes, no, true, false, without regard to case.
std::optional<bool> parse_flag(std::string_view text);

// match.c match_pattern_list(): 1 when a pattern of the comma-separated list matches,
// -1 when a negated one (!pattern) does, 0 otherwise. `lower`: the patterns are lowercased.
int match_pattern_list(std::string_view text, std::string_view patterns, bool lower);

// ssh.c is_addr(): a numeric IPv4 or IPv6 address, which ssh does not lowercase.
bool is_address(std::string_view host);

// readconf.c parse_jump() for one hop: [user@]host[:port] or ssh://[user@]host[:port].
bool valid_jump_hop(std::string_view hop);
// readconf.c parse_jump(): the hops of a ProxyJump other than "none", first hop first;
// the error is the hop that is not valid.
std::expected<std::vector<std::string>, std::string> split_jump(std::string_view written);

// One %-token and what it stands for.
struct Token {
  char key;
  std::string value;
};

// misc.c percent_expand() (and percent_dollar_expand() with `environment`):
// every %x by its token's value, %% by %, and ${NAME} by the environment
// variable. The error says what is wrong ("unknown token %x").
std::expected<std::string, std::string> expand_tokens(std::string_view text, const std::vector<Token>& tokens,
                                                      bool environment);

// SHA-1 (FIPS 180-4) as lower-case hex, for %C: ssh hashes the connection with it.
std::string sha1_hex(std::string_view bytes);

// A value and where it was read ("FILE:LINE"), for errors found when it is expanded.
struct Located {
  std::string value;
  std::string where;
};

// What the lines read so far have set, before tokens are expanded: readconf.c's Options,
// for the keywords specctl reads. Unset values are the ones a later line may still set.
struct Settings {
  std::optional<Located> hostname;
  // The second pass starts with the host name fixed (ssh.c sets options.hostname).
  bool hostname_fixed = false;
  std::optional<std::string> user;
  std::optional<int> port;
  std::vector<Located> identity_files;
  std::vector<Located> certificate_files;
  std::optional<bool> identities_only;
  // As written; "none" counts as set, as in ssh.
  std::optional<Located> proxy_command;
  struct Jump {
    bool none = false;
    std::vector<std::string> hops;
  };
  std::optional<Jump> proxy_jump;
  std::optional<int> connect_timeout;
  std::optional<int> server_alive_interval;
  std::optional<int> server_alive_count_max;
  std::optional<std::string> strict_host_key_checking;
  std::vector<Located> user_known_hosts_files;
  std::optional<std::string> host_key_alias;
  std::optional<std::string> ignore_unknown;
  // 0 no, 1 yes, 2 always.
  std::optional<int> canonicalize_hostname;
  // The unsupported keywords set so far (their first value wins, listed or not).
  std::vector<std::string_view> unsupported_seen;
  std::vector<std::string> unsupported;
  std::vector<std::string> notes;
  // A "Match final" was seen: ssh reads the files a second time.
  bool want_final_pass = false;
};

// One reading of the whole configuration (ssh reads it twice for Match final and
// CanonicalizeHostname). `host` is what Host lines match: the alias in the first pass,
// the host name ssh will connect to in the second (final) one.
struct Pass {
  std::string_view alias;
  std::string host;
  bool final = false;
};

std::expected<void, Error> read_pass(std::string_view text, const std::string& origin, const Pass& pass,
                                     const SshConfigContext& context, Settings& settings);

// The HostName as ssh uses it: with %h (the alias) and %% expanded.
std::expected<std::string, Error> expanded_hostname(const Located& hostname, std::string_view alias);

// A config file's bytes; nullopt when it does not exist. `check_owner`: refuse a file
// that someone other than this user and root owns or may write, as ssh does for Include.
// The error says what went wrong with the file, without a location.
std::expected<std::optional<std::string>, std::string> read_config_file(const std::string& path, bool check_owner);

Error config_error(std::string_view where, std::string_view message);

} // namespace specctl::remote::sshcfg
