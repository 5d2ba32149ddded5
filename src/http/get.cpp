#include <specctl/http/curl.hpp>
#include <specctl/http/get.hpp>

#include <algorithm>
#include <fmt/format.h>

namespace specctl::http {

namespace {

struct Sink {
  std::string* body;
  std::size_t limit;
};

std::size_t on_body(char* data, std::size_t size, std::size_t count, void* user) {
  auto* sink = static_cast<Sink*>(user);
  const std::size_t bytes = size * count;
  const std::size_t room = sink->limit - std::min(sink->limit, sink->body->size());
  sink->body->append(data, std::min(bytes, room));
  return bytes;
}

// GET, or POST of a JSON body when `json_body` is set.
std::expected<Response, Error> perform(const std::string& url, const std::string* json_body,
                                       const GetOptions& options) {
  Easy easy;
  CURL* h = easy.get();
  Response response;
  Sink sink{&response.body, options.max_body};
  char detail[CURL_ERROR_SIZE] = {};
  HeaderList headers;
  if (!options.bearer_token.empty()) {
    headers.append("Authorization: Bearer " + options.bearer_token);
  }
  if (json_body != nullptr) {
    headers.append("Content-Type: application/json");
    headers.append("Expect:");
    curl_easy_setopt(h, CURLOPT_POSTFIELDS, json_body->data());
    curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(json_body->size()));
  }
  curl_easy_setopt(h, CURLOPT_URL, url.c_str());
  curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
  // specctl talks to servers it launched or was pointed at: a proxy from the environment would only get in the way.
  curl_easy_setopt(h, CURLOPT_NOPROXY, "*");
  curl_easy_setopt(h, CURLOPT_HTTPHEADER, headers.get());
  curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, &on_body);
  curl_easy_setopt(h, CURLOPT_WRITEDATA, &sink);
  curl_easy_setopt(h, CURLOPT_ERRORBUFFER, detail);
  curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(options.connect_timeout.count()));
  curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, static_cast<long>(options.timeout.count()));
  const CURLcode rc = curl_easy_perform(h);
  if (rc != CURLE_OK) {
    const auto kind = rc == CURLE_OPERATION_TIMEDOUT ? ErrorKind::timed_out : ErrorKind::failed;
    return std::unexpected(Error(
        fmt::format("{} {}: {}", json_body != nullptr ? "POST" : "GET", redact_url(url), describe(rc, detail)), kind));
  }
  curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &response.status);
  const char* type = nullptr;
  if (curl_easy_getinfo(h, CURLINFO_CONTENT_TYPE, &type) == CURLE_OK && type != nullptr) {
    response.content_type = type;
  }
  return response;
}

} // namespace

std::expected<Response, Error> get(const std::string& url, const GetOptions& options) {
  return perform(url, nullptr, options);
}

std::expected<Response, Error> post_json(const std::string& url, const std::string& body, const GetOptions& options) {
  return perform(url, &body, options);
}

} // namespace specctl::http
