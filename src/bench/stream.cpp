#include "stream.hpp"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>
#include <limits>

namespace specctl::bench::detail {

namespace {

constexpr double k_nan = std::numeric_limits<double>::quiet_NaN();
// How much of an unexpected answer is kept for the error message.
constexpr std::size_t k_head_bytes = 200;
// Chunk slots reserved up front, so most requests never reallocate in the write callback.
constexpr std::size_t k_max_reserved_chunks = 4096;
// Fresh connections tried for a request whose connection closed before an
// answer: one is what a server that closes after every stream needs; more would
// hide a server that accepts and drops every request.
constexpr int k_max_resends = 2;
// libcurl's read buffer per handle. Token events are a few hundred bytes; 8 KiB
// holds dozens, and a thousand streams then need 8 MiB instead of 16.
constexpr long k_read_buffer_bytes = 8 * 1024;

std::string printable(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    const auto u = static_cast<unsigned char>(c);
    out += (u < 0x20 || u == 0x7f) ? ' ' : c;
  }
  return out;
}

double ms_between(Clock::time_point from, Clock::time_point to) {
  return std::chrono::duration<double, std::milli>(to - from).count();
}

} // namespace

Stream::Stream(const std::string& url, const http::HeaderList& headers, const RequestOptions& options)
    : m_options(options) {
  CURL* h = m_easy.get();
  curl_easy_setopt(h, CURLOPT_URL, url.c_str());
  curl_easy_setopt(h, CURLOPT_HTTPHEADER, headers.get());
  curl_easy_setopt(h, CURLOPT_POST, 1L);
  curl_easy_setopt(h, CURLOPT_HTTP_VERSION, static_cast<long>(CURL_HTTP_VERSION_1_1));
  curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(h, CURLOPT_BUFFERSIZE, k_read_buffer_bytes);
  curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, &Stream::on_write);
  curl_easy_setopt(h, CURLOPT_WRITEDATA, this);
  curl_easy_setopt(h, CURLOPT_PREREQFUNCTION, &Stream::on_send);
  curl_easy_setopt(h, CURLOPT_PREREQDATA, this);
  curl_easy_setopt(h, CURLOPT_PRIVATE, this);
  curl_easy_setopt(h, CURLOPT_ERRORBUFFER, m_curl_detail);
  curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, static_cast<long>(options.timeout.count()));
  curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(options.connect_timeout.count()));
  // The benchmark talks to one server: no proxy from the environment may sit in between.
  curl_easy_setopt(h, CURLOPT_NOPROXY, "*");
}

void Stream::begin(std::string body, int index, int prompt, Clock::time_point level_start, Clock::time_point intended,
                   Origin origin) {
  CURL* h = m_easy.get();
  m_body = std::move(body);
  curl_easy_setopt(h, CURLOPT_POSTFIELDS, m_body.data());
  curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(m_body.size()));
  m_curl_detail[0] = '\0';
  m_sse.reset();
  m_record = RequestRecord{};
  m_record.index = index;
  m_record.prompt = prompt;
  m_record.chunks.reserve(
      std::min<std::size_t>(static_cast<std::size_t>(std::max(m_options.max_tokens, 1)), k_max_reserved_chunks));
  m_origin_kind = origin;
  m_level_start = level_start;
  m_intended = intended;
  // Until the request is written (or when it never is), the intended start stands in.
  m_origin = intended;
  m_sent = intended;
  m_last_event = intended;
  m_last_activity = std::max(intended, Clock::now());
  m_written = false;
  m_resends = 0;
  curl_easy_setopt(h, CURLOPT_FRESH_CONNECT, 0L);
  m_status_known = false;
  m_done = false;
  m_any_json = false;
  m_every_chunk_has_usage = true;
  m_usage_tokens = -1;
  m_bytes = 0;
  m_events = 0;
  m_head.clear();
}

int Stream::on_send(void* user, char*, char*, int, int) {
  // curl calls this once the connection is ready, just before writing the request.
  auto* self = static_cast<Stream*>(user);
  self->m_sent = Clock::now();
  self->m_written = true;
  self->m_last_activity = self->m_sent;
  if (self->m_origin_kind == Origin::send) {
    self->m_origin = self->m_sent;
    self->m_last_event = self->m_sent;
  }
  return CURL_PREREQFUNC_OK;
}

std::size_t Stream::on_write(char* data, std::size_t size, std::size_t count, void* user) {
  // One clock read per read from the socket: every event in it arrived together.
  const auto now = Clock::now();
  auto* self = static_cast<Stream*>(user);
  const std::size_t bytes = size * count;
  return self->on_bytes(std::string_view(data, bytes), now) ? bytes : 0;
}

bool Stream::on_bytes(std::string_view bytes, Clock::time_point now) {
  if (!m_status_known) {
    curl_easy_getinfo(m_easy.get(), CURLINFO_RESPONSE_CODE, &m_record.http_status);
    m_status_known = true;
  }
  m_bytes += static_cast<std::int64_t>(bytes.size());
  m_last_activity = now;
  if (m_head.size() < k_head_bytes) {
    m_head.append(bytes.substr(0, k_head_bytes - m_head.size()));
  }
  if (m_record.http_status != 200) {
    // The error body is only quoted; reading it to the end keeps the connection reusable.
    return true;
  }
  const bool ok = m_sse.feed(bytes, [&](std::string_view data) { on_event(data, now); });
  if (!ok) {
    fail(FailureKind::malformed_event,
         fmt::format("an event grew past {} bytes without ending: not an event stream", SseParser::k_max_event_bytes));
    return false;
  }
  return true;
}

void Stream::on_event(std::string_view data, Clock::time_point now) {
  ++m_events;
  ++m_events_total;
  if (m_done) {
    return;
  }
  if (data == "[DONE]") {
    m_done = true;
    return;
  }
  if (!scan_chunk(data, m_fields)) {
    fail(FailureKind::malformed_event, fmt::format("malformed event: \"{}\"", printable(data.substr(0, k_head_bytes))));
    return;
  }
  m_any_json = true;
  m_last_event = now;
  if (m_fields.has_error) {
    fail(FailureKind::server_error, fmt::format("the server sent an error event: \"{}\"",
                                                printable(m_fields.error_message.substr(0, k_head_bytes))));
  }
  if (m_fields.prompt_tokens >= 0) {
    m_record.prompt_tokens = static_cast<int>(m_fields.prompt_tokens);
  }
  if (m_fields.completion_tokens >= 0) {
    m_usage_tokens = m_fields.completion_tokens;
  }
  if (m_fields.cached_tokens >= 0) {
    m_record.cached_tokens = static_cast<int>(m_fields.cached_tokens);
  }
  if (m_fields.has_timings) {
    const auto narrow = [](std::int64_t v) { return static_cast<int>(std::clamp<std::int64_t>(v, -1, INT32_MAX)); };
    m_record.server_predicted_n = narrow(m_fields.timings_predicted_n);
    m_record.server_tok_s = m_fields.timings_predicted_per_second;
    m_record.draft_tokens = narrow(m_fields.timings_draft_n);
    m_record.draft_accepted = narrow(m_fields.timings_draft_accepted);
  }
  if (!m_fields.finish_reason.empty()) {
    m_record.finish_reason = std::string(m_fields.finish_reason);
  }
  if (m_record.response_id.empty() && !m_fields.id.empty()) {
    m_record.response_id = std::string(m_fields.id);
  }
  if (m_fields.has_content) {
    // With usage on every chunk this holds the running total; finish() turns it into per-chunk counts.
    std::uint32_t cumulative = 0;
    if (m_fields.completion_tokens >= 0) {
      cumulative = static_cast<std::uint32_t>(std::min<std::int64_t>(m_fields.completion_tokens, UINT32_MAX));
    } else {
      m_every_chunk_has_usage = false;
    }
    m_record.chunks.push_back({since_origin_us(now), cumulative});
  }
}

std::uint32_t Stream::since_origin_us(Clock::time_point t) const {
  const auto us = std::chrono::duration_cast<std::chrono::microseconds>(t - m_origin).count();
  return static_cast<std::uint32_t>(std::clamp<std::int64_t>(us, 0, UINT32_MAX));
}

void Stream::fail(FailureKind kind, std::string message) {
  if (!m_record.failure) {
    m_record.failure = kind;
    m_record.error = std::move(message);
  }
}

bool Stream::resend_after(CURLcode code) {
  const bool broke = code == CURLE_SEND_ERROR || code == CURLE_GOT_NOTHING || code == CURLE_RECV_ERROR;
  if (!broke || m_bytes > 0 || m_resends >= k_max_resends || m_record.failure) {
    return false;
  }
  // Nothing of an answer came: the server has nothing of this request to have
  // worked on but its prompt, and a new connection is what any HTTP client tries.
  ++m_resends;
  CURL* h = m_easy.get();
  curl_easy_setopt(h, CURLOPT_FRESH_CONNECT, 1L);
  m_curl_detail[0] = '\0';
  m_sse.reset();
  m_record.chunks.clear();
  m_written = false;
  m_status_known = false;
  m_record.http_status = 0;
  m_last_activity = Clock::now();
  return true;
}

RequestRecord Stream::finish(CURLcode code) {
  if (!m_status_known) {
    curl_easy_getinfo(m_easy.get(), CURLINFO_RESPONSE_CODE, &m_record.http_status);
  }
  const long status = m_record.http_status;
  const std::string detail = http::describe(code, m_curl_detail);
  const std::size_t chunks = m_record.chunks.size();
  if (code == CURLE_OPERATION_TIMEDOUT) {
    fail(FailureKind::timeout,
         fmt::format("timed out after {} ms ({} chunks received)", m_options.timeout.count(), chunks));
  } else if (status != 0 && status != 200) {
    fail(FailureKind::http_status, fmt::format("HTTP {}: \"{}\"", status, printable(m_head)));
  } else if (code == CURLE_COULDNT_CONNECT || code == CURLE_COULDNT_RESOLVE_HOST ||
             code == CURLE_COULDNT_RESOLVE_PROXY) {
    fail(FailureKind::connect, detail);
  } else if (m_bytes == 0 && (code == CURLE_SEND_ERROR || (!m_written && code != CURLE_OK))) {
    fail(FailureKind::closed_before_send,
         fmt::format("the connection closed before the request was written ({} fresh connections tried): {}", m_resends,
                     detail));
  } else if (m_bytes == 0 && (code == CURLE_GOT_NOTHING || code == CURLE_RECV_ERROR)) {
    fail(FailureKind::no_response,
         fmt::format("the request was written, then the connection closed with no answer ({} fresh connections "
                     "tried): {}",
                     m_resends, detail));
  } else if (code == CURLE_PARTIAL_FILE || code == CURLE_RECV_ERROR || code == CURLE_GOT_NOTHING ||
             code == CURLE_SEND_ERROR) {
    fail(FailureKind::cut_stream, fmt::format("the connection broke after {} chunks: {}", chunks, detail));
  } else if (code != CURLE_OK) {
    fail(FailureKind::protocol, detail);
  } else if (!m_done) {
    if (!m_any_json && m_events == 0 && m_bytes > 0) {
      fail(FailureKind::malformed_event, fmt::format("the answer is not an event stream: \"{}\"", printable(m_head)));
    } else {
      fail(FailureKind::cut_stream, fmt::format("the stream ended before [DONE] after {} chunks{}", chunks,
                                                m_sse.has_partial() ? ", in the middle of an event" : ""));
    }
  }
  return take();
}

RequestRecord Stream::abandon(FailureKind kind, std::string message) {
  fail(kind, std::move(message));
  return take();
}

RequestRecord Stream::take() {
  RequestRecord& r = m_record;
  r.resends = m_resends;
  r.start_s = std::chrono::duration<double>(m_origin - m_level_start).count();
  r.send_lag_ms = std::max(0.0, ms_between(m_intended, m_sent));
  auto& chunks = r.chunks;
  r.chunk_tokens_exact = !chunks.empty() && m_every_chunk_has_usage;
  if (r.chunk_tokens_exact) {
    std::uint32_t previous = 0;
    for (auto& chunk : chunks) {
      const std::uint32_t total = chunk.tokens;
      chunk.tokens = total > previous ? total - previous : 0;
      previous = std::max(previous, total);
    }
  } else {
    for (auto& chunk : chunks) {
      chunk.tokens = 0;
    }
  }
  if (m_usage_tokens >= 0) {
    r.output_tokens = static_cast<int>(m_usage_tokens);
    r.token_source = TokenSource::usage;
  } else {
    r.output_tokens = static_cast<int>(chunks.size());
    r.token_source = TokenSource::chunks;
  }
  r.ttft_ms = chunks.empty() ? k_nan : chunks.front().at_us / 1000.0;
  r.e2e_ms = m_any_json ? ms_between(m_origin, m_last_event) : k_nan;
  r.tpot_ms = chunks.empty() ? k_nan : tpot_ms(r.ttft_ms, r.e2e_ms, r.output_tokens);
  RequestRecord out = std::move(m_record);
  m_record = RequestRecord{};
  return out;
}

} // namespace specctl::bench::detail
