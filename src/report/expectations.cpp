// The expectations of a report: each expected figure against the one its
// variant's result measured.

#include "build_parts.hpp"
#include "cells.hpp"
#include "json_fields.hpp"

#include <specctl/experiment/experiment.hpp>
#include <specctl/report/results.hpp>

#include <cmath>

namespace specctl::report::detail {

namespace {} // namespace

std::vector<ExpectationRow> expectation_rows(const RunData& data, const Report& report) {
  std::vector<ExpectationRow> out;
  const auto& listed = dig(data.experiment, {"expectations"});
  if (!listed.is_array()) {
    return out;
  }
  for (const auto& x : listed) {
    experiment::Expectation e;
    e.variant = json_text(dig(x, {"variant"}));
    e.benchmark = json_text(dig(x, {"benchmark"}));
    e.metric = json_text(dig(x, {"metric"}));
    e.value = json_number(dig(x, {"value"})).value_or(0);
    e.tolerance_pct = json_number(dig(x, {"tolerance_pct"})).value_or(0);
    ExpectationRow row{e.variant, e.benchmark, {}, e.metric, e.value, {}, {}, e.tolerance_pct, false};
    if (auto level = json_number(dig(x, {"level"}))) {
      e.level = static_cast<int>(*level);
      row.level = level_label(false, *level);
    }
    if (auto rate = json_number(dig(x, {"rate"}))) {
      e.rate = *rate;
      row.level = level_label(true, *rate);
    }
    auto it = data.results.find(e.variant);
    const VariantRow* v = report.find_variant(e.variant);
    if (it != data.results.end() && v != nullptr && v->status == VariantStatus::ok) {
      row.measured = find_metric(it->second, e);
    }
    if (row.measured) {
      row.delta_pct = e.value != 0 ? (*row.measured - e.value) / e.value * 100.0 : 0.0;
      row.reproduced = std::abs(*row.delta_pct) <= e.tolerance_pct;
    }
    out.push_back(std::move(row));
  }
  return out;
}

} // namespace specctl::report::detail
