// How OpenSSH 9.2 cuts a config line into words and reads values: ports of
// misc.c and match.c, kept close to the originals (their names are in
// ssh_config_internal.hpp) so that odd inputs behave as in ssh.

#include "ssh_config_internal.hpp"

#include <specctl/util/text.hpp>

#include <arpa/inet.h>
#include <netdb.h>

#include <cctype>
#include <charconv>
#include <climits>
#include <cstdint>

namespace specctl::remote::sshcfg {

namespace {

constexpr std::string_view k_whitespace = " \t\r\n";
// match_pattern_list() gives up on a sub-pattern this long.
constexpr std::size_t k_max_subpattern = 1023;

bool is_space_or_tab(char c) {
  return c == ' ' || c == '\t';
}

std::size_t whitespace_run(const std::string& text, std::size_t from) {
  std::size_t end = text.find_first_not_of(k_whitespace, from);
  return (end == std::string::npos ? text.size() : end) - from;
}

// strtonum(text, low, high) of OpenBSD: a whole decimal number in range.
std::optional<long long> whole_number(std::string_view text, long long low, long long high) {
  std::size_t start = 0;
  while (start < text.size() && std::isspace(static_cast<unsigned char>(text[start])) != 0) {
    ++start;
  }
  if (start < text.size() && text[start] == '+') {
    ++start;
  }
  long long value = 0;
  const char* first = text.data() + start;
  const char* last = text.data() + text.size();
  auto [end, ec] = std::from_chars(first, last, value);
  if (ec != std::errc() || end != last || first == last || value < low || value > high) {
    return std::nullopt;
  }
  return value;
}

// misc.c hpdelim2(): the host of "host[:rest]" or "[host]:rest" and what follows
// the delimiter; nullopt where hpdelim2 returns NULL.
struct HostPart {
  std::string host;
  std::optional<std::string> rest;
  char delimiter = '\0';
};

std::optional<HostPart> split_host(std::string_view text) {
  std::size_t end = 0;
  if (!text.empty() && text[0] == '[') {
    end = text.find(']');
    if (end == std::string_view::npos) {
      return std::nullopt;
    }
    ++end;
  } else {
    end = text.find_first_of(":/");
    if (end == std::string_view::npos) {
      end = text.size();
    }
  }
  HostPart part;
  part.host = std::string(text.substr(0, end));
  if (end == text.size()) {
    return part;
  }
  if (text[end] != ':' && text[end] != '/') {
    return std::nullopt;
  }
  part.delimiter = text[end];
  part.rest = std::string(text.substr(end + 1));
  return part;
}

// misc.c cleanhostname(): "[host]" without its brackets.
std::string without_brackets(std::string host) {
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    return host.substr(1, host.size() - 2);
  }
  return host;
}

// misc.c urldecode() succeeds.
bool valid_url_escapes(std::string_view text) {
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '%') {
      continue;
    }
    if (i + 2 >= text.size() || std::isxdigit(static_cast<unsigned char>(text[i + 1])) == 0 ||
        std::isxdigit(static_cast<unsigned char>(text[i + 2])) == 0) {
      return false;
    }
    i += 2;
  }
  return true;
}

// misc.c parse_user_host_port() succeeds.
bool valid_user_host_port(std::string_view text) {
  auto at = text.rfind('@');
  if (at != std::string_view::npos) {
    if (at == 0) {
      return false;
    }
    text = text.substr(at + 1);
  }
  auto part = split_host(text);
  if (!part || part->delimiter == '/' || part->host.empty()) {
    return false;
  }
  if (part->rest && !part->rest->empty()) {
    auto port = parse_port(*part->rest);
    return port && *port > 0;
  }
  return true;
}

// misc.c parse_uri("ssh", ...) succeeds without a path (ProxyJump allows none).
bool valid_ssh_uri(std::string_view text) {
  auto at = text.find('@');
  if (at != std::string_view::npos) {
    std::string_view user = text.substr(0, at);
    user = user.substr(0, user.find(';'));
    if (user.empty() || !valid_url_escapes(user)) {
      return false;
    }
    text = text.substr(at + 1);
  }
  auto part = split_host(text);
  if (!part || part->host.empty() || without_brackets(part->host).empty()) {
    return false;
  }
  if (!part->rest || part->rest->empty()) {
    return true;
  }
  std::string_view rest = *part->rest;
  if (part->delimiter == ':') {
    auto slash = rest.find('/');
    auto port = parse_port(rest.substr(0, slash));
    if (!port || *port <= 0) {
      return false;
    }
    rest = slash == std::string_view::npos ? std::string_view{} : rest.substr(slash + 1);
  }
  // A path, even an empty one after "/", is refused; "host:22/" leaves nothing.
  return rest.empty();
}

} // namespace

std::string lowercase(std::string_view text) {
  std::string out(text);
  for (auto& c : out) {
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  return out;
}

std::optional<std::string> Delimiter::next(bool split_equals) {
  if (m_pos == std::string::npos) {
    return std::nullopt;
  }
  const std::size_t old = m_pos;
  std::size_t found = m_text.find_first_of(split_equals ? " \t\r\n\"=" : " \t\r\n\"", m_pos);
  if (found == std::string::npos) {
    m_pos = std::string::npos;
    return m_text.substr(old);
  }
  if (m_text[found] == '"') {
    m_text.erase(found, 1);
    std::size_t close = m_text.find('"', found);
    if (close == std::string::npos) {
      m_pos = std::string::npos;
      return std::nullopt;
    }
    std::string word = m_text.substr(old, close - old);
    m_pos = close + 1 + whitespace_run(m_text, close + 1);
    return word;
  }
  const bool skipped_equals = split_equals && m_text[found] == '=';
  std::string word = m_text.substr(old, found - old);
  m_pos = found + 1 + whitespace_run(m_text, found + 1);
  if (split_equals && !skipped_equals && m_pos < m_text.size() && m_text[m_pos] == '=') {
    m_pos = m_pos + 1 + whitespace_run(m_text, m_pos + 1);
  }
  return word;
}

std::string Delimiter::rest() const {
  if (m_pos == std::string::npos || m_pos >= m_text.size()) {
    return {};
  }
  return m_text.substr(m_pos);
}

std::optional<std::vector<std::string>> split_words(std::string_view text) {
  std::vector<std::string> words;
  std::size_t i = 0;
  while (i < text.size()) {
    if (is_space_or_tab(text[i])) {
      ++i;
      continue;
    }
    if (text[i] == '#') {
      break;
    }
    std::string word;
    char quote = '\0';
    for (; i < text.size(); ++i) {
      char c = text[i];
      if (c == '\\' && i + 1 < text.size()) {
        char n = text[i + 1];
        if (n == '\'' || n == '"' || n == '\\' || (quote == '\0' && n == ' ')) {
          ++i;
          word += n;
        } else {
          word += c;
        }
      } else if (quote == '\0' && is_space_or_tab(c)) {
        break;
      } else if (quote == '\0' && (c == '"' || c == '\'')) {
        quote = c;
      } else if (quote != '\0' && c == quote) {
        quote = '\0';
      } else {
        word += c;
      }
    }
    if (quote != '\0') {
      return std::nullopt;
    }
    words.push_back(std::move(word));
  }
  return words;
}

std::optional<int> parse_seconds(std::string_view text) {
  if (text.empty()) {
    return std::nullopt;
  }
  long long total = 0;
  std::size_t i = 0;
  while (i < text.size()) {
    // strtol(): leading blanks, a sign, then digits.
    while (i < text.size() && std::isspace(static_cast<unsigned char>(text[i])) != 0) {
      ++i;
    }
    bool negative = false;
    if (i < text.size() && (text[i] == '+' || text[i] == '-')) {
      negative = text[i] == '-';
      ++i;
    }
    std::size_t digits = i;
    while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i])) != 0) {
      ++i;
    }
    long long secs = 0;
    auto [end, ec] = std::from_chars(text.data() + digits, text.data() + i, secs);
    if (i == digits || ec != std::errc() || (negative && secs != 0)) {
      return std::nullopt;
    }
    long long multiplier = 1;
    if (i < text.size()) {
      switch (text[i]) {
      case 's':
      case 'S':
        break;
      case 'm':
      case 'M':
        multiplier = 60;
        break;
      case 'h':
      case 'H':
        multiplier = 60 * 60;
        break;
      case 'd':
      case 'D':
        multiplier = 24 * 60 * 60;
        break;
      case 'w':
      case 'W':
        multiplier = 7 * 24 * 60 * 60;
        break;
      default:
        return std::nullopt;
      }
      ++i;
    }
    if (secs > INT_MAX / multiplier) {
      return std::nullopt;
    }
    secs *= multiplier;
    if (total > INT_MAX - secs) {
      return std::nullopt;
    }
    total += secs;
  }
  return static_cast<int>(total);
}

std::optional<int> parse_port(std::string_view text) {
  constexpr long long k_max_port = 65535;
  if (auto number = whole_number(text, 0, k_max_port)) {
    return static_cast<int>(*number);
  }
  std::string name(text);
  servent entry{};
  servent* found = nullptr;
  std::array<char, 4096> buffer{};
  if (::getservbyname_r(name.c_str(), "tcp", &entry, buffer.data(), buffer.size(), &found) == 0 && found != nullptr) {
    return static_cast<int>(ntohs(static_cast<std::uint16_t>(found->s_port)));
  }
  return std::nullopt;
}

std::optional<int> parse_count(std::string_view text) {
  if (auto number = whole_number(text, 0, INT_MAX)) {
    return static_cast<int>(*number);
  }
  return std::nullopt;
}

std::optional<bool> parse_flag(std::string_view text) {
  std::string value = lowercase(text);
  if (value == "yes" || value == "true") {
    return true;
  }
  if (value == "no" || value == "false") {
    return false;
  }
  return std::nullopt;
}

int match_pattern_list(std::string_view text, std::string_view patterns, bool lower) {
  bool positive = false;
  std::size_t i = 0;
  while (i < patterns.size()) {
    bool negated = patterns[i] == '!';
    if (negated) {
      ++i;
    }
    std::size_t end = patterns.find(',', i);
    if (end == std::string_view::npos) {
      end = patterns.size();
    }
    std::string_view sub = patterns.substr(i, end - i);
    if (sub.size() >= k_max_subpattern) {
      return 0;
    }
    i = end < patterns.size() ? end + 1 : end;
    std::string pattern = lower ? lowercase(sub) : std::string(sub);
    if (util::glob_match(pattern, text)) {
      if (negated) {
        return -1;
      }
      positive = true;
    }
  }
  return positive ? 1 : 0;
}

bool is_address(std::string_view host) {
  // ssh.c is_addr_fast(): what looks like an address is treated as one.
  if (host.find('%') != std::string_view::npos || host.find(':') != std::string_view::npos ||
      host.find_first_not_of("0123456789.") == std::string_view::npos) {
    return true;
  }
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICHOST | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  std::string name(host);
  if (::getaddrinfo(name.c_str(), "22", &hints, &found) != 0) {
    return false;
  }
  bool single = found != nullptr && found->ai_next == nullptr;
  ::freeaddrinfo(found);
  return single;
}

bool valid_jump_hop(std::string_view hop) {
  constexpr std::string_view k_scheme = "ssh://";
  if (hop.starts_with(k_scheme)) {
    return valid_ssh_uri(hop.substr(k_scheme.size()));
  }
  return valid_user_host_port(hop);
}

std::expected<std::vector<std::string>, std::string> split_jump(std::string_view written) {
  // parse_jump() drops a comment, and its rtrim() ends the text at the first blank
  // after the first character (not only trailing ones).
  std::string text(written.substr(0, written.find('#')));
  for (std::size_t i = 1; i < text.size(); ++i) {
    if (std::isspace(static_cast<unsigned char>(text[i])) != 0) {
      text.resize(i);
      break;
    }
  }
  std::vector<std::string> hops;
  std::size_t start = 0;
  while (true) {
    std::size_t comma = text.find(',', start);
    std::string hop = text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    if (!valid_jump_hop(hop)) {
      return std::unexpected(hop);
    }
    hops.push_back(std::move(hop));
    if (comma == std::string::npos) {
      return hops;
    }
    start = comma + 1;
  }
}

} // namespace specctl::remote::sshcfg
