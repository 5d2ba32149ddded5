#include <specctl/bench/workload.hpp>
#include <specctl/util/bounded_read.hpp>

#include <cerrno>

#include "workload_text.hpp"

#include <specctl/util/sha256.hpp>
#include <specctl/util/text.hpp>

#include <fmt/format.h>

#include <array>
#include <filesystem>
#include <fstream>

namespace specctl::bench {

using workload_detail::bad_input;
using workload_detail::with_commas;

namespace {

// Why a ShareGPT item was dropped, in the order the checks run. The first three are
// malformed items (vLLM would crash on them); the others are vLLM's own filters.
enum class Drop : std::size_t {
  not_an_object,
  no_conversations,
  turn_without_text,
  fewer_than_two_turns,
  prompt_too_short,
  output_too_short,
  prompt_too_long,
  total_too_long,
  count
};

constexpr std::array<std::string_view, static_cast<std::size_t>(Drop::count)> k_drop_names = {
    "not_an_object",    "no_conversations", "turn_without_text", "fewer_than_two_turns",
    "prompt_too_short", "output_too_short", "prompt_too_long",   "total_too_long"};

// How the first malformed item is quoted in a note.
constexpr std::array<std::string_view, 3> k_malformed_phrases = {
    "is not an object", "has no \"conversations\" list", "has a first or second turn without a string \"value\""};

using DropCounts = std::array<std::size_t, static_cast<std::size_t>(Drop::count)>;

std::size_t& at(DropCounts& counts, Drop drop) {
  return counts[static_cast<std::size_t>(drop)];
}

// "20 too short, 17 malformed": the reasons grouped as a reader thinks of them.
std::string drop_summary(const DropCounts& counts) {
  const auto n = [&](Drop drop) { return counts[static_cast<std::size_t>(drop)]; };
  const std::pair<std::size_t, std::string_view> groups[] = {
      {n(Drop::prompt_too_short) + n(Drop::output_too_short), "too short"},
      {n(Drop::prompt_too_long) + n(Drop::total_too_long), "too long"},
      {n(Drop::fewer_than_two_turns), "with fewer than 2 turns"},
      {n(Drop::not_an_object) + n(Drop::no_conversations) + n(Drop::turn_without_text), "malformed"}};
  std::vector<std::string> parts;
  for (const auto& [count, what] : groups) {
    if (count > 0) {
      parts.push_back(fmt::format("{} {}", with_commas(count), what));
    }
  }
  return parts.empty() ? std::string("none dropped") : util::join(parts, ", ");
}

struct FileFacts {
  std::uintmax_t size = 0;
  std::string sha256;
};

std::expected<FileFacts, Error> file_facts(const std::string& file, std::string_view what) {
  // One check: a FIFO or a folder is named as what it is, not as a missing file.
  if (auto ok = util::check_regular_file(file, util::k_max_dataset_bytes, "a dataset"); !ok) {
    return std::unexpected(bad_input(
        ok.error().error == ENOENT ? fmt::format("{}: no such {} file", file, what)
                                   : fmt::format("{}: cannot read the {} file: {}", file, what, ok.error().reason)));
  }
  std::error_code error;
  FileFacts facts;
  facts.size = std::filesystem::file_size(file, error);
  if (error) {
    return std::unexpected(bad_input(fmt::format("{}: cannot read the {} file: {}", file, what, error.message())));
  }
  auto digest = util::sha256_file(file);
  if (!digest) {
    return std::unexpected(digest.error());
  }
  facts.sha256 = std::move(*digest);
  return facts;
}

// A dataset's requests, with the file they came from in their provenance.
Workload file_workload(std::string source, const std::string& path, const FileFacts& facts, std::uint64_t seed,
                       std::size_t available, std::vector<WorkloadRequest> requests) {
  Workload workload = workload_detail::workload_of(std::move(source), seed, available, std::move(requests));
  workload.provenance.path = path;
  workload.provenance.size = facts.size;
  workload.provenance.sha256 = facts.sha256;
  return workload;
}

// nlohmann's message without its "[json.exception.parse_error.101] " tag.
std::string parse_message(const nlohmann::json::exception& error) {
  std::string_view text = error.what();
  if (const auto end = text.find("] "); text.starts_with("[json.exception") && end != std::string_view::npos) {
    text.remove_prefix(end + 2);
  }
  return std::string(text);
}

// Reads a ShareGPT file keeping only the first two turns of each conversation: the
// rest is never used, and ShareGPT_V3 (670 MB) would take gigabytes as a whole tree.
nlohmann::json parse_sharegpt(std::istream& in) {
  bool in_conversations = false;
  bool conversations_key = false;
  std::size_t turns = 0;
  const nlohmann::json::parser_callback_t keep = [&](int depth, nlohmann::json::parse_event_t event,
                                                     nlohmann::json& parsed) {
    using Event = nlohmann::json::parse_event_t;
    // Depths: 0 the list, 1 an item, 2 an item's keys and the conversations list,
    // 3 a turn.
    if (depth == 2 && event == Event::key) {
      conversations_key = parsed == "conversations";
    } else if (depth == 2 && event == Event::array_start) {
      in_conversations = conversations_key;
      turns = 0;
    } else if (depth == 2 && event == Event::array_end) {
      in_conversations = false;
    } else if (depth == 3 && in_conversations &&
               (event == Event::object_end || event == Event::array_end || event == Event::value)) {
      return ++turns <= 2;
    }
    return true;
  };
  return nlohmann::json::parse(in, keep);
}

std::optional<std::string> turn_text(const nlohmann::json& turn) {
  if (!turn.is_object()) {
    return std::nullopt;
  }
  const auto value = turn.find("value");
  if (value == turn.end() || !value->is_string()) {
    return std::nullopt;
  }
  return value->get<std::string>();
}

std::string item_id(const nlohmann::json& item, std::size_t index) {
  const auto id = item.find("id");
  if (id != item.end() && id->is_string() && !id->get_ref<const std::string&>().empty()) {
    return id->get<std::string>();
  }
  if (id != item.end() && id->is_number_integer()) {
    return id->dump();
  }
  return fmt::format("sharegpt:{}", index);
}

std::expected<void, Error> check_counts(std::string_view source, std::optional<int> num_prompts) {
  if (num_prompts && *num_prompts < 0) {
    return std::unexpected(
        bad_input(fmt::format("{}: num_prompts must not be negative, not {}", source, *num_prompts)));
  }
  return {};
}

} // namespace

std::expected<Workload, Error> make_workload(const ShareGptSpec& spec) {
  if (auto ok = check_counts("sharegpt", spec.num_prompts); !ok) {
    return std::unexpected(ok.error());
  }
  if (spec.fixed_output && *spec.fixed_output < 1) {
    return std::unexpected(
        bad_input(fmt::format("sharegpt: fixed_output must be at least 1 token, not {}", *spec.fixed_output)));
  }
  auto facts = file_facts(spec.file, "ShareGPT");
  if (!facts) {
    return std::unexpected(facts.error());
  }
  std::ifstream in(spec.file, std::ios::binary);
  nlohmann::json data;
  try {
    data = parse_sharegpt(in);
  } catch (const nlohmann::json::exception& error) {
    return std::unexpected(bad_input(fmt::format("{}: not JSON: {}", spec.file, parse_message(error))));
  }
  if (!data.is_array()) {
    return std::unexpected(bad_input(fmt::format(
        "{}: not a ShareGPT file: expected a JSON list of conversations, found {}", spec.file, data.type_name())));
  }

  struct Candidate {
    std::size_t index;
    std::string prompt;
    int output_tokens;
  };
  std::vector<Candidate> valid;
  DropCounts drops{};
  std::optional<std::string> first_malformed;
  for (std::size_t index = 0; index < data.size(); ++index) {
    const nlohmann::json& item = data[index];
    const auto drop = [&](Drop why) {
      ++at(drops, why);
      const auto reason = static_cast<std::size_t>(why);
      if (reason < k_malformed_phrases.size() && !first_malformed) {
        first_malformed = fmt::format("{}: item {} {}", spec.file, index, k_malformed_phrases[reason]);
      }
    };
    if (!item.is_object()) {
      drop(Drop::not_an_object);
      continue;
    }
    const auto conversations = item.find("conversations");
    if (conversations == item.end() || !conversations->is_array()) {
      drop(Drop::no_conversations);
      continue;
    }
    if (conversations->size() < 2) {
      drop(Drop::fewer_than_two_turns);
      continue;
    }
    const auto prompt = turn_text((*conversations)[0]);
    const auto completion = turn_text((*conversations)[1]);
    if (!prompt || !completion) {
      drop(Drop::turn_without_text);
      continue;
    }
    // vLLM's is_valid_sequence, in its order.
    const int input = estimate_tokens(*prompt);
    const int output = spec.fixed_output ? *spec.fixed_output : estimate_tokens(*completion);
    if (input < spec.min_input) {
      drop(Drop::prompt_too_short);
    } else if (!spec.fixed_output && output < spec.min_output) {
      drop(Drop::output_too_short);
    } else if (input > spec.max_input) {
      drop(Drop::prompt_too_long);
    } else if (input + output > spec.max_total) {
      drop(Drop::total_too_long);
    } else {
      valid.push_back({index, *prompt, output});
    }
  }

  const std::string available = with_commas(data.size());
  if (valid.empty()) {
    return std::unexpected(bad_input(
        fmt::format("{}: 0 of {} conversations left after filtering: {}", spec.file, available, drop_summary(drops))));
  }
  const auto wanted = spec.num_prompts > 0 ? static_cast<std::size_t>(spec.num_prompts) : valid.size();
  if (valid.size() < wanted) {
    return std::unexpected(bad_input(fmt::format("{}: {} of {} conversations left after filtering ({}), fewer than "
                                                 "num_prompts {}",
                                                 spec.file, with_commas(valid.size()), available, drop_summary(drops),
                                                 with_commas(wanted))));
  }
  const std::size_t valid_count = valid.size();
  std::mt19937_64 rng(spec.seed);
  shuffle_portably(valid, rng);
  valid.resize(wanted);

  std::vector<WorkloadRequest> requests;
  for (Candidate& candidate : valid) {
    WorkloadRequest request;
    request.id = item_id(data[candidate.index], candidate.index);
    request.prompt = std::move(candidate.prompt);
    request.output_tokens = candidate.output_tokens;
    requests.push_back(std::move(request));
  }
  Workload workload = file_workload("sharegpt", spec.file, *facts, spec.seed, data.size(), std::move(requests));
  auto& filters = workload.provenance.filters;
  filters = {{"min_input", spec.min_input},
             {"min_output", spec.min_output},
             {"max_input", spec.max_input},
             {"max_total", spec.max_total},
             {"fixed_output", spec.fixed_output ? nlohmann::ordered_json(*spec.fixed_output) : nullptr},
             {"lengths", "estimated tokens (estimate_tokens), not the server's tokenizer"},
             {"valid", valid_count}};
  auto& dropped = filters["dropped"] = nlohmann::ordered_json::object();
  for (std::size_t i = 0; i < drops.size(); ++i) {
    dropped[std::string(k_drop_names[i])] = drops[i];
  }
  if (first_malformed) {
    const std::size_t malformed =
        at(drops, Drop::not_an_object) + at(drops, Drop::no_conversations) + at(drops, Drop::turn_without_text);
    workload.notes.push_back(
        fmt::format("{} ({} malformed in all, dropped)", *first_malformed, with_commas(malformed)));
  }
  return workload;
}

namespace {

std::string jsonl_id(const nlohmann::json& item, const JsonlSpec& spec, int line) {
  if (!spec.id_field.empty()) {
    const auto id = item.find(spec.id_field);
    if (id != item.end() && id->is_string()) {
      return id->get<std::string>();
    }
    if (id != item.end() && id->is_number_integer()) {
      return id->dump();
    }
  }
  return fmt::format("jsonl:{}", line);
}

// One line's request, or the reason it is not one (without the file:line).
std::expected<WorkloadRequest, std::string> jsonl_request(const nlohmann::json& item, const JsonlSpec& spec, int line) {
  if (!item.is_object()) {
    return std::unexpected(fmt::format("expected a JSON object, found {}", item.type_name()));
  }
  WorkloadRequest request;
  request.id = jsonl_id(item, spec, line);
  const auto messages = spec.messages_field.empty() ? item.end() : item.find(spec.messages_field);
  const auto prompt = item.find(spec.prompt_field);
  if (messages != item.end()) {
    if (!messages->is_array() || messages->empty()) {
      return std::unexpected(
          fmt::format("\"{}\" must be a non-empty list of {{\"role\", \"content\"}}", spec.messages_field));
    }
    for (std::size_t i = 0; i < messages->size(); ++i) {
      const nlohmann::json& message = (*messages)[i];
      const auto role = message.is_object() ? message.find("role") : message.end();
      const auto content = message.is_object() ? message.find("content") : message.end();
      if (!message.is_object() || role == message.end() || !role->is_string() || content == message.end() ||
          !content->is_string()) {
        return std::unexpected(
            fmt::format("\"{}\" item {} needs a string \"role\" and a string \"content\"", spec.messages_field, i));
      }
      request.messages.push_back({role->get<std::string>(), content->get<std::string>()});
    }
  } else if (prompt != item.end() && prompt->is_string()) {
    request.prompt = prompt->get<std::string>();
  } else {
    return std::unexpected(spec.messages_field.empty() ? fmt::format("no string \"{}\"", spec.prompt_field)
                                                       : fmt::format("no string \"{}\" and no \"{}\" list",
                                                                     spec.prompt_field, spec.messages_field));
  }
  if (!spec.output_field.empty()) {
    const auto output = item.find(spec.output_field);
    if (output != item.end()) {
      if (!output->is_number_integer() || output->get<long long>() < 1 || output->get<long long>() > (1 << 30)) {
        return std::unexpected(fmt::format("\"{}\" must be a positive integer, not {}", spec.output_field,
                                           util::clip(output->dump(), 40)));
      }
      request.output_tokens = output->get<int>();
    }
  }
  if (!spec.category_field.empty()) {
    const auto category = item.find(spec.category_field);
    if (category != item.end() && category->is_string()) {
      request.category = category->get<std::string>();
    } else if (category != item.end()) {
      return std::unexpected(fmt::format("\"{}\" must be a string", spec.category_field));
    }
  }
  return request;
}

} // namespace

std::expected<Workload, Error> make_workload(const JsonlSpec& spec) {
  if (auto ok = check_counts("jsonl", spec.num_prompts); !ok) {
    return std::unexpected(ok.error());
  }
  auto facts = file_facts(spec.file, "JSONL");
  if (!facts) {
    return std::unexpected(facts.error());
  }
  std::ifstream in(spec.file, std::ios::binary);
  std::vector<WorkloadRequest> requests;
  std::size_t without_output = 0;
  std::string text;
  for (int line = 1; std::getline(in, text); ++line) {
    const std::string_view trimmed = util::trim_view(text);
    if (trimmed.empty()) {
      continue;
    }
    const nlohmann::json item = nlohmann::json::parse(trimmed, nullptr, false);
    if (item.is_discarded()) {
      return std::unexpected(
          bad_input(fmt::format("{}:{}: not JSON (a JSONL file holds one JSON object per line)", spec.file, line)));
    }
    auto request = jsonl_request(item, spec, line);
    if (!request) {
      return std::unexpected(bad_input(fmt::format("{}:{}: {}", spec.file, line, request.error())));
    }
    if (!spec.output_field.empty() && request->output_tokens == 0) {
      ++without_output;
    }
    requests.push_back(std::move(*request));
  }
  if (in.bad()) {
    return std::unexpected(bad_input(fmt::format("{}: error while reading the JSONL file", spec.file)));
  }
  if (requests.empty()) {
    return std::unexpected(bad_input(fmt::format("{}: the JSONL file holds no request", spec.file)));
  }
  const std::size_t available = requests.size();
  const std::size_t wanted = spec.num_prompts ? static_cast<std::size_t>(*spec.num_prompts) : available;
  if (wanted > available) {
    return std::unexpected(bad_input(fmt::format("{}: {} requests in the file, fewer than num_prompts {}", spec.file,
                                                 with_commas(available), with_commas(wanted))));
  }
  if (spec.order == JsonlSpec::Order::shuffled) {
    std::mt19937_64 rng(spec.seed);
    shuffle_portably(requests, rng);
  }
  requests.resize(wanted);

  Workload workload = file_workload("jsonl", spec.file, *facts, spec.seed, available, std::move(requests));
  auto& filters = workload.provenance.filters;
  filters = {{"prompt_field", spec.prompt_field},
             {"messages_field", spec.messages_field},
             {"output_field", spec.output_field},
             {"category_field", spec.category_field},
             {"id_field", spec.id_field},
             {"order", spec.order == JsonlSpec::Order::shuffled ? "shuffled" : "as_written"}};
  if (without_output > 0) {
    workload.notes.push_back(fmt::format("{}: {} of {} lines have no \"{}\": they use the benchmark's max_tokens",
                                         spec.file, with_commas(without_output), with_commas(available),
                                         spec.output_field));
  }
  return workload;
}

} // namespace specctl::bench
