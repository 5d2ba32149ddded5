#pragma once

// One streaming request on a reusable curl handle: the write callback
// timestamps every read, feeds the SSE parser and records content chunks.

#include <specctl/bench/chunk.hpp>
#include <specctl/bench/request.hpp>
#include <specctl/bench/result.hpp>
#include <specctl/bench/sse.hpp>
#include <specctl/http/curl.hpp>

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

namespace specctl::bench::detail {

using Clock = std::chrono::steady_clock;

class Stream {
public:
  // Sets the options that stay the same for every request on this handle.
  Stream(const std::string& url, const http::HeaderList& headers, const RequestOptions& options);
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;

  CURL* handle() const { return m_easy.get(); }

  // What latencies count from.
  enum class Origin {
    // The moment the request is written to its connection (closed loop): a
    // client busy starting a burst of requests does not add its own delay.
    send,
    // The scheduled arrival (open loop): a client that falls behind cannot hide a slow server.
    scheduled,
  };

  // Arms the handle for the next request; `intended` is when it should start
  // (the schedule, or now). The stream keeps `body` until the next begin, through resends.
  void begin(std::string body, int index, int prompt, Clock::time_point level_start, Clock::time_point intended,
             Origin origin);

  // Which prompt of the workload the request sends, its target length, and the max_tokens it asks for.
  void label(std::string id, std::string category, int input_tokens, int max_tokens) {
    m_record.prompt_id = std::move(id);
    m_record.category = std::move(category);
    m_record.input_tokens = input_tokens;
    m_record.max_tokens = max_tokens;
  }

  // True when the transfer ended before any byte of an answer came on a
  // connection that broke (closed by the server before or as the request was
  // written), and a fresh connection may be tried: then it re-arms the handle
  // for that, and the caller adds it to the multi handle again.
  bool resend_after(CURLcode code);
  // Turns the finished transfer into its record.
  RequestRecord finish(CURLcode code);
  // When the last byte came (or the request was written): for the idle timeout.
  Clock::time_point last_activity() const { return m_last_activity; }
  // Records a transfer that will not finish (the run was stopped).
  RequestRecord abandon(FailureKind kind, std::string message);

  // Data events parsed by this handle since it was made (the client's work).
  std::int64_t events() const { return m_events_total; }
  // Output tokens of the request in flight so far, for progress: the usage
  // count when the server sends it on every chunk, else content chunks.
  std::int64_t tokens_so_far() const {
    return m_usage_tokens >= 0 ? m_usage_tokens : static_cast<std::int64_t>(m_record.chunks.size());
  }

private:
  static std::size_t on_write(char* data, std::size_t size, std::size_t count, void* user);
  static int on_send(void* user, char* remote_ip, char* local_ip, int remote_port, int local_port);
  // False to abort the transfer (the answer is not an event stream worth reading on).
  bool on_bytes(std::string_view bytes, Clock::time_point now);
  void on_event(std::string_view data, Clock::time_point now);
  void fail(FailureKind kind, std::string message);
  std::uint32_t since_origin_us(Clock::time_point t) const;
  RequestRecord take();

  http::Easy m_easy;
  const RequestOptions& m_options;
  // curl reads the request body from here (CURLOPT_POSTFIELDS does not copy).
  std::string m_body;
  SseParser m_sse;
  ChunkFields m_fields;
  RequestRecord m_record;
  Origin m_origin_kind = Origin::send;
  Clock::time_point m_level_start;
  Clock::time_point m_intended;
  Clock::time_point m_origin;
  Clock::time_point m_sent;
  Clock::time_point m_last_event;
  Clock::time_point m_last_activity;
  // The request reached the point of being written on its current connection.
  bool m_written = false;
  int m_resends = 0;
  bool m_status_known = false;
  bool m_done = false;
  bool m_any_json = false;
  bool m_every_chunk_has_usage = true;
  std::int64_t m_usage_tokens = -1;
  std::int64_t m_bytes = 0;
  std::int64_t m_events = 0;
  std::int64_t m_events_total = 0;
  // The start of the answer, quoted in errors about what the server sent.
  std::string m_head;
  char m_curl_detail[CURL_ERROR_SIZE] = {};
};

} // namespace specctl::bench::detail
