#include <specctl/bench/sse.hpp>

#include <cstring>

namespace specctl::bench {

void SseParser::reset() {
  m_line.clear();
  m_data.clear();
  m_has_data = false;
  m_skip_lf = false;
  m_overflow = false;
}

std::size_t SseParser::find_line_end(std::string_view bytes, std::size_t pos) {
  const char* begin = bytes.data() + pos;
  const std::size_t size = bytes.size() - pos;
  const auto* newline = static_cast<const char*>(std::memchr(begin, '\n', size));
  const std::size_t limit = newline != nullptr ? static_cast<std::size_t>(newline - begin) : size;
  if (const auto* cr = static_cast<const char*>(std::memchr(begin, '\r', limit)); cr != nullptr) {
    return pos + static_cast<std::size_t>(cr - begin);
  }
  return newline != nullptr ? pos + limit : std::string_view::npos;
}

bool SseParser::take_line(std::string_view line) {
  if (line.front() == ':') {
    return true;
  }
  const std::size_t colon = line.find(':');
  const std::string_view field = line.substr(0, colon);
  if (field != "data") {
    return true;
  }
  std::string_view value = colon == std::string_view::npos ? std::string_view{} : line.substr(colon + 1);
  if (!value.empty() && value.front() == ' ') {
    value.remove_prefix(1);
  }
  if (m_data.size() + value.size() + 1 > k_max_event_bytes) {
    m_overflow = true;
    return false;
  }
  m_data.append(value);
  m_data.push_back('\n');
  m_has_data = true;
  return true;
}

} // namespace specctl::bench
