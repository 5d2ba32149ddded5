#include <doctest/doctest.h>

#include <specctl/http/curl.hpp>
#include <specctl/http/get.hpp>

#include <sys/resource.h>
#include <utility>

using namespace specctl::http;

TEST_CASE("handles are move-only owners") {
  Easy a;
  CURL* raw = a.get();
  REQUIRE(raw != nullptr);
  Easy b = std::move(a);
  CHECK(b.get() == raw);
  CHECK(a.get() == nullptr); // NOLINT(bugprone-use-after-move): moved-from state is part of the contract
  Easy c;
  c = std::move(b);
  CHECK(c.get() == raw);
  Multi m;
  Multi n = std::move(m);
  CHECK(n.get() != nullptr);
  HeaderList headers;
  headers.append("Accept: text/event-stream");
  headers.append("Expect:");
  HeaderList moved = std::move(headers);
  REQUIRE(moved.get() != nullptr);
  CHECK(std::string(moved.get()->data) == "Accept: text/event-stream");
  CHECK(headers.get() == nullptr); // NOLINT(bugprone-use-after-move)
}

TEST_CASE("base URLs") {
  CHECK(normalize_base_url("http://127.0.0.1:30000").value() == "http://127.0.0.1:30000");
  CHECK(normalize_base_url("http://127.0.0.1:30000/").value() == "http://127.0.0.1:30000");
  CHECK(normalize_base_url("http://127.0.0.1:30000/v1/").value() == "http://127.0.0.1:30000");
  CHECK(normalize_base_url("https://gpu-node-1/proxy/v1").value() == "https://gpu-node-1/proxy");
  auto message = [](std::string_view url) { return std::string(normalize_base_url(url).error().what()); };
  CHECK(message("127.0.0.1:30000") ==
        "invalid URL \"127.0.0.1:30000\": give the scheme and host, like http://127.0.0.1:30000");
  CHECK(message("ftp://host/") == "invalid URL \"ftp://host/\": the scheme must be http or https, not \"ftp\"");
  CHECK(message("http://h:30000/?key=secret") == "invalid URL \"http://h:30000/?***\": a base URL takes no query or "
                                                 "fragment");
  CHECK(normalize_base_url("http://exa mple").error().kind() == specctl::ErrorKind::bad_input);
}

TEST_CASE("URLs are redacted for logs") {
  CHECK(redact_url("http://127.0.0.1:30000/v1") == "http://127.0.0.1:30000/v1");
  CHECK(redact_url("https://user:pass@host:1/x") == "https://***@host:1/x");
  CHECK(redact_url("http://host/v1/models?api_key=abc") == "http://host/v1/models?***");
  CHECK(redact_url("http://host/a@b") == "http://host/a@b");
}

TEST_CASE("the open-file limit is raised, and a too-high need is refused clearly") {
  rlimit before{};
  REQUIRE(getrlimit(RLIMIT_NOFILE, &before) == 0);
  CHECK(ensure_fd_limit(64).has_value());
  if (before.rlim_max != RLIM_INFINITY) {
    auto refused = ensure_fd_limit(static_cast<std::size_t>(before.rlim_max) + 1);
    REQUIRE_FALSE(refused.has_value());
    CHECK(std::string(refused.error().what()).find("open files are needed but the hard limit is") != std::string::npos);
    CHECK(ensure_fd_limit(static_cast<std::size_t>(before.rlim_max) + 1, FdLimit::best_effort).has_value());
  }
  setrlimit(RLIMIT_NOFILE, &before);
}

TEST_CASE("GET against a closed port fails with the URL, not a crash") {
  GetOptions options;
  options.connect_timeout = std::chrono::seconds{2};
  options.timeout = std::chrono::seconds{5};
  // Port 1 on loopback: nothing listens there in a test environment.
  auto response = get("http://127.0.0.1:1/v1/models", options);
  REQUIRE_FALSE(response.has_value());
  CHECK(std::string(response.error().what()).starts_with("GET http://127.0.0.1:1/v1/models: "));
  CHECK_FALSE(response.error().timed_out());
}
