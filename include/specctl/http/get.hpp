#pragma once

// A blocking request for small control-plane calls (/v1/models, /health);
// the benchmark's own traffic goes through the multi-handle engine instead.

#include <specctl/util/error.hpp>

#include <chrono>
#include <expected>
#include <string>

namespace specctl::http {

struct Response {
  long status = 0;
  std::string body;
  std::string content_type;
};

struct GetOptions {
  std::chrono::milliseconds connect_timeout{std::chrono::seconds{5}};
  std::chrono::milliseconds timeout{std::chrono::seconds{30}};
  // Sent as "Authorization: Bearer ..." when not empty; never logged.
  std::string bearer_token;
  // Bodies longer than this are cut: a control call never needs more, and a broken server must not fill memory.
  std::size_t max_body = 4 * 1024 * 1024;
};

// GETs `url`. Any HTTP status is a Response; only transport failures are
// errors (kind timed_out when the deadline passed), named with the redacted URL.
std::expected<Response, Error> get(const std::string& url, const GetOptions& options = {});

// POSTs a JSON body to `url`; otherwise as get().
std::expected<Response, Error> post_json(const std::string& url, const std::string& body,
                                         const GetOptions& options = {});

} // namespace specctl::http
