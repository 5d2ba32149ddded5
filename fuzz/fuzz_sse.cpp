// The text/event-stream parser as the benchmark's streams drive it: the input
// fed whole, and again in pieces cut at input-dependent places (one read may
// end anywhere, also between "\r" and "\n"); both must give the same events.
// Every event goes through the chunk scanner, as Stream::on_event does.

#include "fuzz_support.hpp"

#include <specctl/bench/chunk.hpp>
#include <specctl/bench/sse.hpp>

#include <cstdlib>
#include <string>
#include <vector>

using namespace specctl;

namespace {

struct Outcome {
  std::vector<std::string> events;
  bool ok = true;
  bool partial = false;
};

Outcome parse(bench::SseParser& parser, std::string_view bytes, std::size_t seed) {
  Outcome out;
  auto on_event = [&](std::string_view data) {
    out.events.emplace_back(data);
    bench::ChunkFields fields;
    if (data != "[DONE]") {
      (void)bench::scan_chunk(data, fields);
    }
  };
  std::size_t at = 0;
  while (at < bytes.size()) {
    // seed 0: one piece; otherwise pieces of 1 to 16 bytes.
    std::size_t piece = seed == 0 ? bytes.size() : 1 + (seed = seed * 1103515245 + 12345) % 16;
    piece = std::min(piece, bytes.size() - at);
    out.ok = parser.feed(bytes.substr(at, piece), on_event) && out.ok;
    at += piece;
  }
  out.partial = parser.has_partial();
  return out;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size > fuzz::k_max_input) {
    return -1;
  }
  std::string_view bytes = fuzz::as_text(data, size);
  // One parser for every stream, as a curl handle reuses its own.
  static bench::SseParser parser;
  parser.reset();
  Outcome whole = parse(parser, bytes, 0);
  parser.reset();
  std::size_t seed = 1;
  for (unsigned char c : bytes.substr(0, 8)) {
    seed = seed * 31 + c;
  }
  Outcome pieces = parse(parser, bytes, seed | 1);
  if (whole.events != pieces.events || whole.ok != pieces.ok || whole.partial != pieces.partial) {
    std::abort();
  }
  return 0;
}
