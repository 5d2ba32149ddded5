#pragma once

// The workload's plain types: the requests a benchmark sends, and the specs they are drawn
// from as the experiment file says them (workload.hpp draws them). Free of JSON, for the
// headers that only carry them (the experiment, a request's body, the display).

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <variant>
#include <vector>

namespace specctl::bench {

struct ChatMessage {
  std::string role{};
  std::string content{};
  bool operator==(const ChatMessage&) const = default;
};

struct WorkloadRequest {
  std::string id{};
  std::string category{};
  std::string prompt{};
  // A chat request when not empty (then `prompt` is empty).
  std::vector<ChatMessage> messages{};
  // The target prompt length in tokens; 0: the text as written.
  int input_tokens = 0;
  // The requested max_tokens; 0: the benchmark's default.
  int output_tokens = 0;
  // The shared-prefix group, -1 for none.
  int group = -1;
  // The first `shared_bytes` bytes of `prompt` are shared with other requests (a
  // group's system prompt, a random prefix): calibrate() never changes them, so the
  // prefix stays byte-identical across the group and a prefix cache can serve it.
  std::size_t shared_bytes = 0;
  bool operator==(const WorkloadRequest&) const = default;
};

// vLLM `bench serve --dataset-name sharegpt`: a JSON list of {"id"?, "conversations":
// [{"from", "value"}, ...]}; the first turn is the prompt, the second turn's length
// the output length. Conversations with fewer than two turns or lengths outside the
// bounds are dropped; the valid ones are shuffled with the seed and the first
// num_prompts kept.
struct ShareGptSpec {
  std::string file{};
  // 0: every valid conversation.
  int num_prompts = 0;
  std::uint64_t seed = 0;
  // vLLM's is_valid_sequence bounds, in estimated tokens. vLLM uses one min_len for
  // both the prompt and the output.
  int min_input = 4;
  int min_output = 4;
  int max_input = 1024;
  int max_total = 2048;
  // Every request's max_tokens instead of the second turn's length (vLLM's
  // --sharegpt-output-len); the output minimum is then not checked, as in vLLM.
  std::optional<int> fixed_output{};
};

// One JSON object per line (vLLM's `custom` dataset), with a text prompt or chat messages.
struct JsonlSpec {
  std::string file{};
  std::string prompt_field = "prompt";
  // A list of {"role", "content"}: a chat request; it wins over the prompt field.
  std::string messages_field = "messages";
  // Each field below is unused when empty. output_field: a positive integer, the
  // request's max_tokens (a line without it uses the benchmark's default).
  std::string output_field{};
  std::string category_field{};
  std::string id_field{};
  // Unset: every line.
  std::optional<int> num_prompts{};
  std::uint64_t seed = 0;
  // vLLM shuffles a custom dataset with the seed unless --disable-shuffle.
  enum class Order { shuffled, as_written };
  Order order = Order::shuffled;
};

// vLLM's random dataset: input and output lengths uniform in
// [floor(len * (1 - r)), ceil(len * (1 + r))], 0 <= r < 1, after a shared random
// prefix of prefix_tokens (so a prompt has prefix_tokens + its drawn input length).
// The text is common English words of one token each, every prompt beginning
// differently after the declared prefix.
struct RandomSpec {
  int input_tokens = 1024;
  int output_tokens = 128;
  double range_ratio = 0.0;
  int prefix_tokens = 0;
  int num_prompts = 16;
  std::uint64_t seed = 0;
};

// SGLang's generated-shared-prefix dataset (gsp-*): each group has its own system
// prompt of system_tokens; a request is that prompt, "\n\n" and its own question of
// question_tokens. SGLang shuffles the requests unless --gsp-ordered.
struct SharedPrefixSpec {
  int groups = 8;
  int per_group = 16;
  int system_tokens = 2048;
  int question_tokens = 128;
  int output_tokens = 256;
  std::uint64_t seed = 0;
  enum class Order { shuffled, grouped };
  Order order = Order::shuffled;
};

// The built-in spec-decode prompt set: 8 categories x 10 prompts written for
// specctl, so acceptance can be reported per task without a download. Requests
// alternate between categories; the seed orders the prompts within each category.
struct SpecDecSpec {
  // Empty: all of specdec_categories().
  std::vector<std::string> categories{};
  // Unset: every prompt of the chosen categories.
  std::optional<int> num_prompts{};
  std::uint64_t seed = 0;
};

using WorkloadSpec = std::variant<ShareGptSpec, JsonlSpec, RandomSpec, SharedPrefixSpec, SpecDecSpec>;

} // namespace specctl::bench
