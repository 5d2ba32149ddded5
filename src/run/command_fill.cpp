#include <specctl/run/command_fill.hpp>

#include <specctl/util/shell.hpp>

#include <algorithm>
#include <optional>

namespace specctl::run {

namespace {

// Where a placeholder sits in the shell line, so that its quoted value can be
// put outside the user's own quotes. It follows quotes, backslashes, comments,
// $( ) and backquotes the way a POSIX shell does; enough for a command line,
// not a full parser (no here-documents, no case patterns, no ${...} words).
class QuoteTracker {
public:
  // ' ' (unquoted), '\'', '"' or '#' (a comment, up to the end of the line).
  char state() const { return m_state; }
  // The last character was a backslash that escapes the next one.
  bool escaped() const { return m_escaped; }
  // The last character was a '$' that starts an expansion (not quoted by '' nor escaped).
  bool after_dollar() const { return m_after_dollar; }
  // How many `...` substitutions enclose this point (only unescaped ones are seen).
  int backquotes() const {
    return static_cast<int>(
        std::count_if(m_frames.begin(), m_frames.end(), [](const Frame& f) { return f.backquote; }));
  }

  void advance(char c) {
    const bool dollar = m_after_dollar;
    const char previous = m_previous;
    m_after_dollar = false;
    m_previous = c;
    if (m_state == '#') {
      if (c == '\n') {
        m_state = ' ';
      }
      return;
    }
    if (m_escaped) {
      m_escaped = false;
      return;
    }
    if (m_state == '\'') {
      if (c == '\'') {
        m_state = ' ';
      }
      return;
    }
    switch (c) {
    case '\\':
      m_escaped = true;
      break;
    case '$':
      m_after_dollar = true;
      break;
    case '#':
      if (m_state == ' ' && std::string_view(" \t\n;&|()").find(previous) != std::string_view::npos) {
        m_state = '#';
      }
      break;
    case '"':
      m_state = m_state == '"' ? ' ' : '"';
      break;
    case '\'':
      if (m_state == ' ') {
        m_state = '\'';
      }
      break;
    case '(':
      if (dollar) {
        // $( ... ) starts a fresh quoting context, even inside double quotes.
        m_frames.push_back({m_state, 0, false});
        m_state = ' ';
      } else if (m_state == ' ' && !m_frames.empty()) {
        ++m_frames.back().parens;
      }
      break;
    case ')':
      if (m_state == ' ' && !m_frames.empty()) {
        if (m_frames.back().parens > 0) {
          --m_frames.back().parens;
        } else if (!m_frames.back().backquote) {
          m_state = m_frames.back().state;
          m_frames.pop_back();
        }
      }
      break;
    case '`':
      if (m_state == ' ' && !m_frames.empty() && m_frames.back().backquote) {
        m_state = m_frames.back().state;
        m_frames.pop_back();
      } else {
        m_frames.push_back({m_state, 0, true});
        m_state = ' ';
      }
      break;
    default:
      break;
    }
  }

private:
  struct Frame {
    char state;
    int parens;
    bool backquote;
  };

  char m_state = ' ';
  bool m_escaped = false;
  bool m_after_dollar = false;
  // The character before, for telling a comment's "#" from one inside a word; the start counts as a blank.
  char m_previous = ' ';
  std::vector<Frame> m_frames;
};

// Inside `...` the shell first removes one level of \\, \` and \$, before it reads
// quotes; a ` in a quoted value would otherwise end the substitution.
std::string escape_for_backquotes(std::string_view text) {
  std::string out;
  for (char c : text) {
    if (c == '\\' || c == '`' || c == '$') {
      out += '\\';
    }
    out += c;
  }
  return out;
}

std::optional<std::string> placeholder_value(std::string_view name, const CommandContext& context) {
  if (name == "url") {
    return context.url;
  }
  if (name == "port") {
    return std::to_string(context.port);
  }
  if (name == "variant") {
    return context.variant;
  }
  if (name == "model") {
    return context.model;
  }
  if (name == "host") {
    return context.host;
  }
  return std::nullopt;
}

} // namespace

std::string fill_command(const std::string& run, const CommandContext& context) {
  std::string out;
  QuoteTracker quotes;
  for (std::size_t i = 0; i < run.size(); ++i) {
    if (run[i] == '{' && i + 1 < run.size() && run[i + 1] == '{') {
      out += '{';
      quotes.advance('{');
      ++i;
      continue;
    }
    // An escaped "{" stays literal: a value after a backslash would lose its opening quote.
    // So does one in a comment: a newline in the value would end the comment.
    const bool literal = quotes.escaped() || quotes.state() == '#';
    const auto close = run[i] == '{' && !literal ? run.find('}', i) : std::string::npos;
    const auto value = close == std::string::npos
                           ? std::nullopt
                           : placeholder_value(std::string_view(run).substr(i + 1, close - i - 1), context);
    if (!value) {
      out += run[i];
      quotes.advance(run[i]);
      continue;
    }
    std::string quoted = util::shell_quote(*value);
    for (int level = 0; level < quotes.backquotes(); ++level) {
      quoted = escape_for_backquotes(quoted);
    }
    if (quotes.state() != ' ') {
      // Close the user's quotes, add the value, reopen them.
      out += quotes.state() + quoted + quotes.state();
    } else if (quotes.after_dollar()) {
      // "${model}": "$'" would start bash's $'...' quoting, which reads backslashes
      // in the value (dash prints a "$"). Escaping the "$" makes it a literal "$"
      // in every shell, with the value after it, as written.
      std::string dollar = "\\$";
      for (int level = 0; level < quotes.backquotes(); ++level) {
        dollar = escape_for_backquotes(dollar);
      }
      out.pop_back();
      out += dollar + quoted;
    } else {
      out += quoted;
    }
    quotes.advance('}');
    i = close;
  }
  return out;
}

} // namespace specctl::run
