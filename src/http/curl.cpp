#include <specctl/http/curl.hpp>

#include <fmt/format.h>
#include <mutex>
#include <new>
#include <sys/resource.h>

namespace specctl::http {

namespace {

// Owns a CURLU* for the length of one parse; nothing else in specctl uses the URL API.
struct UrlHandle {
  util::UniqueHandle<CURLU, curl_url_cleanup> handle{curl_url()};

  std::string part(CURLUPart which) const {
    char* text = nullptr;
    if (curl_url_get(handle.get(), which, &text, 0) != CURLUE_OK || text == nullptr) {
      return {};
    }
    const util::UniqueHandle<char, curl_free> owned(text);
    return std::string(owned.get());
  }
};

} // namespace

void global_init() {
  static std::once_flag once;
  std::call_once(once, [] {
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
      throw Error("libcurl could not initialise (curl_global_init failed)");
    }
  });
}

Easy::Easy() {
  global_init();
  m_handle.reset(curl_easy_init());
  if (!m_handle) {
    throw std::bad_alloc();
  }
}

Multi::Multi() {
  global_init();
  m_handle.reset(curl_multi_init());
  if (!m_handle) {
    throw std::bad_alloc();
  }
}

void HeaderList::append(const std::string& header) {
  // The head of the list: the old one, or a new list when there was none. A
  // failure leaves the list as it was.
  curl_slist* grown = curl_slist_append(m_list.get(), header.c_str());
  if (grown == nullptr) {
    throw std::bad_alloc();
  }
  static_cast<void>(m_list.release());
  m_list.reset(grown);
}

std::string describe(CURLcode code, const char* detail) {
  std::string message = curl_easy_strerror(code);
  if (detail != nullptr && detail[0] != '\0') {
    std::string_view text(detail);
    while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) {
      text.remove_suffix(1);
    }
    message += fmt::format(" ({})", text);
  }
  return message;
}

std::expected<std::string, Error> normalize_base_url(std::string_view url) {
  global_init();
  const auto bad = [&](std::string_view why) {
    return std::unexpected(Error(fmt::format("invalid URL \"{}\": {}", redact_url(url), why), ErrorKind::bad_input));
  };
  if (url.find("://") == std::string_view::npos) {
    return bad("give the scheme and host, like http://127.0.0.1:30000");
  }
  UrlHandle parsed;
  if (!parsed.handle) {
    throw std::bad_alloc();
  }
  const std::string text(url);
  if (CURLUcode rc = curl_url_set(parsed.handle.get(), CURLUPART_URL, text.c_str(), 0); rc != CURLUE_OK) {
    return bad(curl_url_strerror(rc));
  }
  const std::string scheme = parsed.part(CURLUPART_SCHEME);
  if (scheme != "http" && scheme != "https") {
    return bad(fmt::format("the scheme must be http or https, not \"{}\"", scheme));
  }
  if (parsed.part(CURLUPART_HOST).empty()) {
    return bad("no host");
  }
  if (!parsed.part(CURLUPART_QUERY).empty() || !parsed.part(CURLUPART_FRAGMENT).empty()) {
    return bad("a base URL takes no query or fragment");
  }
  std::string base = text;
  while (!base.empty() && base.back() == '/') {
    base.pop_back();
  }
  if (base.ends_with("/v1")) {
    base.resize(base.size() - 3);
  }
  while (!base.empty() && base.back() == '/') {
    base.pop_back();
  }
  return base;
}

std::string redact_url(std::string_view url) {
  std::string out(url);
  const auto scheme_end = out.find("://");
  const std::size_t authority = scheme_end == std::string::npos ? 0 : scheme_end + 3;
  const auto path_start = out.find_first_of("/?#", authority);
  const auto at = out.rfind('@', path_start == std::string::npos ? out.size() : path_start);
  if (at != std::string::npos && at >= authority) {
    out.replace(authority, at - authority, "***");
  }
  if (const auto query = out.find('?'); query != std::string::npos) {
    out.resize(query);
    out += "?***";
  }
  return out;
}

std::expected<void, Error> ensure_fd_limit(std::size_t needed, FdLimit mode) {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0) {
    return std::unexpected(Error("cannot read the open-file limit (getrlimit RLIMIT_NOFILE failed)"));
  }
  auto wanted = static_cast<rlim_t>(needed);
  if (limit.rlim_cur != RLIM_INFINITY && limit.rlim_cur >= wanted) {
    return {};
  }
  if (limit.rlim_cur == RLIM_INFINITY) {
    return {};
  }
  if (limit.rlim_max != RLIM_INFINITY && limit.rlim_max < wanted && mode == FdLimit::best_effort) {
    wanted = limit.rlim_max;
  }
  if (limit.rlim_max != RLIM_INFINITY && limit.rlim_max < wanted) {
    return std::unexpected(Error(fmt::format("{} open files are needed but the hard limit is {} (raise it with "
                                             "\"ulimit -Hn {}\" or in /etc/security/limits.conf)",
                                             needed, limit.rlim_max, needed),
                                 ErrorKind::bad_input));
  }
  limit.rlim_cur = wanted;
  if (setrlimit(RLIMIT_NOFILE, &limit) != 0) {
    return std::unexpected(Error(fmt::format("cannot raise the open-file limit to {} (setrlimit failed)", needed)));
  }
  return {};
}

} // namespace specctl::http
