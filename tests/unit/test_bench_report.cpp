#include <doctest/doctest.h>

#include <specctl/bench/report.hpp>

#include <cstdio>
#include <cstdlib>

using namespace specctl::bench;

namespace {

Summary summary_of(std::vector<double> samples) {
  return summarize(samples);
}

LevelResult level_of(int concurrency) {
  LevelResult level;
  level.concurrency = concurrency;
  level.requests = 10;
  level.completed = 9;
  level.failed = 1;
  level.failures[static_cast<std::size_t>(FailureKind::timeout)] = 1;
  level.first_error[static_cast<std::size_t>(FailureKind::timeout)] = "timed out after 600000 ms (3 chunks received)";
  level.duration_s = 4.5;
  level.output_tokens = 4608;
  level.output_tok_s = 1024;
  level.request_s = 2;
  level.per_user_tok_s = 92.61;
  level.ttft_ms = summary_of({40, 45, 50});
  level.itl_ms = summary_of({10.5, 10.8, 11.2});
  level.tpot_ms = summary_of({10.7, 10.8});
  level.e2e_ms = summary_of({5530, 5600});
  level.tokens_per_chunk = 1;
  return level;
}

} // namespace

TEST_CASE("the terminal report, exactly") {
  Document document;
  document.target = Target{"http://127.0.0.1:30000", "kimi", "secret-key"};
  document.prompts = "seeds";
  SingleStreamResult single;
  single.runs = {{1, true, 92.6, 93.1, 512, 45.1, 5530}, {2, true, 92.2, 92.7, 512, 44.9, 5553}};
  single.level.records.resize(2);
  single.mean = 92.4;
  single.median = 92.4;
  single.stdev = 0.28;
  document.single_stream = single;
  document.concurrency = ConcurrencyResult{{level_of(1), level_of(250)}};
  CHECK(format_document(document) ==
        "specctl bench: http://127.0.0.1:30000 model \"kimi\", completions, max_tokens 512, prompts seeds\n"
        "\n"
        "Single stream: 2 of 2 runs, 92.40 tok/s mean, 92.40 median, 0.28 stdev\n"
        "  run  tok/s  decode tok/s  tokens  TTFT ms  E2E ms\n"
        "    1  92.60         93.10     512     45.1    5530\n"
        "    2  92.20         92.70     512     44.9    5553\n"
        "\n"
        "Concurrency (latencies p50 / p99)\n"
        "  conc  done  failed  out tok/s  req/s  user tok/s      TTFT ms       ITL ms      TPOT ms       E2E ms"
        "  tok/chunk\n"
        "     1     9       1     1024.0   2.00       92.61  45.0 / 49.9  10.8 / 11.2  10.8 / 10.8  5565 / 5599"
        "       1.00\n"
        "   250     9       1     1024.0   2.00       92.61  45.0 / 49.9  10.8 / 11.2  10.8 / 10.8  5565 / 5599"
        "       1.00\n"
        "\n"
        "Problems:\n"
        "  concurrency 1: 1 failed with timeout, first: timed out after 600000 ms (3 chunks received)\n"
        "  concurrency 250: 1 failed with timeout, first: timed out after 600000 ms (3 chunks received)\n");
}

TEST_CASE("the JSON document") {
  Document document;
  document.target = Target{"http://user:pw@127.0.0.1:30000", "kimi", "secret-key"};
  document.prompts = "long";
  document.warmup = 1;
  SingleStreamResult single;
  single.runs = {{1, true, 92.6, 93.1, 512, 45.1, 5530}, {2, false, 0, 0, 3, 45.0, 600000}};
  single.mean = 92.6;
  single.median = 92.6;
  document.single_stream = single;
  LevelResult rate = level_of(7);
  rate.rate = 4.0;
  rate.max_concurrency = 64;
  document.concurrency = ConcurrencyResult{{level_of(250)}};
  document.rate = RateResult{{rate}};
  const auto json = to_json(document);
  const std::string text = json.dump();
  CHECK(text.find("secret") == std::string::npos);
  CHECK(text.find("pw@") == std::string::npos);
  CHECK(json["format"] == "specctl-bench");
  CHECK(json["version"] == k_document_version);
  CHECK(json["target"]["url"] == "http://***@127.0.0.1:30000");
  CHECK(json["target"]["endpoint"] == "completions");
  CHECK(json["request"]["max_tokens"] == 512);
  CHECK(json["request"]["ignore_eos"] == true);
  CHECK(json["single_stream"]["runs"][0]["tok_s"] == 92.6);
  CHECK(json["single_stream"]["runs"][1]["tok_s"].is_null());
  CHECK(json["single_stream"]["mean"] == 92.6);
  const auto& level = json["levels"][0];
  CHECK(level["concurrency"] == 250);
  CHECK(level["completed"] == 9);
  CHECK(level["failed"] == 1);
  CHECK(level["failures"] == nlohmann::json{{"timeout", 1}});
  CHECK(level["output_tok_s"] == 1024.0);
  CHECK(level["request_s"] == 2.0);
  CHECK(level["ttft_ms"]["p50"] == 45.0);
  for (const char* metric : {"ttft_ms", "itl_ms", "tpot_ms", "e2e_ms", "token_latency_ms"}) {
    for (const char* key : {"mean", "p50", "p90", "p99", "stdev"}) {
      CAPTURE(metric);
      CAPTURE(key);
      CHECK(level[metric].contains(key));
    }
  }
  // No samples: null, not NaN (which JSON cannot hold).
  CHECK(level["token_latency_ms"]["p50"].is_null());
  CHECK(level["token_source"] == "usage");
  CHECK_FALSE(level.contains("rate"));
  CHECK(json["rates"][0]["rate"] == 4.0);
  CHECK(json["rates"][0]["max_concurrency"] == 64);

  RequestRecord record;
  record.index = 3;
  record.failure = FailureKind::cut_stream;
  record.error = "the stream ended before [DONE] after 2 chunks";
  record.chunks = {{1500, 0}, {2500, 0}};
  record.ttft_ms = 1.5;
  record.e2e_ms = 2.5;
  record.tpot_ms = std::nan("");
  const auto line = request_to_json(record, "concurrency 4");
  CHECK(line["phase"] == "concurrency 4");
  CHECK(line["ok"] == false);
  CHECK(line["failure"] == "cut_stream");
  CHECK(line["chunks"] == nlohmann::json::parse("[[1.5, 0], [2.5, 0]]"));
  CHECK(line["tpot_ms"].is_null());
}

TEST_CASE("progress: one redrawn line on a terminal, plain lines elsewhere") {
  Progress p{"concurrency 10", 12, 20, 1, 8340, 10.0, 834.0, false};
  // 12 ended, one of them failed: 11 are progress, the failed one is named as such.
  CHECK(ProgressPrinter::line(p) == "concurrency 10: 11/20 requests ok, 1 failed, 834 tok/s, 10.0s");

  char* buffer = nullptr;
  std::size_t size = 0;
  std::FILE* out = open_memstream(&buffer, &size);
  REQUIRE(out != nullptr);
  {
    ProgressPrinter terminal(out, ProgressPrinter::Style::terminal);
    terminal.update(p);
    p.done = 20;
    p.finished = true;
    terminal.update(p);
  }
  {
    ProgressPrinter plain(out, ProgressPrinter::Style::plain);
    Progress q{"rate 4/s", 1, 40, 0, 10, 0.3, 40, false};
    plain.update(q);
    q.elapsed_s = 2.0;
    q.done = 5;
    plain.update(q);
    q.elapsed_s = 6.0;
    q.done = 20;
    plain.update(q);
    q.elapsed_s = 7.0;
    q.done = 40;
    q.finished = true;
    plain.update(q);
  }
  std::fclose(out);
  const std::string text(buffer, size);
  std::free(buffer);
  CHECK(text == "\rconcurrency 10: 11/20 requests ok, 1 failed, 834 tok/s, 10.0s\x1b[K"
                "\rconcurrency 10: 19/20 requests ok, 1 failed, 834 tok/s, 10.0s\x1b[K\n"
                "rate 4/s: 1/40 requests ok, 0 failed, 40 tok/s, 0.3s\n"
                "rate 4/s: 20/40 requests ok, 0 failed, 40 tok/s, 6.0s\n"
                "rate 4/s: 40/40 requests ok, 0 failed, 40 tok/s, 7.0s\n");
}
