#pragma once

#include <span>
#include <string_view>

namespace specctl::sim {

// A category of specctl's built-in spec-decode prompt set (bench::specdec_categories())
// and how much longer (or shorter) its accept length is than a conversation's, after
// the per-task acceptance lengths of EAGLE's evaluations; docs/specsim.md gives the
// figures behind each ratio and which of them are assumed.
struct SpecCategory {
  std::string_view name;
  std::string_view benchmark; // the evaluation task it stands in for
  double accept_ratio;        // accept length / the MT-bench (conversation) accept length
};

std::span<const SpecCategory> spec_categories();

// The index in spec_categories() of the built-in prompt `text` ends with (specctl
// may put a unique prefix before it), or -1 when it is not one of them.
int builtin_prompt_category(std::string_view text);

} // namespace specctl::sim
