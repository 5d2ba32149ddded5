#include <doctest/doctest.h>

#include "../support/temp_dir.hpp"

#include <specctl/bench/workload.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <unistd.h>

using namespace specctl::bench;
using specctl::test::TempDir;
namespace fs = std::filesystem;

namespace {

std::string repeat_words(const std::string& word, int count) {
  std::string text;
  for (int i = 0; i < count; ++i) {
    text += (i > 0 ? " " : "") + word;
  }
  return text;
}

nlohmann::json turn(const std::string& from, const nlohmann::json& value) {
  return {{"from", from}, {"value", value}};
}

nlohmann::json conversation(const std::string& id, const std::string& prompt, const std::string& answer) {
  nlohmann::json item = {{"conversations", {turn("human", prompt), turn("gpt", answer)}}};
  if (!id.empty()) {
    item["id"] = id;
  }
  return item;
}

const std::string k_prompt = "Explain how a bloom filter answers membership queries.";
const std::string k_answer = "It hashes each key several times and sets bits; a query checks those bits.";

// Five valid conversations and one of each reason to drop one.
nlohmann::json sharegpt_items() {
  nlohmann::json items = nlohmann::json::array();
  items.push_back(conversation("v0", k_prompt, k_answer));
  items.push_back(conversation("v1", "Write a haiku about autumn leaves falling.", k_answer));
  items.push_back(conversation("v2", "What is the capital city of Australia and why?", k_answer));
  items.push_back(conversation("short-prompt", "Hi", k_answer));
  items.push_back(conversation("short-output", k_prompt, "Ok."));
  items.push_back(conversation("long-prompt", repeat_words("word", 1100), k_answer));
  items.push_back(conversation("long-total", repeat_words("word", 1000), repeat_words("word", 1100)));
  items.push_back({{"id", "one-turn"}, {"conversations", {turn("human", k_prompt)}}});
  items.push_back("not an object");
  items.push_back({{"id", "no-conversations"}});
  items.push_back({{"id", "bad-turn"}, {"conversations", {turn("human", 5), turn("gpt", k_answer)}}});
  items.push_back(conversation("", "Summarise the plot of Hamlet in three sentences.", k_answer));
  nlohmann::json four_turns = conversation("v12", "List three uses of a hash map in practice.", k_answer);
  four_turns["conversations"].push_back(turn("human", "And a fourth?"));
  four_turns["conversations"].push_back(turn("gpt", 42));
  items.push_back(four_turns);
  return items;
}

std::vector<std::string> sorted(std::vector<std::string> items) {
  std::sort(items.begin(), items.end());
  return items;
}

std::string message_of(const std::expected<Workload, specctl::Error>& result) {
  REQUIRE_FALSE(result.has_value());
  return result.error().what();
}

std::vector<std::string> words_of(const std::string& text) {
  std::istringstream in(text);
  std::vector<std::string> words;
  for (std::string word; in >> word;) {
    words.push_back(word);
  }
  return words;
}

} // namespace

TEST_CASE("bench::estimate_tokens counts word pieces, digit groups and punctuation") {
  CHECK(estimate_tokens("") == 0);
  CHECK(estimate_tokens("   \n\t") == 0);
  CHECK(estimate_tokens("hello world") == 2);
  CHECK(estimate_tokens("internationalization") == 4);
  CHECK(estimate_tokens("12345") == 2);
  CHECK(estimate_tokens("a, b.") == 4);
  CHECK(estimate_tokens("\xe6\x97\xa5\xe6\x9c\xac") == 2);
  // Explain(2) how a bloom filter answers(2) membership(2) queries(2) .(1)
  CHECK(estimate_tokens(k_prompt) == 13);
}

TEST_CASE("bench::draw_below and shuffle_portably are pinned, so every standard library draws the same") {
  std::mt19937_64 rng(42);
  std::vector<std::uint64_t> draws;
  for (int i = 0; i < 5; ++i) {
    draws.push_back(draw_below(rng, 10));
  }
  std::mt19937_64 again(42);
  for (const std::uint64_t draw : draws) {
    CHECK(draw < 10);
    CHECK(draw_below(again, 10) == draw);
  }
  // Pinned by an independent Python model of std::mt19937_64 (whose 10,000th output
  // the C++ standard fixes), this draw and this shuffle.
  CHECK(draws == std::vector<std::uint64_t>{6, 4, 0, 2, 1});
  std::vector<int> items = {0, 1, 2, 3, 4, 5, 6, 7};
  std::mt19937_64 shuffler(7);
  shuffle_portably(items, shuffler);
  CHECK(items == std::vector<int>{2, 3, 5, 6, 1, 0, 4, 7});
}

TEST_CASE("bench::make_workload(ShareGptSpec) keeps vLLM's valid conversations and counts every drop") {
  const TempDir dir("workload-sharegpt");
  const std::string file = dir.write("sg.json", sharegpt_items().dump(1));

  SUBCASE("every valid conversation, each drop counted once") {
    const auto workload = make_workload(ShareGptSpec{.file = file});
    REQUIRE(workload.has_value());
    CHECK(sorted(workload->provenance.ids) == std::vector<std::string>{"sharegpt:11", "v0", "v1", "v12", "v2"});
    const auto& dropped = workload->provenance.filters["dropped"];
    for (const char* reason : {"not_an_object", "no_conversations", "turn_without_text", "fewer_than_two_turns",
                               "prompt_too_short", "output_too_short", "prompt_too_long", "total_too_long"}) {
      CAPTURE(reason);
      CHECK(dropped[reason] == 1);
    }
    CHECK(workload->provenance.filters["valid"] == 5);
    CHECK(workload->provenance.available == 13);
    const auto v0 = std::find_if(workload->requests.begin(), workload->requests.end(),
                                 [](const WorkloadRequest& request) { return request.id == "v0"; });
    REQUIRE(v0 != workload->requests.end());
    CHECK(v0->prompt == k_prompt);
    CHECK(v0->output_tokens == estimate_tokens(k_answer));
    CHECK(v0->input_tokens == 0);
    CHECK(v0->messages.empty());
    REQUIRE(workload->notes.size() == 1);
    CHECK(workload->notes[0] == file + ": item 8 is not an object (3 malformed in all, dropped)");
    CHECK(describe(*workload) == "sharegpt " + file + ": 5 of 13 conversations (seed 0)");
  }
  SUBCASE("num_prompts draws with the seed, the same every time") {
    const auto first = make_workload(ShareGptSpec{.file = file, .num_prompts = 3, .seed = 0});
    const auto again = make_workload(ShareGptSpec{.file = file, .num_prompts = 3, .seed = 0});
    const auto other = make_workload(ShareGptSpec{.file = file, .num_prompts = 3, .seed = 3});
    REQUIRE(first.has_value());
    REQUIRE(again.has_value());
    REQUIRE(other.has_value());
    // The same independent Python model as the draws' test.
    CHECK(first->provenance.ids == std::vector<std::string>{"v2", "v0", "v1"});
    CHECK(other->provenance.ids == std::vector<std::string>{"v0", "v12", "v1"});
    CHECK(again->provenance.ids == first->provenance.ids);
    CHECK(again->requests.size() == 3);
    for (std::size_t i = 0; i < 3; ++i) {
      CHECK(again->requests[i].prompt == first->requests[i].prompt);
    }
  }
  SUBCASE("fixed_output replaces the second turn's length and skips its minimum, as vLLM's --sharegpt-output-len") {
    const auto workload = make_workload(ShareGptSpec{.file = file, .fixed_output = 10});
    REQUIRE(workload.has_value());
    // short-output is now valid, and long-total is 1,000 + 10 tokens.
    CHECK(sorted(workload->provenance.ids) ==
          std::vector<std::string>{"long-total", "sharegpt:11", "short-output", "v0", "v1", "v12", "v2"});
    for (const WorkloadRequest& request : workload->requests) {
      CHECK(request.output_tokens == 10);
    }
  }
  SUBCASE("provenance names the file by size and SHA-256") {
    const auto workload = make_workload(ShareGptSpec{.file = file, .num_prompts = 2, .seed = 9});
    REQUIRE(workload.has_value());
    const nlohmann::ordered_json provenance = workload->provenance.to_json();
    std::vector<std::string> keys;
    for (const auto& item : provenance.items()) {
      keys.push_back(item.key());
    }
    CHECK(keys == std::vector<std::string>{"source", "path", "size", "sha256", "seed", "available", "filters", "ids"});
    CHECK(provenance["source"] == "sharegpt");
    CHECK(provenance["size"] == fs::file_size(file));
    CHECK(provenance["sha256"].get<std::string>().size() == 64);
    CHECK(provenance["seed"] == 9);
    CHECK(provenance["ids"].size() == 2);
  }
  SUBCASE("errors name the file") {
    CHECK(message_of(make_workload(ShareGptSpec{.file = file + ".missing"})) ==
          file + ".missing: no such ShareGPT file");
    const std::string not_json = dir.write("bad.json", "[\n{\"conversations\": [}\n]");
    const std::string text = message_of(make_workload(ShareGptSpec{.file = not_json}));
    CHECK(text.starts_with(not_json + ": not JSON: parse error at line 2, column "));
    const std::string object = dir.write("object.json", "{\"conversations\": []}");
    CHECK(message_of(make_workload(ShareGptSpec{.file = object})) ==
          object + ": not a ShareGPT file: expected a JSON list of conversations, found object");
    nlohmann::json few = nlohmann::json::array();
    few.push_back(sharegpt_items()[3]);
    few.push_back(sharegpt_items()[4]);
    few.push_back(sharegpt_items()[8]);
    const std::string empty = dir.write("empty.json", few.dump());
    CHECK(message_of(make_workload(ShareGptSpec{.file = empty})) ==
          empty + ": 0 of 3 conversations left after filtering: 2 too short, 1 malformed");
    CHECK(message_of(make_workload(ShareGptSpec{.file = file, .num_prompts = 6})) ==
          file + ": 5 of 13 conversations left after filtering (2 too short, 2 too long, 1 with fewer than 2 turns, "
                 "3 malformed), fewer than num_prompts 6");
    CHECK(make_workload(ShareGptSpec{.file = file}).has_value());
  }
}

TEST_CASE("bench::make_workload(JsonlSpec) reads prompts, chat messages and per-request output lengths") {
  const TempDir dir("workload-jsonl");
  const std::string file =
      dir.write("requests.jsonl",
                "{\"prompt\": \"What is 2+2?\", \"max_tokens\": 16, \"category\": \"math\", \"id\": \"q1\"}\n"
                "\n"
                "{\"messages\": [{\"role\": \"system\", \"content\": \"Be brief.\"}, {\"role\": \"user\", \"content\": "
                "\"Name a colour.\"}], \"max_tokens\": 8, \"category\": \"chat\", \"id\": \"q2\"}\n"
                "{\"prompt\": \"Tell a joke.\", \"id\": 7}\n");
  JsonlSpec spec{.file = file, .output_field = "max_tokens", .category_field = "category", .id_field = "id"};

  SUBCASE("as written") {
    spec.order = JsonlSpec::Order::as_written;
    const auto workload = make_workload(spec);
    REQUIRE(workload.has_value());
    REQUIRE(workload->requests.size() == 3);
    const auto& requests = workload->requests;
    CHECK(requests[0].id == "q1");
    CHECK(requests[0].prompt == "What is 2+2?");
    CHECK(requests[0].output_tokens == 16);
    CHECK(requests[0].category == "math");
    CHECK(requests[1].id == "q2");
    CHECK(requests[1].prompt.empty());
    REQUIRE(requests[1].messages.size() == 2);
    CHECK(requests[1].messages[0].role == "system");
    CHECK(requests[1].messages[1].content == "Name a colour.");
    CHECK(requests[1].output_tokens == 8);
    CHECK(requests[2].id == "7");
    CHECK(requests[2].output_tokens == 0);
    CHECK(requests[2].category.empty());
    REQUIRE(workload->notes.size() == 1);
    CHECK(workload->notes[0] == file + ": 1 of 3 lines have no \"max_tokens\": they use the benchmark's max_tokens");
    CHECK(describe(*workload) == "jsonl " + file + ": 3 of 3 requests (seed 0)");
  }
  SUBCASE("shuffled with the seed, num_prompts of them, the same every time") {
    spec.num_prompts = 2;
    spec.seed = 5;
    const auto first = make_workload(spec);
    const auto again = make_workload(spec);
    REQUIRE(first.has_value());
    REQUIRE(again.has_value());
    CHECK(first->requests.size() == 2);
    CHECK(first->provenance.ids == again->provenance.ids);
    CHECK(first->provenance.available == 3);
  }
  SUBCASE("ids default to the line") {
    const auto workload = make_workload(JsonlSpec{.file = file, .order = JsonlSpec::Order::as_written});
    REQUIRE(workload.has_value());
    CHECK(workload->provenance.ids == std::vector<std::string>{"jsonl:1", "jsonl:3", "jsonl:4"});
    CHECK(workload->requests[0].output_tokens == 0);
  }
  SUBCASE("errors name file:line") {
    const std::string not_json = dir.write("a.jsonl", "{\"prompt\": \"ok\"}\n{oops\n");
    CHECK(message_of(make_workload(JsonlSpec{.file = not_json})) ==
          not_json + ":2: not JSON (a JSONL file holds one JSON object per line)");
    const std::string bad_output = dir.write("b.jsonl", "{\"prompt\": \"ok\", \"max_tokens\": \"lots\"}\n");
    CHECK(message_of(make_workload(JsonlSpec{.file = bad_output, .output_field = "max_tokens"})) ==
          bad_output + ":1: \"max_tokens\" must be a positive integer, not \"lots\"");
    const std::string no_prompt = dir.write("c.jsonl", "{\"text\": \"ok\"}\n");
    CHECK(message_of(make_workload(JsonlSpec{.file = no_prompt})) ==
          no_prompt + ":1: no string \"prompt\" and no \"messages\" list");
    const std::string bad_message = dir.write("d.jsonl", "{\"messages\": [{\"role\": \"user\"}]}\n");
    CHECK(message_of(make_workload(JsonlSpec{.file = bad_message})) ==
          bad_message + ":1: \"messages\" item 0 needs a string \"role\" and a string \"content\"");
    const std::string empty = dir.write("e.jsonl", "\n\n");
    CHECK(message_of(make_workload(JsonlSpec{.file = empty})) == empty + ": the JSONL file holds no request");
    CHECK(message_of(make_workload(JsonlSpec{.file = file, .num_prompts = 4})) ==
          file + ": 3 requests in the file, fewer than num_prompts 4");
    CHECK(message_of(make_workload(JsonlSpec{.file = file + "x"})) == file + "x: no such JSONL file");
  }
}

TEST_CASE("bench::make_workload(RandomSpec) draws vLLM's lengths from words of one token each") {
  const RandomSpec spec{.input_tokens = 100, .output_tokens = 50, .range_ratio = 0.5, .num_prompts = 50, .seed = 1};
  const auto workload = make_workload(spec);
  REQUIRE(workload.has_value());
  REQUIRE(workload->requests.size() == 50);
  std::set<std::string> first_words;
  std::set<int> input_lengths;
  for (const WorkloadRequest& request : workload->requests) {
    CAPTURE(request.id);
    CHECK(request.input_tokens >= 50);
    CHECK(request.input_tokens <= 150);
    CHECK(request.output_tokens >= 25);
    CHECK(request.output_tokens <= 75);
    CHECK(estimate_tokens(request.prompt) == request.input_tokens);
    CHECK(static_cast<int>(words_of(request.prompt).size()) == request.input_tokens);
    CHECK(request.shared_bytes == 0);
    first_words.insert(words_of(request.prompt).front());
    input_lengths.insert(request.input_tokens);
  }
  CHECK(first_words.size() == 50);
  CHECK(input_lengths.size() > 10);
  CHECK(workload->provenance.filters["input_range"] == nlohmann::ordered_json({50, 150}));
  CHECK(describe(WorkloadSpec(spec)) == "random: 50 prompts of 100±50% tokens in, 50±50% out (seed 1)");
  CHECK(describe(*workload) == describe(WorkloadSpec(spec)));

  SUBCASE("the same seed gives the same bytes, another seed other bytes") {
    const auto again = make_workload(spec);
    RandomSpec other_spec = spec;
    other_spec.seed = 2;
    const auto other = make_workload(other_spec);
    REQUIRE(again.has_value());
    REQUIRE(other.has_value());
    std::string all;
    std::string all_again;
    std::string all_other;
    for (std::size_t i = 0; i < 50; ++i) {
      all += workload->requests[i].prompt + std::to_string(workload->requests[i].output_tokens);
      all_again += again->requests[i].prompt + std::to_string(again->requests[i].output_tokens);
      all_other += other->requests[i].prompt + std::to_string(other->requests[i].output_tokens);
    }
    CHECK(all == all_again);
    CHECK(all != all_other);
  }
  SUBCASE("pinned text: the same on every standard library") {
    // The same independent Python model as the draws' test, with this file's vocabulary.
    const auto pinned = make_workload(RandomSpec{.input_tokens = 3, .output_tokens = 5, .num_prompts = 2, .seed = 42});
    REQUIRE(pinned.has_value());
    CHECK(pinned->requests[0].prompt == "tea museum truck");
    CHECK(pinned->requests[1].prompt == "world smile south");
    CHECK(pinned->requests[1].output_tokens == 5);
  }
  SUBCASE("a range ratio of 0 gives the exact lengths") {
    const auto exact = make_workload(RandomSpec{.input_tokens = 64, .output_tokens = 32, .num_prompts = 5, .seed = 3});
    REQUIRE(exact.has_value());
    for (const WorkloadRequest& request : exact->requests) {
      CHECK(request.input_tokens == 64);
      CHECK(estimate_tokens(request.prompt) == 64);
      CHECK(request.output_tokens == 32);
    }
  }
  SUBCASE("a shared prefix, then a different beginning for each prompt") {
    const auto prefixed = make_workload(
        RandomSpec{.input_tokens = 30, .output_tokens = 8, .prefix_tokens = 20, .num_prompts = 10, .seed = 4});
    REQUIRE(prefixed.has_value());
    const auto& requests = prefixed->requests;
    const std::string prefix = requests[0].prompt.substr(0, requests[0].shared_bytes);
    CHECK(static_cast<int>(words_of(prefix).size()) == 20);
    std::set<std::string> after_prefix;
    for (const WorkloadRequest& request : requests) {
      CHECK(request.input_tokens == 50);
      CHECK(estimate_tokens(request.prompt) == 50);
      CHECK(request.shared_bytes == prefix.size());
      CHECK(request.prompt.starts_with(prefix));
      after_prefix.insert(words_of(request.prompt)[20]);
    }
    CHECK(after_prefix.size() == requests.size());
    CHECK(describe(*prefixed) == "random: 10 prompts of 30 tokens in, 8 out, 20-token shared prefix (seed 4)");
  }
  SUBCASE("bad specs") {
    CHECK(message_of(make_workload(RandomSpec{.range_ratio = 1.0})) == "random: range_ratio must be in [0, 1), not 1");
    CHECK(message_of(make_workload(RandomSpec{.num_prompts = 0})) ==
          "random: num_prompts must be in [1, 1048576], not 0");
    CHECK(message_of(make_workload(RandomSpec{.input_tokens = 1, .range_ratio = 0.5})) ==
          "random: input_tokens 1 with range_ratio 0.5 can draw an empty prompt: raise input_tokens or "
          "prefix_tokens, or lower range_ratio");
  }
}

TEST_CASE("bench::make_workload(SharedPrefixSpec) groups share exactly their system prompt") {
  const SharedPrefixSpec spec{
      .groups = 3, .per_group = 4, .system_tokens = 50, .question_tokens = 10, .output_tokens = 20, .seed = 6};
  const auto workload = make_workload(spec);
  REQUIRE(workload.has_value());
  REQUIRE(workload->requests.size() == 12);
  std::map<int, std::vector<const WorkloadRequest*>> groups;
  for (const WorkloadRequest& request : workload->requests) {
    CHECK(request.input_tokens == 60);
    CHECK(estimate_tokens(request.prompt) == 60);
    CHECK(request.output_tokens == 20);
    groups[request.group].push_back(&request);
  }
  REQUIRE(groups.size() == 3);
  std::set<std::string> system_prompts;
  std::set<std::string> question_starts;
  for (const auto& [group, members] : groups) {
    CAPTURE(group);
    REQUIRE(members.size() == 4);
    const std::string system = members[0]->prompt.substr(0, members[0]->shared_bytes);
    CHECK(system.ends_with("\n\n"));
    CHECK(static_cast<int>(words_of(system).size()) == 50);
    system_prompts.insert(words_of(system).front());
    for (const WorkloadRequest* member : members) {
      CHECK(member->shared_bytes == system.size());
      CHECK(member->prompt.starts_with(system));
      question_starts.insert(words_of(member->prompt.substr(system.size())).front());
    }
  }
  // Different groups begin differently, and so does every question after its system prompt.
  CHECK(system_prompts.size() == 3);
  CHECK(question_starts.size() == 12);

  SUBCASE("shuffled as SGLang sends them, or grouped") {
    SharedPrefixSpec grouped = spec;
    grouped.order = SharedPrefixSpec::Order::grouped;
    const auto in_order = make_workload(grouped);
    REQUIRE(in_order.has_value());
    CHECK(in_order->requests[0].id == "gsp:0:0");
    CHECK(in_order->requests[11].id == "gsp:2:3");
    CHECK(workload->provenance.ids != in_order->provenance.ids);
    CHECK(sorted(workload->provenance.ids) == sorted(in_order->provenance.ids));
  }
  SUBCASE("reproducible") {
    const auto again = make_workload(spec);
    REQUIRE(again.has_value());
    for (std::size_t i = 0; i < 12; ++i) {
      CHECK(again->requests[i].prompt == workload->requests[i].prompt);
    }
  }
  CHECK(describe(WorkloadSpec(spec)) ==
        "shared_prefix: 3 groups x 4 prompts, 50-token system prompt + 10-token question, 20 out (seed 6)");
  CHECK(describe(*workload) == describe(WorkloadSpec(spec)));
}

TEST_CASE("bench::make_workload(SpecDecSpec) is 8 categories of 10 distinct prompts") {
  const auto workload = make_workload(SpecDecSpec{});
  REQUIRE(workload.has_value());
  REQUIRE(workload->requests.size() == 80);
  CHECK(specdec_categories() == std::vector<std::string>{"conversation", "code", "math", "summarisation", "translation",
                                                         "reasoning", "extraction", "writing"});
  std::map<std::string, int> per_category;
  std::set<std::string> texts;
  std::set<std::string> ids;
  for (const WorkloadRequest& request : workload->requests) {
    ++per_category[request.category];
    texts.insert(request.prompt);
    ids.insert(request.id);
    CHECK(request.id.starts_with("specdec:" + request.category + ":"));
    CHECK(request.prompt.size() > 40);
    CHECK(request.prompt.size() < 800);
  }
  CHECK(per_category.size() == 8);
  for (const auto& [category, count] : per_category) {
    CAPTURE(category);
    CHECK(count == 10);
  }
  CHECK(texts.size() == 80);
  CHECK(ids.size() == 80);
  // The categories take turns.
  std::set<std::string> first_eight;
  for (std::size_t i = 0; i < 8; ++i) {
    first_eight.insert(workload->requests[i].category);
  }
  CHECK(first_eight.size() == 8);
  CHECK(describe(*workload) == "specdec: 80 of 80 prompts (seed 0)");

  SUBCASE("a subset of categories, num_prompts of them") {
    const auto subset = make_workload(SpecDecSpec{.categories = {"code", "math"}, .num_prompts = 5, .seed = 2});
    REQUIRE(subset.has_value());
    REQUIRE(subset->requests.size() == 5);
    const std::vector<std::string> expected = {"code", "math", "code", "math", "code"};
    for (std::size_t i = 0; i < 5; ++i) {
      CHECK(subset->requests[i].category == expected[i]);
    }
    const auto other_seed = make_workload(SpecDecSpec{.categories = {"code", "math"}, .num_prompts = 5, .seed = 3});
    REQUIRE(other_seed.has_value());
    CHECK(subset->provenance.ids != other_seed->provenance.ids);
  }
  SUBCASE("bad specs") {
    CHECK(message_of(make_workload(SpecDecSpec{.categories = {"maths"}})) ==
          "specdec: unknown category \"maths\" (did you mean \"math\"?) (the categories: conversation, code, math, "
          "summarisation, translation, reasoning, extraction, writing)");
    CHECK(message_of(make_workload(SpecDecSpec{.categories = {"code"}, .num_prompts = 11})) ==
          "specdec: num_prompts must be in [1, 10] for 1 categories, not 11");
  }
}

namespace {

int count_words(const std::string& text) {
  return static_cast<int>(words_of(text).size());
}

} // namespace

TEST_CASE("bench::calibrate reaches the target within ±1 token against the server's count") {
  auto made = make_workload(RandomSpec{.input_tokens = 100, .output_tokens = 8, .num_prompts = 1, .seed = 8});
  REQUIRE(made.has_value());
  WorkloadRequest request = made->requests[0];
  int calls_made = 0;

  SUBCASE("a counter of whitespace words: extending") {
    const TokenCounter counter = [&](const std::string& text) -> std::expected<int, specctl::Error> {
      ++calls_made;
      return count_words(text);
    };
    const auto calls = calibrate(request, 120, counter);
    REQUIRE(calls.has_value());
    CHECK(*calls == calls_made);
    CHECK(*calls <= k_calibration_calls);
    CHECK(std::abs(count_words(request.prompt) - 120) <= 1);
    CHECK(request.input_tokens == 120);
    // Reproducible: the words added come from a generator seeded by the request's id.
    WorkloadRequest again = made->requests[0];
    REQUIRE(calibrate(again, 120, counter).has_value());
    CHECK(again.prompt == request.prompt);
  }
  SUBCASE("a counter of 1.3 tokens a word: trimming") {
    const TokenCounter counter = [&](const std::string& text) -> std::expected<int, specctl::Error> {
      ++calls_made;
      return static_cast<int>(std::lround(count_words(text) * 1.3));
    };
    const auto calls = calibrate(request, 100, counter);
    REQUIRE(calls.has_value());
    CHECK(*calls <= k_calibration_calls);
    CHECK(std::abs(std::lround(count_words(request.prompt) * 1.3) - 100) <= 1);
    CHECK(count_words(request.prompt) < 100);
  }
  SUBCASE("already within tolerance: one count") {
    const TokenCounter counter = [](const std::string& text) -> std::expected<int, specctl::Error> {
      return count_words(text) + 1;
    };
    CHECK(calibrate(request, 100, counter) == 1);
  }
  SUBCASE("a counter that fails: its error passed on") {
    const TokenCounter counter = [](const std::string&) -> std::expected<int, specctl::Error> {
      return std::unexpected(specctl::Error("127.0.0.1:8000: /tokenize answered 404", specctl::ErrorKind::failed));
    };
    const auto calls = calibrate(request, 100, counter);
    REQUIRE_FALSE(calls.has_value());
    CHECK(std::string(calls.error().what()) == "127.0.0.1:8000: /tokenize answered 404");
  }
  SUBCASE("a counter that cannot land within the tolerance: an error naming the target and last count") {
    // Two tokens a word can never make 101 exactly.
    const TokenCounter counter = [&](const std::string& text) -> std::expected<int, specctl::Error> {
      ++calls_made;
      return 2 * count_words(text);
    };
    const auto calls = calibrate(request, 101, counter, 0);
    REQUIRE_FALSE(calls.has_value());
    const std::string message = calls.error().what();
    CHECK(message.starts_with("request \"random:0\": calibration to 101 tokens (±0) did not converge: the last count "
                              "was "));
    CHECK(message.ends_with(" after 8 counts"));
    CHECK(calls_made == k_calibration_calls);
  }
  SUBCASE("a shared prefix is never changed") {
    auto grouped = make_workload(SharedPrefixSpec{
        .groups = 1, .per_group = 2, .system_tokens = 40, .question_tokens = 20, .output_tokens = 4, .seed = 1});
    REQUIRE(grouped.has_value());
    WorkloadRequest member = grouped->requests[0];
    const std::string system = member.prompt.substr(0, member.shared_bytes);
    const TokenCounter counter = [](const std::string& text) -> std::expected<int, specctl::Error> {
      return static_cast<int>(std::lround(count_words(text) * 1.3));
    };
    REQUIRE(calibrate(member, 60, counter).has_value());
    CHECK(member.prompt.starts_with(system));
    CHECK(std::abs(std::lround(count_words(member.prompt) * 1.3) - 60) <= 1);
    // Fewer tokens than the system prompt alone cannot be reached without changing it.
    WorkloadRequest other = grouped->requests[1];
    CHECK_FALSE(calibrate(other, 10, counter).has_value());
    CHECK(other.prompt.starts_with(system));
  }
  SUBCASE("chat requests and a target below 1 are refused") {
    WorkloadRequest chat;
    chat.id = "q2";
    chat.messages = {{"user", "Name a colour."}};
    const TokenCounter counter = [](const std::string& text) -> std::expected<int, specctl::Error> {
      return count_words(text);
    };
    CHECK_FALSE(calibrate(chat, 10, counter).has_value());
    CHECK_FALSE(calibrate(request, 0, counter).has_value());
  }
}
