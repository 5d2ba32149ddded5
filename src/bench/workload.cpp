#include <specctl/bench/workload.hpp>

#include "workload_text.hpp"

#include <specctl/util/hash.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

namespace specctl::bench {

namespace workload_detail {

namespace {

constexpr std::string_view k_vocabulary[] = {
    "time",   "year",   "people", "way",    "day",    "man",    "thing",  "woman",  "life",   "child",  "world",
    "school", "state",  "family", "group",  "nation", "plenty", "hand",   "part",   "place",  "case",   "week",
    "system", "work",   "number", "night",  "point",  "home",   "water",  "room",   "mother", "area",   "money",
    "story",  "fact",   "month",  "lot",    "right",  "study",  "book",   "eye",    "job",    "word",   "issue",
    "side",   "kind",   "head",   "house",  "friend", "father", "power",  "hour",   "game",   "line",   "end",
    "member", "law",    "car",    "city",   "name",   "team",   "minute", "idea",   "kid",    "body",   "back",
    "parent", "face",   "level",  "office", "door",   "health", "person", "art",    "war",    "party",  "result",
    "change", "reason", "girl",   "guy",    "moment", "air",    "force",  "river",  "tree",   "stone",  "bird",
    "fish",   "horse",  "garden", "road",   "bridge", "window", "table",  "chair",  "paper",  "letter", "music",
    "song",   "voice",  "light",  "color",  "green",  "blue",   "black",  "white",  "red",    "yellow", "summer",
    "winter", "spring", "autumn", "dawn",   "dusk",   "field",  "farm",   "market", "street", "island", "ocean",
    "forest", "valley", "hill",   "lake",   "rain",   "snow",   "wind",   "cloud",  "sun",    "moon",   "star",
    "north",  "south",  "east",   "west",   "bread",  "milk",   "cheese", "apple",  "orange", "butter", "sugar",
    "salt",   "coffee", "tea",    "dinner", "lunch",  "doctor", "nurse",  "driver", "farmer", "artist", "writer",
    "reader", "player", "singer", "worker", "leader", "king",   "queen",  "prince", "castle", "church", "temple",
    "museum", "garage", "porch",  "bed",    "floor",  "wall",   "roof",   "glass",  "metal",  "wood",   "gold",
    "silver", "iron",   "copper", "cotton", "silk",   "wool",   "engine", "wheel",  "train",  "plane",  "ship",
    "boat",   "truck",  "bike",   "ticket", "travel", "visit",  "plan",   "answer", "simple", "strong", "quiet",
    "bright", "warm",   "cold",   "early",  "late",   "small",  "large",  "happy",  "young",  "old",    "new",
    "long",   "short",  "open",   "close",  "begin",  "finish", "build",  "carry",  "follow", "gather", "listen",
    "speak",  "write",  "read",   "learn",  "teach",  "share",  "spend",  "save",   "offer",  "cover",  "enter",
    "watch",  "sleep",  "dream",  "laugh",  "smile",  "rest",   "walk",   "run",    "swim",   "climb",  "jump",
    "dance",  "sing",   "paint",  "cook",   "clean",  "wash",   "fix",    "grow",   "plant",  "hold",   "move",
    "stay",   "wait",   "frost",
};

} // namespace

std::span<const std::string_view> vocabulary() {
  return k_vocabulary;
}

std::string random_words(std::mt19937_64& rng, int count) {
  std::string text;
  for (int i = 0; i < count; ++i) {
    if (i > 0) {
      text += ' ';
    }
    text += k_vocabulary[draw_below(rng, std::size(k_vocabulary))];
  }
  return text;
}

DistinctStarts::DistinctStarts(std::mt19937_64& rng, std::size_t count) {
  m_permutation.resize(std::size(k_vocabulary));
  for (std::size_t i = 0; i < m_permutation.size(); ++i) {
    m_permutation[i] = i;
  }
  shuffle_portably(m_permutation, rng);
  for (std::size_t rest = count > 0 ? (count - 1) / m_permutation.size() : 0; rest > 0; rest /= m_permutation.size()) {
    ++m_digits;
  }
}

std::string DistinctStarts::start(std::size_t index, int limit) const {
  std::string text;
  const int words = std::min(limit, m_digits);
  for (int digit = 0; digit < words; ++digit) {
    if (digit > 0) {
      text += ' ';
    }
    text += k_vocabulary[m_permutation[index % m_permutation.size()]];
    index /= m_permutation.size();
  }
  return text;
}

std::string distinct_text(const DistinctStarts& starts, std::size_t index, int words, std::mt19937_64& rng) {
  std::string text = starts.start(index, words);
  const int rest = words - std::min(words, starts.words());
  if (rest > 0) {
    if (!text.empty()) {
      text += ' ';
    }
    text += random_words(rng, rest);
  }
  return text;
}

std::string with_commas(std::uint64_t value) {
  std::string digits = std::to_string(value);
  for (std::size_t at = digits.size(); at > 3; at -= 3) {
    digits.insert(at - 3, 1, ',');
  }
  return digits;
}

Workload workload_of(std::string source, std::uint64_t seed, std::size_t available,
                     std::vector<WorkloadRequest> requests) {
  Workload workload;
  Provenance& provenance = workload.provenance;
  provenance.source = std::move(source);
  provenance.seed = seed;
  provenance.available = available;
  for (const WorkloadRequest& request : requests) {
    provenance.ids.push_back(request.id);
  }
  workload.requests = std::move(requests);
  return workload;
}

} // namespace workload_detail

using workload_detail::bad_input;
using workload_detail::with_commas;

namespace {

enum class Piece { none, letters, digits, other_bytes };

Piece piece_of(unsigned char c) {
  if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) {
    return Piece::letters;
  }
  if (c >= '0' && c <= '9') {
    return Piece::digits;
  }
  if (c >= 0x80) {
    return Piece::other_bytes;
  }
  return Piece::none;
}

int tokens_of_run(Piece piece, int length) {
  switch (piece) {
  case Piece::letters:
    return (length + 5) / 6;
  case Piece::digits:
  case Piece::other_bytes:
    return (length + 2) / 3;
  case Piece::none:
    break;
  }
  return 0;
}

// The byte offsets where each whitespace-separated word of `text` begins, from `from` on.
std::vector<std::size_t> word_starts(std::string_view text, std::size_t from) {
  std::vector<std::size_t> starts;
  bool in_word = false;
  for (std::size_t i = from; i < text.size(); ++i) {
    const bool space = text[i] == ' ' || text[i] == '\n' || text[i] == '\t' || text[i] == '\r';
    if (!space && !in_word) {
      starts.push_back(i);
    }
    in_word = !space;
  }
  return starts;
}

// Sets the editable part of the prompt (after `shared`) to `words` words: the first
// ones it has, then words from the vocabulary.
void resize_words(std::string& prompt, std::size_t shared, int words, std::mt19937_64& rng) {
  const std::vector<std::size_t> starts = word_starts(prompt, shared);
  const auto have = static_cast<int>(starts.size());
  if (words < have) {
    std::size_t end = starts[static_cast<std::size_t>(words)];
    while (end > shared && (prompt[end - 1] == ' ' || prompt[end - 1] == '\n' || prompt[end - 1] == '\t')) {
      --end;
    }
    prompt.resize(end);
    return;
  }
  for (int i = have; i < words; ++i) {
    if (!prompt.empty() && prompt.back() != ' ' && prompt.back() != '\n') {
      prompt += ' ';
    }
    prompt += workload_detail::random_words(rng, 1);
  }
}

} // namespace

int estimate_tokens(std::string_view text) {
  int tokens = 0;
  Piece run = Piece::none;
  int length = 0;
  for (const char ch : text) {
    const auto c = static_cast<unsigned char>(ch);
    const Piece piece = piece_of(c);
    if (piece != run) {
      tokens += tokens_of_run(run, length);
      run = piece;
      length = 0;
    }
    if (piece == Piece::none) {
      if (c > ' ' && c != 0x7f) {
        ++tokens;
      }
      continue;
    }
    ++length;
  }
  return tokens + tokens_of_run(run, length);
}

std::uint64_t draw_below(std::mt19937_64& rng, std::uint64_t bound) {
  // The largest multiple of bound that fits: draws at or above it would favour the
  // small remainders, so they are drawn again (rarely: less than half the time even
  // for the worst bound).
  const std::uint64_t limit =
      std::numeric_limits<std::uint64_t>::max() - std::numeric_limits<std::uint64_t>::max() % bound;
  for (;;) {
    const std::uint64_t x = rng();
    if (x < limit) {
      return x % bound;
    }
  }
}

nlohmann::ordered_json Provenance::to_json() const {
  nlohmann::ordered_json json;
  json["source"] = source;
  if (!path.empty()) {
    json["path"] = path;
    json["size"] = size;
    json["sha256"] = sha256;
  }
  json["seed"] = seed;
  json["available"] = available;
  json["filters"] = filters;
  json["ids"] = ids;
  return json;
}

std::vector<WorkloadRequest> plain_requests(const std::vector<std::string>& texts) {
  std::vector<WorkloadRequest> requests;
  requests.reserve(texts.size());
  for (std::size_t i = 0; i < texts.size(); ++i) {
    requests.push_back(WorkloadRequest{.id = std::to_string(i + 1), .prompt = texts[i]});
  }
  return requests;
}

nlohmann::json request_to_json(const WorkloadRequest& request) {
  nlohmann::json messages = nlohmann::json::array();
  for (const auto& m : request.messages) {
    messages.push_back({{"role", m.role}, {"content", m.content}});
  }
  return {{"id", request.id},
          {"category", request.category},
          {"prompt", request.prompt},
          {"messages", std::move(messages)},
          {"input_tokens", request.input_tokens},
          {"output_tokens", request.output_tokens},
          {"group", request.group},
          {"shared_bytes", request.shared_bytes}};
}

WorkloadRequest request_from_json(const nlohmann::json& j) {
  auto field = [&](const char* key, auto check, const char* type) -> const nlohmann::json& {
    if (!j.is_object() || !j.contains(key) || !check(j[key])) {
      throw Error(fmt::format("a workload request's \"{}\" is missing or not {}", key, type), ErrorKind::bad_input);
    }
    return j[key];
  };
  const auto is_string = [](const nlohmann::json& v) { return v.is_string(); };
  const auto is_int = [](const nlohmann::json& v) { return v.is_number_integer(); };
  WorkloadRequest r;
  r.id = field("id", is_string, "a string").get<std::string>();
  r.category = field("category", is_string, "a string").get<std::string>();
  r.prompt = field("prompt", is_string, "a string").get<std::string>();
  for (const auto& m : field(
           "messages", [](const nlohmann::json& v) { return v.is_array(); }, "a list")) {
    if (!m.is_object() || !m.contains("role") || !m["role"].is_string() || !m.contains("content") ||
        !m["content"].is_string()) {
      throw Error("a workload request's message is not {\"role\", \"content\"}", ErrorKind::bad_input);
    }
    r.messages.push_back({m["role"].get<std::string>(), m["content"].get<std::string>()});
  }
  r.input_tokens = field("input_tokens", is_int, "an integer").get<int>();
  r.output_tokens = field("output_tokens", is_int, "an integer").get<int>();
  r.group = field("group", is_int, "an integer").get<int>();
  r.shared_bytes = field(
                       "shared_bytes", [](const nlohmann::json& v) { return v.is_number_unsigned(); }, "a count")
                       .get<std::size_t>();
  return r;
}

std::expected<Workload, Error> make_workload(const WorkloadSpec& spec) {
  return std::visit([](const auto& one) { return make_workload(one); }, spec);
}

namespace {

std::string spread(int tokens, double ratio) {
  if (ratio <= 0) {
    return with_commas(static_cast<std::uint64_t>(std::max(tokens, 0)));
  }
  return fmt::format("{}±{}%", with_commas(static_cast<std::uint64_t>(std::max(tokens, 0))), std::lround(ratio * 100));
}

std::string count_text(std::optional<int> count, std::string_view noun) {
  return count ? fmt::format("{} {}", with_commas(static_cast<std::uint64_t>(std::max(*count, 0))), noun)
               : fmt::format("all {}", noun);
}

struct Describer {
  std::string operator()(const ShareGptSpec& spec) const {
    return fmt::format(
        "sharegpt {}: {} (seed {})", spec.file,
        count_text(spec.num_prompts > 0 ? std::optional(spec.num_prompts) : std::nullopt, "conversations"), spec.seed);
  }
  std::string operator()(const JsonlSpec& spec) const {
    return fmt::format("jsonl {}: {} (seed {})", spec.file, count_text(spec.num_prompts, "requests"), spec.seed);
  }
  std::string operator()(const RandomSpec& spec) const {
    std::string prefix =
        spec.prefix_tokens > 0
            ? fmt::format(", {}-token shared prefix", with_commas(static_cast<std::uint64_t>(spec.prefix_tokens)))
            : "";
    return fmt::format("random: {} prompts of {} tokens in, {} out{} (seed {})",
                       with_commas(static_cast<std::uint64_t>(std::max(spec.num_prompts, 0))),
                       spread(spec.input_tokens, spec.range_ratio), spread(spec.output_tokens, spec.range_ratio),
                       prefix, spec.seed);
  }
  std::string operator()(const SharedPrefixSpec& spec) const {
    return fmt::format("shared_prefix: {} groups x {} prompts, {}-token system prompt + {}-token question, {} out "
                       "(seed {})",
                       spec.groups, spec.per_group,
                       with_commas(static_cast<std::uint64_t>(std::max(spec.system_tokens, 0))),
                       with_commas(static_cast<std::uint64_t>(std::max(spec.question_tokens, 0))),
                       with_commas(static_cast<std::uint64_t>(std::max(spec.output_tokens, 0))), spec.seed);
  }
  std::string operator()(const SpecDecSpec& spec) const {
    const std::size_t categories = spec.categories.empty() ? specdec_categories().size() : spec.categories.size();
    return fmt::format("specdec: {}, {} categories (seed {})", count_text(spec.num_prompts, "prompts"), categories,
                       spec.seed);
  }
};

} // namespace

WorkloadSpec with_seed_offset(WorkloadSpec spec, std::uint64_t offset) {
  std::visit([offset](auto& source) { source.seed += offset; }, spec);
  return spec;
}

int longest_output(const std::vector<WorkloadRequest>& requests, int max_tokens) {
  int longest = requests.empty() ? max_tokens : 0;
  for (const auto& r : requests) {
    longest = std::max(longest, r.output_tokens > 0 ? r.output_tokens : max_tokens);
  }
  return longest;
}

std::string describe_output(const std::vector<WorkloadRequest>& requests, int max_tokens) {
  const bool own =
      std::any_of(requests.begin(), requests.end(), [](const WorkloadRequest& r) { return r.output_tokens > 0; });
  if (!own) {
    return fmt::format("{} tokens", max_tokens);
  }
  int shortest = std::numeric_limits<int>::max();
  for (const auto& r : requests) {
    shortest = std::min(shortest, r.output_tokens > 0 ? r.output_tokens : max_tokens);
  }
  const int longest = longest_output(requests, max_tokens);
  return shortest == longest ? fmt::format("{} tokens (the workload's)", longest)
                             : fmt::format("{}-{} tokens (each request its own)", shortest, longest);
}

std::string describe(const WorkloadSpec& spec) {
  return std::visit(Describer{}, spec);
}

std::string describe(const Workload& workload) {
  const Provenance& p = workload.provenance;
  const std::string drawn = with_commas(workload.requests.size());
  const std::string available = with_commas(p.available);
  if (p.source == "sharegpt") {
    return fmt::format("sharegpt {}: {} of {} conversations (seed {})", p.path, drawn, available, p.seed);
  }
  if (p.source == "jsonl") {
    return fmt::format("jsonl {}: {} of {} requests (seed {})", p.path, drawn, available, p.seed);
  }
  if (p.source == "specdec") {
    return fmt::format("specdec: {} of {} prompts (seed {})", drawn, available, p.seed);
  }
  // The generated sources describe themselves by the options they were made with.
  const auto option = [&](const char* key, auto fallback) {
    return p.filters.contains(key) ? p.filters[key].get<decltype(fallback)>() : fallback;
  };
  if (p.source == "random") {
    return Describer{}(RandomSpec{.input_tokens = option("input_tokens", 0),
                                  .output_tokens = option("output_tokens", 0),
                                  .range_ratio = option("range_ratio", 0.0),
                                  .prefix_tokens = option("prefix_tokens", 0),
                                  .num_prompts = static_cast<int>(workload.requests.size()),
                                  .seed = p.seed});
  }
  if (p.source == "shared_prefix") {
    return Describer{}(SharedPrefixSpec{.groups = option("groups", 0),
                                        .per_group = option("per_group", 0),
                                        .system_tokens = option("system_tokens", 0),
                                        .question_tokens = option("question_tokens", 0),
                                        .output_tokens = option("output_tokens", 0),
                                        .seed = p.seed});
  }
  return fmt::format("{}: {} prompts (seed {})", p.source, drawn, p.seed);
}

std::expected<int, Error> calibrate(WorkloadRequest& request, int target_tokens, const TokenCounter& count_tokens,
                                    int tolerance) {
  if (!request.messages.empty()) {
    return std::unexpected(bad_input(fmt::format(
        "request \"{}\": calibration works on a text prompt, and this request is chat messages", request.id)));
  }
  if (target_tokens < 1) {
    return std::unexpected(
        bad_input(fmt::format("request \"{}\": cannot calibrate to {} tokens", request.id, target_tokens)));
  }
  const std::size_t shared = std::min(request.shared_bytes, request.prompt.size());
  std::mt19937_64 rng(util::mix64(util::fnv1a_64(request.id)));
  int calls = 0;
  int last = -1;
  int last_words = -1;
  while (calls < k_calibration_calls) {
    auto counted = count_tokens(request.prompt);
    ++calls;
    if (!counted) {
      return std::unexpected(counted.error());
    }
    last = *counted;
    if (std::abs(last - target_tokens) <= tolerance) {
      request.input_tokens = target_tokens;
      return calls;
    }
    const auto words = static_cast<int>(word_starts(request.prompt, shared).size());
    const auto all_words = static_cast<int>(word_starts(request.prompt, 0).size());
    // Tokens per word, as measured: the correction for a tokenizer that splits words
    // more (or less) than the estimate assumed.
    const double per_word = all_words > 0 && last > 0 ? static_cast<double>(last) / all_words : 1.0;
    int next = words + static_cast<int>(std::lround((target_tokens - last) / per_word));
    if (next == words || next == last_words) {
      next = words + (target_tokens > last ? 1 : -1);
    }
    if (next < 0) {
      break;
    }
    last_words = words;
    resize_words(request.prompt, shared, next, rng);
  }
  return std::unexpected(Error(fmt::format("request \"{}\": calibration to {} tokens (±{}) did not converge: the last "
                                           "count was {} after {} counts",
                                           request.id, target_tokens, tolerance, last, calls),
                               ErrorKind::failed));
}

} // namespace specctl::bench
