#include <doctest/doctest.h>

#include <specctl/bench/sse.hpp>

#include <string>
#include <vector>

using specctl::bench::SseParser;

namespace {

// Feeds `text` in pieces of `piece` bytes and returns the events seen.
std::vector<std::string> parse_in_pieces(const std::string& text, std::size_t piece) {
  SseParser parser;
  std::vector<std::string> events;
  for (std::size_t at = 0; at < text.size(); at += piece) {
    parser.feed(std::string_view(text).substr(at, piece), [&](std::string_view data) { events.emplace_back(data); });
  }
  return events;
}

} // namespace

TEST_CASE("SSE parser: events in any split") {
  const std::string stream = "data: {\"a\":1}\n\n"
                             ": a comment, e.g. a keep-alive ping\n\n"
                             "event: message\nid: 7\nretry: 100\ndata: {\"b\":2}\n\n"
                             "data: line one\ndata: line two\n\n"
                             "data:no-space\n\n"
                             "data\n\n"
                             "data: [DONE]\n\n";
  const std::vector<std::string> expected = {"{\"a\":1}", "{\"b\":2}", "line one\nline two", "no-space", "", "[DONE]"};
  SUBCASE("whole") {
    CHECK(parse_in_pieces(stream, stream.size()) == expected);
  }
  SUBCASE("byte by byte") {
    CHECK(parse_in_pieces(stream, 1) == expected);
  }
  SUBCASE("every piece size") {
    for (std::size_t piece = 2; piece < 40; ++piece) {
      CAPTURE(piece);
      CHECK(parse_in_pieces(stream, piece) == expected);
    }
  }
}

TEST_CASE("SSE parser: CRLF and CR line endings, split between CR and LF") {
  const std::string crlf = "data: x\r\n\r\ndata: y\r\n\r\n";
  const std::string cr = "data: x\r\rdata: y\r\r";
  for (std::size_t piece = 1; piece <= crlf.size(); ++piece) {
    CAPTURE(piece);
    CHECK(parse_in_pieces(crlf, piece) == std::vector<std::string>{"x", "y"});
    CHECK(parse_in_pieces(cr, piece) == std::vector<std::string>{"x", "y"});
  }
}

TEST_CASE("SSE parser: partial events and reset") {
  SseParser parser;
  int events = 0;
  parser.feed("data: {\"unfinished\":", [&](std::string_view) { ++events; });
  CHECK(events == 0);
  CHECK(parser.has_partial());
  parser.feed("1}\n", [&](std::string_view) { ++events; });
  CHECK(events == 0);
  CHECK(parser.has_partial());
  parser.feed("\n", [&](std::string_view data) {
    ++events;
    CHECK(data == "{\"unfinished\":1}");
  });
  CHECK(events == 1);
  CHECK_FALSE(parser.has_partial());
  parser.feed("data: cut", [&](std::string_view) { ++events; });
  parser.reset();
  CHECK_FALSE(parser.has_partial());
  parser.feed("data: fresh\n\n", [&](std::string_view data) { CHECK(data == "fresh"); });
}

TEST_CASE("SSE parser: a line without end is refused past the limit") {
  SseParser parser;
  const std::string garbage(SseParser::k_max_event_bytes / 4, 'x');
  bool ok = true;
  for (int i = 0; i < 5 && ok; ++i) {
    ok = parser.feed(garbage, [](std::string_view) {});
  }
  CHECK_FALSE(ok);
  CHECK(parser.overflowed());
  CHECK_FALSE(parser.feed("\n\n", [](std::string_view) { FAIL("no event after overflow"); }));
}
