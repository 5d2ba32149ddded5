#pragma once

// Move-only owners of libcurl's handles. libcurl is the only HTTP client
// specctl uses; everything above this layer talks to these types.

#include <specctl/util/error.hpp>
#include <specctl/util/unique_handle.hpp>

#include <curl/curl.h>

#include <cstddef>
#include <expected>
#include <string>
#include <string_view>

namespace specctl::http {

// libcurl's global state must exist before the first handle and is not
// thread-safe to create, so every constructor below calls this; it runs once.
void global_init();

// One transfer handle (CURL*). Options set on it survive between transfers,
// which is why the benchmark engine reuses handles instead of making new ones.
class Easy {
public:
  Easy();

  CURL* get() const { return m_handle.get(); }

private:
  util::UniqueHandle<CURL, curl_easy_cleanup> m_handle;
};

// A multi handle (CURLM*): it owns the connection cache that lets sequential
// requests reuse keep-alive connections.
class Multi {
public:
  Multi();

  CURLM* get() const { return m_handle.get(); }

private:
  util::UniqueHandle<CURLM, curl_multi_cleanup> m_handle;
};

// A request header list (curl_slist*). It must outlive every transfer that uses it.
class HeaderList {
public:
  void append(const std::string& header);
  curl_slist* get() const { return m_list.get(); }

private:
  util::UniqueHandle<curl_slist, curl_slist_free_all> m_list;
};

// libcurl's message for a failed transfer, with the detail of its error buffer
// when there is one: `Couldn't connect to server (Failed to connect to 127.0.0.1 port 1 ...)`.
std::string describe(CURLcode code, const char* detail);

// Checks an http(s) base URL and returns it without a trailing "/" or "/v1",
// so "http://h:30000/v1/" and "http://h:30000" name the same server.
std::expected<std::string, Error> normalize_base_url(std::string_view url);

// The URL fit for logs and result files: no user, password or query (API keys live there).
std::string redact_url(std::string_view url);

enum class FdLimit { required, best_effort };

// Raises the soft RLIMIT_NOFILE to at least `needed` descriptors (one per
// connection, plus room). When the hard limit is lower, `required` fails
// clearly and `best_effort` raises the soft limit to the hard one.
std::expected<void, Error> ensure_fd_limit(std::size_t needed, FdLimit mode = FdLimit::required);

} // namespace specctl::http
