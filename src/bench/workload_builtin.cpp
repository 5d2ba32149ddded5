#include <specctl/bench/workload.hpp>

#include "workload_text.hpp"

#include <specctl/util/text.hpp>

#include <fmt/format.h>

#include <algorithm>

namespace specctl::bench {

using workload_detail::bad_input;
using workload_detail::SpecDecCategory;

const std::vector<std::string>& specdec_categories() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> all;
    for (const SpecDecCategory& category : workload_detail::specdec_set()) {
      all.emplace_back(category.name);
    }
    return all;
  }();
  return names;
}

std::expected<Workload, Error> make_workload(const SpecDecSpec& spec) {
  const auto set = workload_detail::specdec_set();
  std::vector<const SpecDecCategory*> chosen;
  if (spec.categories.empty()) {
    for (const SpecDecCategory& category : set) {
      chosen.push_back(&category);
    }
  }
  for (const std::string& name : spec.categories) {
    const auto found =
        std::find_if(set.begin(), set.end(), [&](const SpecDecCategory& category) { return category.name == name; });
    if (found == set.end()) {
      return std::unexpected(bad_input(fmt::format("specdec: unknown category \"{}\"{} (the categories: {})", name,
                                                   util::did_you_mean(name, specdec_categories()),
                                                   util::join(specdec_categories(), ", "))));
    }
    if (std::find(chosen.begin(), chosen.end(), &*found) == chosen.end()) {
      chosen.push_back(&*found);
    }
  }
  const std::size_t available = chosen.size() * workload_detail::k_specdec_per_category;
  if (spec.num_prompts && (*spec.num_prompts < 1 || static_cast<std::size_t>(*spec.num_prompts) > available)) {
    return std::unexpected(bad_input(fmt::format("specdec: num_prompts must be in [1, {}] for {} categories, not {}",
                                                 available, chosen.size(), *spec.num_prompts)));
  }

  // The seed orders the prompts within each category; the requests then take one
  // prompt of each category in turn, so any first N requests cover the categories
  // evenly and every category is measured under the same load.
  std::mt19937_64 rng(spec.seed);
  std::vector<std::vector<std::size_t>> orders;
  for (std::size_t c = 0; c < chosen.size(); ++c) {
    std::vector<std::size_t> order(workload_detail::k_specdec_per_category);
    for (std::size_t i = 0; i < order.size(); ++i) {
      order[i] = i;
    }
    shuffle_portably(order, rng);
    orders.push_back(std::move(order));
  }
  const std::size_t wanted = spec.num_prompts ? static_cast<std::size_t>(*spec.num_prompts) : available;
  std::vector<WorkloadRequest> requests;
  for (std::size_t n = 0; n < wanted; ++n) {
    const std::size_t c = n % chosen.size();
    const std::size_t prompt = orders[c][n / chosen.size()];
    WorkloadRequest request;
    request.id = fmt::format("specdec:{}:{}", chosen[c]->name, prompt);
    request.category = std::string(chosen[c]->name);
    request.prompt = std::string(chosen[c]->prompts[prompt]);
    requests.push_back(std::move(request));
  }
  Workload workload = workload_detail::workload_of("specdec", spec.seed, available, std::move(requests));
  auto& categories = workload.provenance.filters["categories"] = nlohmann::ordered_json::array();
  for (const SpecDecCategory* category : chosen) {
    categories.push_back(category->name);
  }
  return workload;
}

} // namespace specctl::bench
