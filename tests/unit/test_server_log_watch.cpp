#include <doctest/doctest.h>

#include <specctl/server/log_watch.hpp>

#include <fmt/format.h>

using namespace specctl::server;

namespace {

std::shared_ptr<const ServerTemplate> watch_template(const std::string& name) {
  specctl::util::Diagnostics diag;
  auto tmpl = load_template(name, {"templates"}, diag, {});
  REQUIRE(tmpl);
  return tmpl;
}

} // namespace

TEST_CASE("strip_ansi") {
  CHECK(strip_ansi("\x1b[32mINFO\x1b[0m 02-12 19:33:44 ready") == "INFO 02-12 19:33:44 ready");
  CHECK(strip_ansi("plain") == "plain");
  CHECK(strip_ansi("cut \x1b[3") == "cut ");
}

TEST_CASE("sglang log lines") {
  LogMatcher m(watch_template("sglang")->log);
  CHECK(m.classify("[2025-01-22 10:00:00] The server is fired up and ready to roll!").ready);
  CHECK_FALSE(m.classify("[2025-01-22 10:00:00 TP0] Load weight begin. avail mem=78.50 GB").ready);
  CHECK(m.classify("[2025-01-22 10:00:00 TP0] Load weight begin. avail mem=78.50 GB").milestone == "Load weight begin");
  auto progress = m.classify("Loading safetensors checkpoint shards:  45% Completed | 29/64 [00:30<00:31,  1.05it/s]");
  REQUIRE(progress.progress);
  CHECK(progress.progress->percent == 45);
  CHECK(progress.progress->done == 29);
  CHECK(progress.progress->total == 64);
  CHECK(m.classify("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB").fatal);
  CHECK(m.classify("[Errno 98] error while attempting to bind on address ('0.0.0.0', 30000): address already in use")
            .fatal);
  auto decode = m.classify("[2025-01-22 10:00:00 TP0] Decode batch, #running-req: 8, #token: 12345, token usage: 0.05, "
                           "accept len: 3.21, accept rate: 0.64, cuda graph: True, gen throughput (token/s): 1234.56, "
                           "#queue-req: 0, ");
  CHECK_FALSE(decode.fatal);
  std::vector<std::pair<std::string, double>> metrics = {
      {"accept_length", 3.21}, {"gen_throughput", 1234.56}, {"running_requests", 8}, {"queued_requests", 0}};
  CHECK(decode.metrics == metrics);
}

TEST_CASE("vllm log lines, coloured") {
  LogMatcher m(watch_template("vllm")->log);
  CHECK(m.classify("\x1b[32m(APIServer pid=11980) INFO\x1b[0m 02-12 19:33:44 [launcher.py:37] Application startup "
                   "complete.")
            .ready);
  auto spec = m.classify("(APIServer pid=1) INFO 02-12 19:33:44 [metrics.py:1] SpecDecoding metrics: Mean acceptance "
                         "length: 2.85, Accepted throughput: 410.22 tokens/s, Drafted throughput: 660.00 tokens/s");
  REQUIRE(spec.metrics.size() == 1);
  CHECK(spec.metrics[0] == std::pair<std::string, double>{"accept_length", 2.85});
  CHECK(m.classify("ERROR Engine core initialization failed. See root cause above.").fatal);
}

TEST_CASE("a line far longer than a regular expression can run over: its first 4 KiB are matched") {
  // libstdc++'s std::regex recursed once per character a `.*` ran over: a 30,000-character
  // "Decode batch" line overflowed the stack (exit 139) with every shipped template.
  const std::string huge(1 << 20, 'x');
  for (const char* name : {"sglang", "vllm", "llamacpp"}) {
    CAPTURE(name);
    LogMatcher m(watch_template(name)->log);
    for (const std::string prefix : {"Decode batch. ", "SpecDecoding metrics: ", "prompt eval time = ",
                                     "Loading safetensors checkpoint shards:", "|  eval time = "}) {
      CHECK_FALSE(m.classify(prefix + huge).fatal);
      CHECK(m.matches(prefix + std::string(1 << 20, ' ')).metrics.empty());
    }
  }
  LogMatcher sglang(watch_template("sglang")->log);
  CHECK(sglang.classify("The server is fired up and ready to roll! " + huge).ready);
  // A marker past the window is not seen.
  // Appended, not summed: g++ 12 at -O2 warns falsely (-Warray-bounds) on the sum.
  std::string far(5000, ' ');
  far += "The server is fired up and ready to roll!";
  CHECK_FALSE(sglang.classify(far).ready);
}

TEST_CASE("log lines from appended bytes") {
  LogLines lines;
  CHECK(lines.feed("first li").empty());
  CHECK(lines.feed("ne\nsecond\n") == std::vector<std::string>{"first line", "second"});
  // tqdm redraws with \r: each redraw is a line.
  CHECK(lines.feed("bar 10%\rbar 20%\rbar 30%") == std::vector<std::string>{"bar 10%", "bar 20%"});
  CHECK(lines.offset() == 41);
  CHECK(lines.tail().back() == "bar 30%");
  for (int i = 0; i < 30; ++i) {
    lines.feed(fmt::format("line {}\n", i));
  }
  auto tail = lines.tail();
  REQUIRE(tail.size() == LogLines::k_tail_lines);
  CHECK(tail.front() == "line 10");
  CHECK(tail.back() == "line 29");
  std::string huge(LogLines::k_max_line + 10, 'x');
  auto cut = lines.feed(huge);
  REQUIRE(cut.size() == 1);
  CHECK(cut[0].size() == LogLines::k_max_line);
}
