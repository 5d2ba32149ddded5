// One pass of OpenSSH 9.2's reading of a client config (readconf.c
// process_config_line_depth, match_cfg_line, read_config_file_depth): each line
// in order, Host and Match switching the lines that follow on or off, Include
// reading other files in place, and the first value of each keyword winning.

#include "ssh_config_internal.hpp"

#include <specctl/util/text.hpp>

#include <fmt/format.h>
#include <glob.h>

#include <algorithm>

namespace specctl::remote::sshcfg {

namespace {

// readconf.c READCONF_MAX_DEPTH, ssh.h SSH_MAX_IDENTITY_FILES, SSH_MAX_CERTIFICATE_FILES,
// readconf.h SSH_MAX_HOSTS_FILES.
constexpr int k_max_include_depth = 16;
constexpr std::size_t k_max_identity_files = 100;
constexpr std::size_t k_max_certificate_files = 100;
constexpr std::size_t k_max_known_hosts_files = 32;

constexpr std::string_view k_match_criteria = "all, canonical, final, exec, host, originalhost, user, localuser";

// Where a line is, and how it is read.
struct Where {
  const std::string& file;
  int line;
  int depth;
  // Inside a file included from a block that does not apply: Host and Match never match.
  bool never_match;

  std::string text() const { return fmt::format("{}:{}", file, line); }
};

// glob(3)'s answer, freed with it.
struct GlobResult {
  glob_t paths{};
  GlobResult() = default;
  GlobResult(const GlobResult&) = delete;
  GlobResult& operator=(const GlobResult&) = delete;
  ~GlobResult() { ::globfree(&paths); }
};

// What was written after a command keyword (ProxyCommand, ProxyJump): readconf.c skips
// blanks and any '=' and keeps the rest of the line as it is, quotes and comments included.
std::string command_text(std::string_view rest) {
  auto start = rest.find_first_not_of(" \t\r\n=");
  return start == std::string_view::npos ? std::string{} : std::string(rest.substr(start));
}

bool turns_off(const Keyword& keyword, std::string_view value) {
  std::string v = lowercase(value);
  if (v == "no" || v == "none" || v == "false") {
    return true;
  }
  return std::find(keyword.also_off.begin(), keyword.also_off.end(), v) != keyword.also_off.end() && !v.empty();
}

// The option a keyword sets, for first-wins: aliases share one.
std::string_view option_of(const Keyword& keyword) {
  if (keyword.name == "SmartcardDevice") {
    return "PKCS11Provider";
  }
  if (keyword.name == "PubkeyAcceptedKeyTypes") {
    return "PubkeyAcceptedAlgorithms";
  }
  return keyword.name;
}

// "~" and "~/..." with the context's home, its glob characters escaped; "~user" is left to glob(3).
std::string glob_pattern(std::string path, const std::string& home) {
  if (path.empty() || path[0] != '~' || (path.size() > 1 && path[1] != '/')) {
    return path;
  }
  std::string escaped;
  for (char c : home) {
    if (c == '*' || c == '?' || c == '[' || c == '\\') {
      escaped += '\\';
    }
    escaped += c;
  }
  return escaped + path.substr(1);
}

class Reader {
public:
  Reader(const Pass& pass, const SshConfigContext& context, Settings& settings)
      : m_pass(pass), m_context(context), m_s(settings) {}

  std::expected<void, Error> read(std::string_view text, const std::string& file, int depth, bool& active,
                                  bool never_match) {
    std::size_t start = 0;
    int number = 0;
    while (start < text.size()) {
      std::size_t end = text.find('\n', start);
      ++number;
      Where at{file, number, depth, never_match};
      auto line = text.substr(start, end == std::string_view::npos ? std::string_view::npos : end - start);
      if (auto done = process(std::string(line), at, active); !done) {
        return done;
      }
      if (end == std::string_view::npos) {
        break;
      }
      start = end + 1;
    }
    return {};
  }

private:
  std::expected<void, Error> process(std::string text, const Where& at, bool& active) {
    // getline() and a C string: a NUL ends the line.
    if (auto nul = text.find('\0'); nul != std::string::npos) {
      text.resize(nul);
    }
    // Trailing whitespace and form feeds go, but never the first character.
    while (text.size() > 1 && std::string_view(" \t\r\n\f").find(text.back()) != std::string_view::npos) {
      text.pop_back();
    }
    if (text.empty()) {
      return {};
    }
    Delimiter cursor(text);
    auto keyword = cursor.next();
    if (keyword && keyword->empty()) {
      keyword = cursor.next();
    }
    // An unclosed quote in the keyword ends the line silently in ssh too.
    if (!keyword || keyword->empty() || (*keyword)[0] == '\n' || (*keyword)[0] == '#') {
      return {};
    }
    std::string rest = cursor.rest();
    if (rest.empty()) {
      return std::unexpected(config_error(at.text(), fmt::format("\"{}\" has no value", *keyword)));
    }
    std::string name = lowercase(*keyword);
    const Keyword* found = find_keyword(name);
    if (found == nullptr && !(m_s.ignore_unknown && match_pattern_list(name, *m_s.ignore_unknown, true) == 1)) {
      return std::unexpected(config_error(
          at.text(), fmt::format("unknown keyword \"{}\"{}", *keyword, util::did_you_mean(*keyword, keyword_names()))));
    }
    auto words = split_words(rest);
    if (!words) {
      return std::unexpected(config_error(at.text(), "unbalanced quotes"));
    }
    if (found == nullptr || found->op == Op::ignored) {
      return {};
    }
    return apply(*found, *words, rest, at, active);
  }

  std::expected<void, Error> apply(const Keyword& k, const std::vector<std::string>& words, const std::string& rest,
                                   const Where& at, bool& active) {
    auto fail = [&](const std::string& message) {
      return std::unexpected(config_error(at.text(), fmt::format("{} {}", k.name, message)));
    };
    if (static_cast<int>(words.size()) < k.min_words) {
      return fail("needs a value");
    }
    if (k.max_words != k_unlimited && static_cast<int>(words.size()) > k.max_words) {
      return fail(fmt::format("takes {}: \"{}\" is one too many", k.max_words == 1 ? "one value" : "two values",
                              words[static_cast<std::size_t>(k.max_words)]));
    }
    const std::string first = words.empty() ? std::string{} : words[0];
    switch (k.op) {
    case Op::host:
      return host(words, at, active);
    case Op::match: {
      auto matched = match(rest, at);
      if (!matched) {
        return std::unexpected(matched.error());
      }
      active = !at.never_match && *matched;
      return {};
    }
    case Op::include:
      return include(words, at, active);
    case Op::ignore_unknown:
      set_once(m_s.ignore_unknown, first, active);
      break;
    case Op::hostname:
      if (active && !m_s.hostname && !m_s.hostname_fixed) {
        m_s.hostname = Located{first, at.text()};
      }
      break;
    case Op::user:
      set_once(m_s.user, first, active);
      break;
    case Op::host_key_alias:
      set_once(m_s.host_key_alias, first, active);
      break;
    case Op::port: {
      auto port = parse_port(first);
      if (!port || *port <= 0) {
        return fail(fmt::format("\"{}\" is not a port number (1 to 65535) or a TCP service name", first));
      }
      set_once(m_s.port, *port, active);
      break;
    }
    case Op::identity_file:
      return add_file(m_s.identity_files, k_max_identity_files, k, first, at, active);
    case Op::certificate_file:
      return add_file(m_s.certificate_files, k_max_certificate_files, k, first, at, active);
    case Op::identities_only: {
      auto flag = parse_flag(first);
      if (!flag) {
        return fail(fmt::format("\"{}\" is neither yes nor no", first));
      }
      set_once(m_s.identities_only, *flag, active);
      break;
    }
    case Op::connect_timeout:
    case Op::server_alive_interval: {
      auto& slot = k.op == Op::connect_timeout ? m_s.connect_timeout : m_s.server_alive_interval;
      // "none" leaves the value unset, so a later line may still set it (as in ssh).
      if (first == "none") {
        break;
      }
      auto seconds = parse_seconds(first);
      if (!seconds) {
        return fail(fmt::format("\"{}\" is not a time (seconds, or with s, m, h, d, w: \"1m30s\")", first));
      }
      set_once(slot, *seconds, active);
      break;
    }
    case Op::server_alive_count_max: {
      auto count = parse_count(first);
      if (!count) {
        return fail(fmt::format("\"{}\" is not a whole number (0 or more)", first));
      }
      set_once(m_s.server_alive_count_max, *count, active);
      break;
    }
    case Op::strict_host_key_checking: {
      std::string v = lowercase(first);
      std::string normal = v == "true" || v == "yes"                 ? "yes"
                           : v == "false" || v == "no" || v == "off" ? "no"
                           : v == "ask" || v == "accept-new"         ? v
                                                                     : "";
      if (normal.empty()) {
        return fail(fmt::format("\"{}\" is not yes, no, ask, accept-new or off", first));
      }
      set_once(m_s.strict_host_key_checking, normal, active);
      break;
    }
    case Op::user_known_hosts_file:
      return known_hosts(k, words, at, active);
    case Op::proxy_jump:
      return proxy_jump(rest, at, active);
    case Op::proxy_command:
      // A ProxyJump set before has set it to "none" (proxy_jump()).
      if (active && !m_s.proxy_command) {
        m_s.proxy_command = Located{command_text(rest), at.text()};
      }
      break;
    case Op::canonicalize_hostname: {
      std::string v = lowercase(first);
      int mode = v == "yes" || v == "true" ? 1 : v == "no" || v == "false" ? 0 : v == "always" ? 2 : -1;
      if (mode < 0) {
        return fail(fmt::format("\"{}\" is not yes, no or always", first));
      }
      set_once(m_s.canonicalize_hostname, mode, active);
      break;
    }
    case Op::other:
      if (auto refused = value_problem(k, first)) {
        return fail(*refused);
      }
      break;
    case Op::command:
    case Op::ignored:
      break;
    }
    if (k.unsupported && active && !words.empty()) {
      note_unsupported(k, k.op == Op::command ? command_text(rest) : util::join(words, " "));
    }
    return {};
  }

  template <typename T, typename V> static void set_once(std::optional<T>& slot, V&& value, bool active) {
    if (active && !slot) {
      slot = std::forward<V>(value);
    }
  }

  void note_unsupported(const Keyword& k, const std::string& value) {
    auto option = option_of(k);
    if (std::find(m_s.unsupported_seen.begin(), m_s.unsupported_seen.end(), option) != m_s.unsupported_seen.end()) {
      return;
    }
    m_s.unsupported_seen.push_back(option);
    auto first = split_words(value);
    if (!turns_off(k, first && !first->empty() ? (*first)[0] : value)) {
      m_s.unsupported.push_back(fmt::format("{} {}", k.name, value));
    }
  }

  // readconf.c add_identity_file() and add_certificate_file(): in order, without repeats.
  std::expected<void, Error> add_file(std::vector<Located>& files, std::size_t limit, const Keyword& k,
                                      const std::string& path, const Where& at, bool active) {
    if (!active) {
      return {};
    }
    if (files.size() >= limit) {
      return std::unexpected(config_error(at.text(), fmt::format("more than {} {} lines apply", limit, k.name)));
    }
    bool repeated = std::any_of(files.begin(), files.end(), [&](const Located& f) { return f.value == path; });
    if (!repeated) {
      files.push_back(Located{path, at.text()});
    }
    return {};
  }

  std::expected<void, Error> known_hosts(const Keyword& k, const std::vector<std::string>& words, const Where& at,
                                         bool active) {
    // The first line that names files wins, as a whole.
    const bool unset = m_s.user_known_hosts_files.empty();
    for (std::size_t i = 0; i < words.size(); ++i) {
      if (words[i].empty()) {
        return std::unexpected(config_error(at.text(), fmt::format("{} has an empty file name", k.name)));
      }
      if (lowercase(words[i]) == "none" && words.size() > 1) {
        return std::unexpected(config_error(at.text(), fmt::format("{} \"none\" must stand alone", k.name)));
      }
      if (active && unset) {
        if (m_s.user_known_hosts_files.size() >= k_max_known_hosts_files) {
          return std::unexpected(
              config_error(at.text(), fmt::format("{} names more than {} files", k.name, k_max_known_hosts_files)));
        }
        m_s.user_known_hosts_files.push_back(Located{words[i], at.text()});
      }
    }
    return {};
  }

  // readconf.c parse_jump(): every hop's syntax is checked, even where the block does not apply.
  std::expected<void, Error> proxy_jump(const std::string& rest, const Where& at, bool active) {
    std::string written = command_text(rest);
    Settings::Jump jump;
    jump.none = lowercase(written) == "none";
    if (!jump.none) {
      auto hops = split_jump(written);
      if (!hops) {
        return std::unexpected(config_error(at.text(), fmt::format("ProxyJump \"{}\": \"{}\" is not [user@]host[:port] "
                                                                   "or ssh://[user@]host[:port]",
                                                                   written, hops.error())));
      }
      jump.hops = std::move(*hops);
    }
    // Debian's ssh 9.2 (as OpenSSH 10.3): "ProxyJump none" blocks later ProxyJumps only;
    // hops block both, and a ProxyCommand set before blocks hops.
    if (active && !m_s.proxy_jump && (jump.none || !m_s.proxy_command)) {
      if (!jump.none) {
        m_s.proxy_command = Located{"none", at.text()};
      }
      m_s.proxy_jump = std::move(jump);
    }
    return {};
  }

  std::expected<void, Error> host(const std::vector<std::string>& patterns, const Where& at, bool& active) {
    active = false;
    for (const auto& pattern : patterns) {
      if (pattern.empty()) {
        return std::unexpected(config_error(at.text(), "Host has an empty pattern"));
      }
      if (at.never_match) {
        break;
      }
      const bool negated = pattern[0] == '!';
      if (util::glob_match(std::string_view(pattern).substr(negated ? 1 : 0), m_pass.host)) {
        // A negated pattern that matches rules the whole line out.
        if (negated) {
          active = false;
          break;
        }
        active = true;
      }
    }
    return {};
  }

  // The host name `Match host` tests: the HostName set so far (readconf.c match_cfg_line).
  std::expected<std::string, Error> match_host() const {
    if (m_pass.final || !m_s.hostname) {
      return m_pass.host;
    }
    return expanded_hostname(*m_s.hostname, m_pass.host);
  }

  std::expected<bool, Error> match(const std::string& rest, const Where& at) {
    auto fail = [&](const std::string& message) {
      return std::unexpected(config_error(at.text(), fmt::format("Match {}", message)));
    };
    auto host = match_host();
    if (!host) {
      return std::unexpected(host.error());
    }
    const std::string user = m_s.user.value_or(m_context.local_user);
    Delimiter cursor(rest);
    bool result = true;
    int criteria = 0;
    while (true) {
      auto criterion = cursor.next();
      if (!criterion || criterion->empty()) {
        break;
      }
      if ((*criterion)[0] == '#') {
        cursor.finish();
        break;
      }
      const bool negate = (*criterion)[0] == '!';
      const std::string name = lowercase(std::string_view(*criterion).substr(negate ? 1 : 0));
      if (name == "all") {
        auto extra = cursor.next();
        if (criteria > 1 || (extra && !extra->empty() && (*extra)[0] != '#')) {
          return fail("\"all\" cannot be combined with other criteria");
        }
        if (extra && !extra->empty()) {
          cursor.finish();
        }
        result = result && !negate;
        return end_of_match(cursor, at, result);
      }
      ++criteria;
      if (name == "canonical" || name == "final") {
        // One pass without canonicalisation: both hold only in the second (final) pass,
        // which "Match final" asks for.
        if (name == "final") {
          m_s.want_final_pass = true;
        }
        if (m_pass.final == negate) {
          result = false;
        }
        continue;
      }
      auto value = cursor.next();
      if (!value || value->empty() || (*value)[0] == '#') {
        return fail(fmt::format("\"{}\" needs a value", *criterion));
      }
      bool matched = false;
      if (name == "host") {
        matched = match_pattern_list(lowercase(*host), *value, true) == 1;
      } else if (name == "originalhost") {
        matched = match_pattern_list(lowercase(m_pass.alias), *value, true) == 1;
      } else if (name == "user") {
        matched = match_pattern_list(user, *value, false) == 1;
      } else if (name == "localuser") {
        matched = match_pattern_list(m_context.local_user, *value, false) == 1;
      } else if (name == "exec") {
        if (auto checked = check_exec_tokens(*value); !checked) {
          return fail(fmt::format("exec \"{}\": {}", *value, checked.error()));
        }
        // ssh skips the command once an earlier criterion failed; specctl never runs it.
        if (result && !at.never_match) {
          add_note(fmt::format("Match exec at {} (specctl does not run commands from ssh_config; treated as not "
                               "matching)",
                               at.text()));
        }
        result = false;
        continue;
      } else {
        return fail(
            fmt::format("has an unknown criterion \"{}\" (OpenSSH 9.2 knows {})", *criterion, k_match_criteria));
      }
      if (matched == negate) {
        result = false;
      }
    }
    if (criteria == 0) {
      return fail(fmt::format("needs a criterion ({})", k_match_criteria));
    }
    return end_of_match(cursor, at, result);
  }

  static std::expected<bool, Error> end_of_match(const Delimiter& cursor, const Where& at, bool result) {
    if (!cursor.done()) {
      return std::unexpected(
          config_error(at.text(), fmt::format("Match has extra words at the end: \"{}\"", cursor.rest())));
    }
    return result;
  }

  // The tokens ssh expands in Match exec (it fails on others even when it does not run the command).
  static std::expected<std::string, std::string> check_exec_tokens(std::string_view command) {
    std::vector<Token> tokens;
    for (char key : std::string_view("CLdhiklnpru")) {
      tokens.push_back(Token{key, {}});
    }
    return expand_tokens(command, tokens, false);
  }

  void add_note(std::string note) {
    if (std::find(m_s.notes.begin(), m_s.notes.end(), note) == m_s.notes.end()) {
      m_s.notes.push_back(std::move(note));
    }
  }

  std::expected<std::vector<std::string>, Error> glob_paths(const std::string& pattern, const std::string& written,
                                                            const Where& at) const {
    GlobResult found;
    int rc = ::glob(pattern.c_str(), GLOB_TILDE | GLOB_NOSORT, nullptr, &found.paths);
    std::vector<std::string> paths;
    if (rc == GLOB_NOMATCH) {
      return paths;
    }
    if (rc != 0) {
      return std::unexpected(config_error(at.text(), fmt::format("Include \"{}\": glob failed", written)));
    }
    for (std::size_t i = 0; i < found.paths.gl_pathc; ++i) {
      paths.emplace_back(found.paths.gl_pathv[i]);
    }
    // OpenSSH's own glob sorts by strcmp().
    std::sort(paths.begin(), paths.end());
    return paths;
  }

  // readconf.c oInclude: each file's lines in place; a Host or Match inside a file
  // holds to the end of that file only.
  std::expected<void, Error> include(const std::vector<std::string>& words, const Where& at, bool& active) {
    for (const auto& word : words) {
      if (word.empty()) {
        return std::unexpected(config_error(at.text(), "Include has an empty path"));
      }
      // Relative paths are in ~/.ssh, as for a user's config.
      std::string path = word[0] == '/' || word[0] == '~' ? word : "~/.ssh/" + word;
      auto paths = glob_paths(glob_pattern(path, m_context.home), word, at);
      if (!paths) {
        return std::unexpected(paths.error());
      }
      const bool was_active = active;
      for (const auto& file : *paths) {
        if (at.depth + 1 > k_max_include_depth) {
          return std::unexpected(config_error(
              at.text(), fmt::format("Include \"{}\" nests more than {} files deep, OpenSSH's limit (does a file "
                                     "include itself?)",
                                     word, k_max_include_depth)));
        }
        auto content = read_config_file(file, true);
        if (!content) {
          return std::unexpected(config_error(at.text(), fmt::format("Include: {}", content.error())));
        }
        if (*content) {
          if (auto done = read(**content, file, at.depth + 1, active, at.never_match || !was_active); !done) {
            return done;
          }
        }
        active = was_active;
      }
    }
    return {};
  }

  const Pass& m_pass;
  const SshConfigContext& m_context;
  Settings& m_s;
};

} // namespace

std::expected<void, Error> read_pass(std::string_view text, const std::string& origin, const Pass& pass,
                                     const SshConfigContext& context, Settings& settings) {
  Reader reader(pass, context, settings);
  bool active = true;
  return reader.read(text, origin, 0, active, false);
}

} // namespace specctl::remote::sshcfg
