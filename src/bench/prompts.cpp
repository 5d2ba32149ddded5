#include <specctl/bench/prompts.hpp>
#include <specctl/util/bounded_read.hpp>
#include <specctl/util/sha256.hpp>
#include <specctl/util/size.hpp>

#include <specctl/util/text.hpp>

#include <charconv>
#include <filesystem>
#include <fmt/format.h>
#include <fstream>
#include <nlohmann/json.hpp>

namespace specctl::bench {

namespace {

// Common English words that most tokenizers keep as one token each (with
// their leading space), so N words make about N prompt tokens.
constexpr std::string_view k_words[] = {
    "time",   "year",    "people",  "way",    "day",      "man",      "thing",    "woman",    "life",   "child",
    "world",  "school",  "state",   "family", "group",    "country",  "problem",  "hand",     "part",   "place",
    "case",   "week",    "company", "system", "program",  "question", "work",     "number",   "night",  "point",
    "home",   "water",   "room",    "mother", "area",     "money",    "story",    "fact",     "month",  "lot",
    "right",  "study",   "book",    "eye",    "job",      "word",     "business", "issue",    "side",   "kind",
    "head",   "house",   "service", "friend", "father",   "power",    "hour",     "game",     "line",   "end",
    "member", "law",     "car",     "city",   "name",     "team",     "minute",   "idea",     "kid",    "body",
    "back",   "parent",  "face",    "others", "level",    "office",   "door",     "health",   "person", "art",
    "war",    "history", "party",   "result", "change",   "morning",  "reason",   "research", "girl",   "guy",
    "moment", "air",     "teacher", "force",  "education"};
constexpr std::size_t k_word_count = std::size(k_words);

// A prompt longer than this (about a million tokens) is a mistake, not a prompt: no
// server's context takes it, and each request would hold it in memory again.
constexpr std::size_t k_max_prompt_bytes = 4 << 20;
constexpr std::uint64_t k_max_prompt_file_bytes = 256ull << 20;

std::expected<std::vector<std::string>, Error> read_file(const std::string& path) {
  if (auto ok = util::check_regular_file(path, k_max_prompt_file_bytes, "a prompt file"); !ok) {
    return std::unexpected(
        Error(fmt::format("{}: cannot read the prompt file: {}", path, ok.error().reason), ErrorKind::bad_input));
  }
  std::ifstream in(path);
  if (!in) {
    return std::unexpected(Error(fmt::format("{}: cannot read the prompt file", path), ErrorKind::bad_input));
  }
  const bool jsonl = path.ends_with(".jsonl");
  std::vector<std::string> prompts;
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    const std::string_view text = util::trim_view(line);
    if (text.empty()) {
      continue;
    }
    if (text.size() > k_max_prompt_bytes) {
      return std::unexpected(Error(fmt::format("{}:{}: a prompt of {}, more than the {} a prompt may be", path, number,
                                               util::format_bytes(text.size()), util::format_bytes(k_max_prompt_bytes)),
                                   ErrorKind::bad_input));
    }
    if (!jsonl) {
      prompts.emplace_back(text);
      continue;
    }
    const auto bad = [&](std::string_view why) {
      return std::unexpected(Error(fmt::format("{}:{}: {}", path, number, why), ErrorKind::bad_input));
    };
    nlohmann::json item = nlohmann::json::parse(text, nullptr, false);
    if (item.is_discarded()) {
      return bad("not a JSON value (a .jsonl prompt file holds one JSON string or object per line)");
    }
    if (item.is_string()) {
      prompts.push_back(item.get<std::string>());
      continue;
    }
    if (!item.is_object()) {
      return bad("expected a string or an object with \"prompt\"");
    }
    const char* key = item.contains("prompt") ? "prompt" : item.contains("text") ? "text" : nullptr;
    if (key == nullptr || !item[key].is_string()) {
      return bad("the object has no string \"prompt\" (or \"text\")");
    }
    prompts.push_back(item[key].get<std::string>());
  }
  if (in.bad()) {
    return std::unexpected(Error(fmt::format("{}: error while reading the prompt file", path), ErrorKind::bad_input));
  }
  if (prompts.empty()) {
    return std::unexpected(Error(fmt::format("{}: the prompt file holds no prompt", path), ErrorKind::bad_input));
  }
  return prompts;
}

} // namespace

std::string PromptSource::describe() const {
  switch (kind) {
  case PromptKind::seeds:
    return "seeds";
  case PromptKind::long_set:
    return "long";
  case PromptKind::file:
    return fmt::format("file {}", path);
  case PromptKind::synthetic:
    return fmt::format("synthetic {} tokens x {}", input_tokens, count);
  case PromptKind::inline_texts:
    return fmt::format("{} inline prompt{}", texts.size(), texts.size() == 1 ? "" : "s");
  case PromptKind::workload:
    return workload ? bench::describe(*workload) : "no workload";
  }
  return "seeds";
}

std::expected<PromptSource, Error> parse_prompt_source(std::string_view text) {
  PromptSource source;
  if (text == "seeds" || text == "builtin") {
    return source;
  }
  if (text == "long") {
    source.kind = PromptKind::long_set;
    return source;
  }
  if (text.starts_with("synthetic:")) {
    const std::string_view number = text.substr(std::string_view("synthetic:").size());
    int tokens = 0;
    const auto [end, ec] = std::from_chars(number.data(), number.data() + number.size(), tokens);
    if (ec != std::errc{} || end != number.data() + number.size() || tokens < 1 || tokens > 1'000'000) {
      return std::unexpected(
          Error(fmt::format("invalid prompts \"{}\": write synthetic:N with N input tokens from 1 to 1000000", text),
                ErrorKind::bad_input));
    }
    source.kind = PromptKind::synthetic;
    source.input_tokens = tokens;
    return source;
  }
  if (text.empty()) {
    return std::unexpected(Error("empty --prompts: give seeds, long, synthetic:N or a file", ErrorKind::bad_input));
  }
  source.kind = PromptKind::file;
  source.path = std::string(text);
  return source;
}

const std::vector<std::string>& seed_prompts() {
  // The first two are verbatim from the seeds; the seeds cut the third after
  // "Analyze the economic implications of artifi...", so its end is ours.
  static const std::vector<std::string> prompts = {
      "Explain the theory of general relativity in detail, covering spacetime curvature, the equivalence "
      "principle, and gravitational waves.",
      "Write a comprehensive guide to implementing a B-tree data structure in Rust, including insertion, "
      "deletion, and search operations.",
      "Analyze the economic implications of artificial intelligence on labor markets, productivity, and "
      "income inequality over the next two decades.",
  };
  return prompts;
}

const std::vector<std::string>& long_prompts() {
  static const std::vector<std::string> prompts = {
      "Explain the theory of general relativity in detail, covering spacetime curvature, the equivalence "
      "principle, and gravitational waves. Start from the problems of Newtonian gravity that Einstein set out to "
      "solve, derive the intuition behind the field equations without heavy notation, and finish with the "
      "experimental evidence: the perihelion of Mercury, light bending, gravitational redshift and LIGO.",
      "Write a comprehensive guide to implementing a B-tree data structure in Rust, including insertion, "
      "deletion, and search operations. Discuss node layout and cache behaviour, how ownership and borrowing "
      "shape the API, splitting and merging nodes, iterators over ranges, and a property-based test suite that "
      "checks the invariants after every operation.",
      "Analyze the economic implications of artificial intelligence on labor markets, productivity, and income "
      "inequality over the next two decades. Compare the historical record of earlier general-purpose "
      "technologies such as electricity and computing, consider which occupations are exposed, and weigh policy "
      "responses including retraining, taxation and changes to competition law.",
      "Describe how a modern optimizing compiler turns a C function into machine code. Walk through parsing, "
      "semantic analysis, lowering to an SSA intermediate representation, inlining, loop optimizations, "
      "register allocation and instruction scheduling, and show with a small example how each stage changes "
      "the code.",
      "Write a short story of about a thousand words about a lighthouse keeper on a remote island who receives "
      "a letter that was posted forty years earlier. Give the keeper a distinct voice, build the tension slowly, "
      "and end with a twist that recasts the opening paragraph.",
      "Explain how the TCP protocol provides reliable, ordered delivery over an unreliable network. Cover the "
      "three-way handshake, sequence numbers and acknowledgements, flow control with the receive window, "
      "congestion control from Reno to CUBIC and BBR, and what happens when a connection is closed.",
      "Compare the architectures of three relational database engines of your choice. Discuss storage layout, "
      "indexing, transaction isolation and multiversion concurrency control, the write-ahead log, query "
      "planning and replication, and say which workloads each one suits best and why.",
      "Give a detailed history of the development of the printing press and its effects on European society "
      "between 1450 and 1650, including literacy, the Reformation, the scientific revolution, and the economics "
      "of book production and censorship.",
      "Implement a thread-safe, bounded, multi-producer multi-consumer queue in C++. Explain the memory model "
      "guarantees you rely on, compare a mutex-and-condition-variable design with a lock-free ring buffer, and "
      "write benchmarks and stress tests that would catch a lost wake-up or a torn read.",
      "Explain the biology of the human immune system for an educated reader without medical training: innate "
      "and adaptive immunity, how T cells and B cells recognise antigens, how vaccines train the system, and "
      "what goes wrong in autoimmune disease and allergies.",
      "Write a detailed plan for migrating a large monolithic web application to a set of services without "
      "downtime. Cover how to choose service boundaries, data ownership and migration, the strangler pattern, "
      "observability, testing in production, and how to decide when to stop.",
      "Discuss the mathematics behind public-key cryptography: modular arithmetic, the RSA construction and why "
      "factoring is believed hard, Diffie-Hellman key exchange, elliptic curves, and what large quantum "
      "computers would change, with small worked examples.",
  };
  return prompts;
}

std::vector<std::string> synthetic_prompts(int input_tokens, int count) {
  std::vector<std::string> prompts;
  prompts.reserve(static_cast<std::size_t>(count));
  for (int p = 0; p < count; ++p) {
    // A different stride per prompt makes each word sequence differ from the start.
    std::uint64_t state = 0x9e3779b97f4a7c15ULL * static_cast<std::uint64_t>(p + 1);
    std::string text;
    text.reserve(static_cast<std::size_t>(input_tokens) * 7);
    for (int w = 0; w < input_tokens; ++w) {
      state ^= state >> 12;
      state ^= state << 25;
      state ^= state >> 27;
      const auto index = static_cast<std::size_t>((state * 0x2545f4914f6cdd1dULL) >> 33) % k_word_count;
      if (w > 0) {
        text += ' ';
      }
      text += k_words[index];
    }
    prompts.push_back(std::move(text));
  }
  return prompts;
}

std::expected<std::vector<std::string>, Error> load_prompts(const PromptSource& source) {
  switch (source.kind) {
  case PromptKind::seeds:
    return seed_prompts();
  case PromptKind::long_set:
    return long_prompts();
  case PromptKind::file:
    return read_file(source.path);
  case PromptKind::synthetic:
    if (source.input_tokens < 1 || source.count < 1) {
      return std::unexpected(Error("synthetic prompts need at least one token and one prompt", ErrorKind::bad_input));
    }
    return synthetic_prompts(source.input_tokens, source.count);
  case PromptKind::inline_texts:
    if (source.texts.empty()) {
      return std::unexpected(Error("the list of prompts is empty", ErrorKind::bad_input));
    }
    return source.texts;
  case PromptKind::workload:
    return std::unexpected(Error("a workload source has requests, not plain prompts", ErrorKind::bad_input));
  }
  return seed_prompts();
}

std::expected<Workload, Error> load_workload(const PromptSource& source) {
  if (source.kind == PromptKind::workload) {
    if (!source.workload) {
      return std::unexpected(Error("the benchmark has no workload", ErrorKind::bad_input));
    }
    return make_workload(*source.workload);
  }
  auto texts = load_prompts(source);
  if (!texts) {
    return std::unexpected(texts.error());
  }
  Workload workload;
  workload.requests = plain_requests(*texts);
  Provenance& p = workload.provenance;
  p.source = source.kind == PromptKind::long_set       ? "long"
             : source.kind == PromptKind::file         ? "file"
             : source.kind == PromptKind::synthetic    ? "synthetic"
             : source.kind == PromptKind::inline_texts ? "inline"
                                                       : "seeds";
  if (source.kind == PromptKind::file) {
    p.path = source.path;
    std::error_code ec;
    p.size = std::filesystem::file_size(source.path, ec);
    if (auto digest = util::sha256_file(source.path)) {
      p.sha256 = *digest;
    }
  }
  p.available = workload.requests.size();
  for (const auto& r : workload.requests) {
    p.ids.push_back(r.id);
  }
  return workload;
}

} // namespace specctl::bench
