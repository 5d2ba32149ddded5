#pragma once

// An incremental parser of text/event-stream (the WHATWG "server-sent events"
// grammar): bytes arrive in arbitrary pieces, an event may span reads and one
// read may hold many events.

#include <cstddef>
#include <string>
#include <string_view>

namespace specctl::bench {

class SseParser {
public:
  // A line or event longer than this is garbage, not a token chunk: stop
  // buffering instead of growing without bound.
  static constexpr std::size_t k_max_event_bytes = 1024 * 1024;

  // Feeds the next bytes; calls on_event(std::string_view data) once for each
  // complete event that carried data (several "data:" lines joined by "\n").
  // Comments, "event:", "id:" and "retry:" lines are consumed silently.
  // Returns false, and ignores the rest, once an event outgrew k_max_event_bytes.
  template <typename OnEvent> bool feed(std::string_view bytes, OnEvent&& on_event) {
    if (m_overflow) {
      return false;
    }
    std::size_t pos = 0;
    if (m_skip_lf && !bytes.empty()) {
      m_skip_lf = false;
      if (bytes[0] == '\n') {
        pos = 1;
      }
    }
    while (pos < bytes.size()) {
      const std::size_t end = find_line_end(bytes, pos);
      if (end == std::string_view::npos) {
        if (m_line.size() + (bytes.size() - pos) > k_max_event_bytes) {
          m_overflow = true;
          return false;
        }
        m_line.append(bytes.substr(pos));
        break;
      }
      std::string_view line = bytes.substr(pos, end - pos);
      if (!m_line.empty()) {
        m_line.append(line);
        line = m_line;
      }
      if (bytes[end] == '\r') {
        if (end + 1 < bytes.size()) {
          pos = end + (bytes[end + 1] == '\n' ? 2 : 1);
        } else {
          pos = end + 1;
          m_skip_lf = true;
        }
      } else {
        pos = end + 1;
      }
      if (line.empty()) {
        if (m_has_data) {
          std::string_view data = m_data;
          data.remove_suffix(1);
          on_event(data);
        }
        m_data.clear();
        m_has_data = false;
      } else if (!take_line(line)) {
        return false;
      }
      m_line.clear();
    }
    return true;
  }

  // True when bytes of an unfinished event are buffered: a stream that ends
  // here was cut mid-event.
  bool has_partial() const { return m_has_data || !m_line.empty(); }
  bool overflowed() const { return m_overflow; }
  // Forgets everything, keeping the buffers' capacity for the next stream.
  void reset();

private:
  // The first '\r' or '\n' at or after pos, or npos: two memchr scans, much
  // faster than find_first_of on the hot path.
  static std::size_t find_line_end(std::string_view bytes, std::size_t pos);
  // Applies one non-empty line; false when the event grew too large.
  bool take_line(std::string_view line);

  std::string m_line;
  std::string m_data;
  bool m_has_data = false;
  bool m_skip_lf = false;
  bool m_overflow = false;
};

} // namespace specctl::bench
