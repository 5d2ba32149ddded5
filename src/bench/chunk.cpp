#include <specctl/bench/chunk.hpp>

#include <charconv>

namespace specctl::bench {

namespace {

// Nesting deeper than any real chunk: garbage is refused before it can exhaust the stack.
constexpr int k_max_depth = 64;

// Where in the chunk a value sits, so only the interesting ones are recorded.
enum class Place { other, root, choices, first_choice, delta, usage, usage_details, timings, error };

class Scanner {
public:
  Scanner(std::string_view text, ChunkFields& out) : m_text(text), m_out(out) {}

  bool run() {
    skip_space();
    if (m_pos >= m_text.size() || m_text[m_pos] != '{') {
      return false;
    }
    if (!value(Place::root, 0)) {
      return false;
    }
    skip_space();
    return m_pos == m_text.size();
  }

private:
  void skip_space() {
    while (m_pos < m_text.size()) {
      const char c = m_text[m_pos];
      if (c != ' ' && c != '\n' && c != '\r' && c != '\t') {
        return;
      }
      ++m_pos;
    }
  }

  static bool is_hex(char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }

  // Reads a string at m_pos (the opening quote); `raw` gets its undecoded contents.
  bool string(std::string_view& raw) {
    ++m_pos;
    const std::size_t start = m_pos;
    while (m_pos < m_text.size()) {
      const auto c = static_cast<unsigned char>(m_text[m_pos]);
      if (c == '"') {
        raw = m_text.substr(start, m_pos - start);
        ++m_pos;
        return true;
      }
      if (c < 0x20) {
        return false;
      }
      if (c == '\\') {
        if (m_pos + 1 >= m_text.size()) {
          return false;
        }
        const char e = m_text[m_pos + 1];
        if (e == 'u') {
          if (m_pos + 6 > m_text.size()) {
            return false;
          }
          for (std::size_t i = m_pos + 2; i < m_pos + 6; ++i) {
            if (!is_hex(m_text[i])) {
              return false;
            }
          }
          m_pos += 6;
          continue;
        }
        if (e != '"' && e != '\\' && e != '/' && e != 'b' && e != 'f' && e != 'n' && e != 'r' && e != 't') {
          return false;
        }
        m_pos += 2;
        continue;
      }
      ++m_pos;
    }
    return false;
  }

  static bool is_digit(char c) { return c >= '0' && c <= '9'; }

  // Reads a number; `integer` is set when it is a plain integer that fits.
  bool number(std::int64_t& integer, bool& is_integer) {
    const std::size_t start = m_pos;
    if (m_pos < m_text.size() && m_text[m_pos] == '-') {
      ++m_pos;
    }
    if (m_pos >= m_text.size() || !is_digit(m_text[m_pos])) {
      return false;
    }
    if (m_text[m_pos] == '0') {
      ++m_pos;
    } else {
      while (m_pos < m_text.size() && is_digit(m_text[m_pos])) {
        ++m_pos;
      }
    }
    is_integer = true;
    if (m_pos < m_text.size() && m_text[m_pos] == '.') {
      is_integer = false;
      ++m_pos;
      if (m_pos >= m_text.size() || !is_digit(m_text[m_pos])) {
        return false;
      }
      while (m_pos < m_text.size() && is_digit(m_text[m_pos])) {
        ++m_pos;
      }
    }
    if (m_pos < m_text.size() && (m_text[m_pos] == 'e' || m_text[m_pos] == 'E')) {
      is_integer = false;
      ++m_pos;
      if (m_pos < m_text.size() && (m_text[m_pos] == '+' || m_text[m_pos] == '-')) {
        ++m_pos;
      }
      if (m_pos >= m_text.size() || !is_digit(m_text[m_pos])) {
        return false;
      }
      while (m_pos < m_text.size() && is_digit(m_text[m_pos])) {
        ++m_pos;
      }
    }
    if (is_integer) {
      const auto [end, ec] = std::from_chars(m_text.data() + start, m_text.data() + m_pos, integer);
      is_integer = ec == std::errc{} && end == m_text.data() + m_pos;
    }
    return true;
  }

  bool literal(std::string_view word) {
    if (m_text.substr(m_pos, word.size()) != word) {
      return false;
    }
    m_pos += word.size();
    return true;
  }

  // The place of the value under `key` inside an object at `place`.
  static Place child(Place place, std::string_view key) {
    switch (place) {
    case Place::root:
      if (key == "choices") {
        return Place::choices;
      }
      if (key == "usage") {
        return Place::usage;
      }
      if (key == "error") {
        return Place::error;
      }
      if (key == "timings") {
        return Place::timings;
      }
      return Place::other;
    case Place::usage:
      return key == "prompt_tokens_details" ? Place::usage_details : Place::other;
    case Place::first_choice:
      return key == "delta" ? Place::delta : Place::other;
    default:
      return Place::other;
    }
  }

  // Records a scalar string found under `key` of an object at `place`.
  void record_string(Place place, std::string_view key, std::string_view raw) {
    switch (place) {
    case Place::root:
      if (key == "id") {
        m_out.id = raw;
      } else if (key == "error") {
        m_out.error_message = raw;
      }
      break;
    case Place::first_choice:
      if (key == "text" && !raw.empty()) {
        m_out.has_content = true;
      } else if (key == "finish_reason") {
        m_out.finish_reason = raw;
      }
      break;
    case Place::delta:
      if ((key == "content" || key == "reasoning_content") && !raw.empty()) {
        m_out.has_content = true;
      }
      break;
    case Place::error:
      if (key == "message") {
        m_out.error_message = raw;
      }
      break;
    default:
      break;
    }
  }

  // A number under llama.cpp's "timings", the text of which starts at `start`.
  void record_timing(std::string_view key, std::int64_t integer, bool is_integer, std::size_t start) {
    m_out.has_timings = true;
    if (key == "predicted_per_second") {
      double value = 0;
      const auto [end, ec] = std::from_chars(m_text.data() + start, m_text.data() + m_pos, value);
      if (ec == std::errc{} && end == m_text.data() + m_pos) {
        m_out.timings_predicted_per_second = value;
      }
    } else if (!is_integer) {
      return;
    } else if (key == "predicted_n") {
      m_out.timings_predicted_n = integer;
    } else if (key == "draft_n") {
      m_out.timings_draft_n = integer;
    } else if (key == "draft_n_accepted") {
      m_out.timings_draft_accepted = integer;
    }
  }

  bool object(Place place, int depth) {
    ++m_pos;
    skip_space();
    if (m_pos < m_text.size() && m_text[m_pos] == '}') {
      ++m_pos;
      return true;
    }
    while (true) {
      skip_space();
      if (m_pos >= m_text.size() || m_text[m_pos] != '"') {
        return false;
      }
      std::string_view key;
      if (!string(key)) {
        return false;
      }
      skip_space();
      if (m_pos >= m_text.size() || m_text[m_pos] != ':') {
        return false;
      }
      ++m_pos;
      skip_space();
      if (m_pos >= m_text.size()) {
        return false;
      }
      if (!member(place, key, depth)) {
        return false;
      }
      const Next next = after_item('}');
      if (next == Next::more) {
        continue;
      }
      return next == Next::end;
    }
  }

  // After a member or an element: "," (more follow), `close` (the end), or
  // anything else (malformed).
  enum class Next { more, end, bad };
  Next after_item(char close) {
    skip_space();
    if (m_pos >= m_text.size() || (m_text[m_pos] != ',' && m_text[m_pos] != close)) {
      return Next::bad;
    }
    return m_text[m_pos++] == ',' ? Next::more : Next::end;
  }

  // One "key": value of an object at `place`, the value starting at m_pos.
  bool member(Place place, std::string_view key, int depth) {
    const char c = m_text[m_pos];
    if (c == '"') {
      std::string_view raw;
      if (!string(raw)) {
        return false;
      }
      record_string(place, key, raw);
      if (place == Place::root && key == "error") {
        m_out.has_error = true;
      }
      return true;
    }
    if (c == '{' || c == '[') {
      const Place inner = child(place, key);
      if (inner == Place::error) {
        m_out.has_error = true;
      }
      return value(inner, depth + 1);
    }
    if (c == '-' || is_digit(c)) {
      std::int64_t integer = 0;
      bool is_integer = false;
      const std::size_t start = m_pos;
      if (!number(integer, is_integer)) {
        return false;
      }
      if (place == Place::usage && is_integer) {
        if (key == "completion_tokens") {
          m_out.completion_tokens = integer;
        } else if (key == "prompt_tokens") {
          m_out.prompt_tokens = integer;
        }
      } else if (place == Place::usage_details && is_integer && key == "cached_tokens") {
        m_out.cached_tokens = integer;
      } else if (place == Place::timings) {
        record_timing(key, integer, is_integer, start);
      }
      if (place == Place::root && key == "error") {
        m_out.has_error = true;
      }
      return true;
    }
    if (literal("null")) {
      return true;
    }
    if (literal("true") || literal("false")) {
      if (place == Place::root && key == "error") {
        m_out.has_error = true;
      }
      return true;
    }
    return false;
  }

  bool array(Place place, int depth) {
    ++m_pos;
    skip_space();
    if (m_pos < m_text.size() && m_text[m_pos] == ']') {
      ++m_pos;
      return true;
    }
    for (int index = 0;; ++index) {
      skip_space();
      if (m_pos >= m_text.size()) {
        return false;
      }
      Place inner = Place::other;
      if (place == Place::choices) {
        m_out.has_choices = true;
        inner = index == 0 ? Place::first_choice : Place::other;
      }
      if (!value(inner, depth + 1)) {
        return false;
      }
      const Next next = after_item(']');
      if (next == Next::more) {
        continue;
      }
      return next == Next::end;
    }
  }

  // Any value at m_pos; objects and arrays carry `place` to their members.
  bool value(Place place, int depth) {
    if (depth > k_max_depth || m_pos >= m_text.size()) {
      return false;
    }
    const char c = m_text[m_pos];
    if (c == '{') {
      return object(place, depth);
    }
    if (c == '[') {
      return array(place, depth);
    }
    if (c == '"') {
      std::string_view raw;
      return string(raw);
    }
    if (c == '-' || is_digit(c)) {
      std::int64_t integer = 0;
      bool is_integer = false;
      return number(integer, is_integer);
    }
    return literal("null") || literal("true") || literal("false");
  }

  std::string_view m_text;
  ChunkFields& m_out;
  std::size_t m_pos = 0;
};

} // namespace

bool scan_chunk(std::string_view json, ChunkFields& out) {
  out = ChunkFields{};
  return Scanner(json, out).run();
}

} // namespace specctl::bench
