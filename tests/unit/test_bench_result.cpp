#include <doctest/doctest.h>

#include <specctl/bench/bench.hpp>
#include <specctl/bench/report.hpp>
#include <specctl/bench/result.hpp>
#include <specctl/report/results.hpp>

using namespace specctl::bench;

namespace {

RequestRecord drafted(int prompt, int draft_tokens, int draft_accepted) {
  RequestRecord r;
  r.prompt = prompt;
  r.draft_tokens = draft_tokens;
  r.draft_accepted = draft_accepted;
  return r;
}

} // namespace

TEST_CASE("prefix cache: more than 10% of the prompt tokens cached is flagged") {
  CHECK(prefix_cache_flag("decode", 3600, 1234) ==
        "benchmark \"decode\": 34% of prompt tokens (1234 of 3600) came from the server's prefix cache: TTFT and "
        "throughput are flattered; give every request a distinct prompt (unique_prompts: true)");
  // A shared system prompt's worth is normal.
  CHECK_FALSE(prefix_cache_flag("decode", 3600, 360));
  CHECK(prefix_cache_flag("decode", 3600, 361));
  // Unknown either way: nothing to say.
  CHECK_FALSE(prefix_cache_flag("decode", -1, 500));
  CHECK_FALSE(prefix_cache_flag("decode", 3600, -1));
  CHECK_FALSE(prefix_cache_flag("decode", 0, 0));
}

TEST_CASE("repeated prompts with identical acceptance are flagged") {
  SUBCASE("every repeat of every prompt accepted the same, nearly all") {
    std::vector<RequestRecord> records = {drafted(0, 40, 40), drafted(1, 35, 33), drafted(0, 40, 40),
                                          drafted(1, 35, 33)};
    CHECK(repeated_acceptance_flag("decode", records) ==
          "benchmark \"decode\": every repeat of a prompt accepted the same drafted tokens (146 of 150): the accept "
          "length reflects repeated prompts, not the workload");
  }
  SUBCASE("a prompt sent once is left out; one repeated prompt is enough") {
    std::vector<RequestRecord> records = {drafted(0, 115, 115), drafted(0, 115, 115), drafted(2, 80, 10)};
    CHECK(repeated_acceptance_flag("x", records) ==
          "benchmark \"x\": every repeat of a prompt accepted the same drafted tokens (230 of 230): the accept length "
          "reflects repeated prompts, not the workload");
  }
  SUBCASE("repeats that differ are a workload") {
    std::vector<RequestRecord> records = {drafted(0, 40, 40), drafted(0, 40, 39), drafted(1, 35, 33),
                                          drafted(1, 35, 33)};
    CHECK_FALSE(repeated_acceptance_flag("x", records));
  }
  SUBCASE("identical but mostly rejected drafts are not recited text") {
    std::vector<RequestRecord> records = {drafted(0, 40, 20), drafted(0, 40, 20)};
    CHECK_FALSE(repeated_acceptance_flag("x", records));
  }
  SUBCASE("a speculator that learned the answers: repeats accept far more than the first sends") {
    // llama-server with --spec-type ngram-mod, the seed prompts sent verbatim 3 times each:
    // (drafted, accepted) per request as its timings said, accept length 49.4.
    std::vector<RequestRecord> records = {drafted(0, 115, 115), drafted(1, 51, 0),    drafted(2, 64, 38),
                                          drafted(0, 185, 111), drafted(1, 119, 115), drafted(2, 122, 109),
                                          drafted(0, 185, 111), drafted(1, 119, 115), drafted(2, 122, 109)};
    CHECK(repeated_acceptance_flag("single", records) ==
          "benchmark \"single\": repeats of a prompt accepted 112 drafted tokens a request against 51 on its first "
          "send: the speculator learned the answers from earlier requests, and the accept length reflects repeated "
          "prompts, not the workload");
    // Half as much again, but only a few tokens more: noise on short answers, not learning.
    CHECK_FALSE(
        repeated_acceptance_flag("x", {drafted(0, 10, 4), drafted(0, 10, 8), drafted(1, 10, 4), drafted(1, 10, 8)}));
  }
  SUBCASE("no prompt sent twice, failed requests and requests without timings") {
    std::vector<RequestRecord> records = {drafted(0, 40, 40), drafted(1, 40, 40), drafted(0, -1, -1)};
    RequestRecord failed = drafted(1, 40, 40);
    failed.failure = FailureKind::cut_stream;
    records.push_back(failed);
    CHECK_FALSE(repeated_acceptance_flag("x", records));
    CHECK_FALSE(repeated_acceptance_flag("x", {}));
  }
}

TEST_CASE("a level's prompt tokens: summed over completed requests that report them") {
  LevelResult level;
  for (int prompt_tokens : {100, -1, 50}) {
    RequestRecord r;
    r.prompt_tokens = prompt_tokens;
    r.cached_tokens = prompt_tokens > 0 ? 10 : -1;
    level.records.push_back(r);
  }
  RequestRecord failed;
  failed.failure = FailureKind::timeout;
  failed.prompt_tokens = 1000;
  level.records.push_back(failed);
  aggregate(level);
  CHECK(level.prompt_tokens == 150);
  CHECK(level.cached_prompt_tokens == 20);
  CHECK(token_source(level) == "usage");

  LevelResult silent;
  silent.records.resize(2);
  aggregate(silent);
  CHECK(silent.prompt_tokens == -1);
  CHECK(silent.cached_prompt_tokens == -1);
}

TEST_CASE("the prefix that keeps each request's prompt its own") {
  const std::string a = unique_prefix("decode r2", "concurrency 10", 7);
  CHECK(a.size() == 9 + std::string("[decode r2 concurrency 10 #7] ").size());
  CHECK(a.ends_with(" [decode r2 concurrency 10 #7] "));
  CHECK(a.find_first_not_of("0123456789abcdef") == 8);
  CHECK(unique_prefix("", "warmup", 0).ends_with(" [warmup #0] "));
  // The same label gives the same prefix (runs are repeatable); neighbours differ from the first character on,
  // for most of them (a 1 in 16 chance each of the same first digit).
  CHECK(unique_prefix("decode r2", "concurrency 10", 7) == a);
  int same_first = 0;
  for (int i = 0; i < 64; ++i) {
    same_first += unique_prefix("decode r2", "concurrency 10", i).front() == a.front() ? 1 : 0;
  }
  CHECK(same_first < 16);
}

TEST_CASE("a level's metrics carry its counts, prompt and cached tokens, and the token source") {
  LevelResult level;
  for (int i = 0; i < 3; ++i) {
    RequestRecord r;
    r.index = i;
    r.prompt_tokens = 40;
    r.cached_tokens = i == 0 ? 8 : 0;
    r.token_source = i == 2 ? TokenSource::chunks : TokenSource::usage;
    level.records.push_back(r);
  }
  RequestRecord failed;
  failed.failure = FailureKind::stalled;
  level.records.push_back(failed);
  aggregate(level);
  auto m = specctl::report::level_metrics(level);
  CHECK(m["requests"] == 4);
  CHECK(m["completed"] == 3);
  CHECK(m["failed"] == 1);
  CHECK(m["prompt_tokens"] == 120);
  CHECK(m["cached_tokens"] == 8);
  CHECK(m["token_source"] == "mixed");

  SingleStreamResult single;
  single.level.records.resize(2);
  aggregate(single.level);
  auto s = specctl::report::single_stream_metrics(single);
  CHECK(s["requests"] == 2);
  CHECK(s["completed"] == 2);
  CHECK(s["failed"] == 0);
  CHECK(s["prompt_tokens"].is_null());
  CHECK(s["cached_tokens"].is_null());
  CHECK(s["token_source"] == "usage");
}
