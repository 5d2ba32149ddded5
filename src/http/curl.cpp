#include <specctl/http/curl.hpp>

#include <fmt/format.h>
#include <mutex>
#include <new>
#include <sys/resource.h>
#include <utility>

namespace specctl::http {

namespace {

// Owns a CURLU* for the length of one parse; nothing else in specctl uses the URL API.
struct UrlHandle {
  CURLU* handle = curl_url();
  UrlHandle() = default;
  UrlHandle(const UrlHandle&) = delete;
  UrlHandle& operator=(const UrlHandle&) = delete;
  ~UrlHandle() { curl_url_cleanup(handle); }

  std::string part(CURLUPart which) const {
    char* text = nullptr;
    if (curl_url_get(handle, which, &text, 0) != CURLUE_OK || text == nullptr) {
      return {};
    }
    std::string out(text);
    curl_free(text);
    return out;
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
  m_handle = curl_easy_init();
  if (m_handle == nullptr) {
    throw std::bad_alloc();
  }
}

Easy::~Easy() {
  if (m_handle != nullptr) {
    curl_easy_cleanup(m_handle);
  }
}

Easy::Easy(Easy&& other) noexcept : m_handle(std::exchange(other.m_handle, nullptr)) {}

Easy& Easy::operator=(Easy&& other) noexcept {
  if (this != &other) {
    if (m_handle != nullptr) {
      curl_easy_cleanup(m_handle);
    }
    m_handle = std::exchange(other.m_handle, nullptr);
  }
  return *this;
}

Multi::Multi() {
  global_init();
  m_handle = curl_multi_init();
  if (m_handle == nullptr) {
    throw std::bad_alloc();
  }
}

Multi::~Multi() {
  if (m_handle != nullptr) {
    curl_multi_cleanup(m_handle);
  }
}

Multi::Multi(Multi&& other) noexcept : m_handle(std::exchange(other.m_handle, nullptr)) {}

Multi& Multi::operator=(Multi&& other) noexcept {
  if (this != &other) {
    if (m_handle != nullptr) {
      curl_multi_cleanup(m_handle);
    }
    m_handle = std::exchange(other.m_handle, nullptr);
  }
  return *this;
}

HeaderList::~HeaderList() {
  curl_slist_free_all(m_list);
}

HeaderList::HeaderList(HeaderList&& other) noexcept : m_list(std::exchange(other.m_list, nullptr)) {}

HeaderList& HeaderList::operator=(HeaderList&& other) noexcept {
  if (this != &other) {
    curl_slist_free_all(m_list);
    m_list = std::exchange(other.m_list, nullptr);
  }
  return *this;
}

void HeaderList::append(const std::string& header) {
  curl_slist* grown = curl_slist_append(m_list, header.c_str());
  if (grown == nullptr) {
    throw std::bad_alloc();
  }
  m_list = grown;
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
  if (parsed.handle == nullptr) {
    throw std::bad_alloc();
  }
  const std::string text(url);
  if (CURLUcode rc = curl_url_set(parsed.handle, CURLUPART_URL, text.c_str(), 0); rc != CURLUE_OK) {
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
