#include "variant_run.hpp"

// What a variant's benchmarks do with their workload: prompts fitted to the
// server's count (kept per model), a window per prompt category, figures per
// category, and each level in vLLM's file shape.

#include <specctl/bench/vllm_json.hpp>
#include <specctl/report/results.hpp>
#include <specctl/report/slo.hpp>
#include <specctl/run/server_metrics.hpp>
#include <specctl/util/atomic_file.hpp>
#include <specctl/util/hash.hpp>
#include <specctl/util/text.hpp>

#include <algorithm>
#include <cmath>
#include <fmt/format.h>
#include <fstream>
#include <mutex>

namespace specctl::run::detail {

namespace {

// The most of a model's name kept in the file name of its token counts.
constexpr std::size_t k_max_slug = 64;
} // namespace

// The counts a model's server gave are kept per model in the result folder: every
// later variant of the model, and a resumed run, fits its prompts without asking
// again. One variant at a time reads, calibrates and writes them, so variants on
// parallel slots share what the first learned.
bench::CalibrationResult VariantRun::calibrate(std::vector<bench::WorkloadRequest>& requests,
                                               const bench::RequestOptions& options) {
  const bool targets = std::any_of(requests.begin(), requests.end(), [](const bench::WorkloadRequest& r) {
    return r.input_tokens > 0 && r.messages.empty();
  });
  if (!targets) {
    return {};
  }
  static std::mutex serial;
  const std::lock_guard lock(serial);
  const std::string model = target().model;
  const std::string slug =
      fmt::format("{}-{}", util::slug(model).substr(0, k_max_slug), util::fingerprint(model).substr(0, 8));
  const auto path = m_s.paths.calibration(slug);
  const std::string endpoint = options.endpoint == bench::Endpoint::chat ? "chat" : "completions";
  ordered file = ordered::object();
  if (std::ifstream in(path); in) {
    auto parsed = ordered::parse(in, nullptr, false);
    if (parsed.is_object()) {
      file = std::move(parsed);
    }
  }
  auto counts = bench::TokenCounts::from_json(file.contains(endpoint) ? json(file[endpoint]) : json());
  auto calibrated = bench::calibrate_requests(requests, target(), options, &counts);
  if (!calibrated) {
    throw PhaseFailure{m_phase, calibrated.error()};
  }
  if (calibrated->counts > 0) {
    file["model"] = model;
    file[endpoint] = counts.to_json();
    if (!util::make_dirs_durable(path.parent_path()) || !m_s.failures.write(path, file.dump(1) + '\n')) {
      warn(fmt::format("could not keep the token counts in {}", path.string()));
    }
  }
  return *calibrated;
}

bool VariantRun::windows_per_category() const {
  const auto& sources = m_config.tmpl->accept_length;
  return std::none_of(sources.begin(), sources.end(), [](const server::AcceptSource& source) {
    return source.kind == server::AcceptSource::Kind::responses;
  });
}

// One client call per category, one after the other, each its own window; the
// benchmark's window is the first's opening to the last's end. The warmup goes
// before the first only, and each part's prompts get a prefix of their own.
bench::SingleStreamResult VariantRun::single_stream_by_category(const experiment::BenchmarkSpec& spec,
                                                                bench::SingleStreamOptions options,
                                                                const std::vector<bench::CategoryPart>& parts,
                                                                ServerWatch& watch, Window& window, ordered& accepts) {
  std::vector<bench::SingleStreamPart> done;
  for (std::size_t p = 0; p < parts.size(); ++p) {
    const auto& part = parts[p];
    Window part_window;
    auto part_options = options;
    part_options.runs = part.runs;
    part_options.common.prompts = part.prompts;
    part_options.common.prompt_tag = fmt::format("{} {}", spec.name, part.category);
    part_options.common.warmup = p == 0 ? options.common.warmup : 0;
    const TelemetryLabel label{spec.name, "single", 1};
    part_options.common.on_measured_start = [&] { part_window = open_window(label); };
    if (options.common.on_progress) {
      // "single-stream code": which part the progress line is of.
      part_options.common.on_progress = [inner = options.common.on_progress, &part](const bench::Progress& progress) {
        auto named = progress;
        if (named.phase == "single-stream") {
          named.phase += " " + part.category;
        }
        inner(named);
      };
    }
    auto result = client().single_stream(spec, part_options, watch,
                                         [&](const ClientWindow& w) { part_window = client_window(w, label); });
    ordered holder;
    close_window(part_window, holder, result.level);
    // The benchmark's window: the first part's log, and every part's telemetry.
    if (p == 0) {
      window = part_window;
    } else {
      window.samples.insert(window.samples.end(), part_window.samples.begin(), part_window.samples.end());
    }
    if (holder.contains("metrics") && holder["metrics"].contains("accept_length")) {
      accepts[part.category] = {{"accept_length", holder["metrics"]["accept_length"]},
                                {"accept_length_source", holder["accept_length_source"]}};
    }
    const bool go_on = result.ended == bench::Ended::normally && !watch.death();
    done.push_back(bench::SingleStreamPart{std::move(result), part.prompt_index});
    if (!go_on) {
      break;
    }
  }
  return bench::merge_single_stream(std::move(done));
}

void VariantRun::add_categories(ordered& holder, const bench::LevelResult& level, const std::vector<std::string>& order,
                                const ordered& accepts) {
  const auto figures = bench::category_figures(level.records, order);
  if (figures.empty()) {
    return;
  }
  std::vector<server::AcceptSource> from_responses;
  for (const auto& source : m_config.tmpl->accept_length) {
    if (source.kind == server::AcceptSource::Kind::responses) {
      from_responses.push_back(source);
    }
  }
  ordered names = ordered::array();
  ordered by = ordered::object();
  for (const auto& f : figures) {
    names.push_back(f.category);
    ordered item = {{"completed", f.completed},
                    {"failed", f.failed},
                    {"tok_s", report::finite_or_null(f.tok_s.value_or(std::nan("")))},
                    {"accept_length", nullptr}};
    if (accepts.contains(f.category)) {
      item["accept_length"] = accepts[f.category]["accept_length"];
      item["accept_length_source"] = accepts[f.category]["accept_length_source"];
    } else if (!from_responses.empty()) {
      AcceptWindow facts;
      facts.draft_accepted = f.draft_accepted;
      facts.predicted_tokens = f.predicted_tokens;
      facts.completed = f.completed;
      if (auto accept = accept_length_of(from_responses, m_config.tmpl->log, facts)) {
        item["accept_length"] = report::finite_or_null(accept->value);
        item["accept_length_source"] = {
            {"kind", server::accept_source_name(accept->kind)}, {"how", accept->source}, {"over", accept->over}};
      }
    }
    by[f.category] = std::move(item);
  }
  holder["category_order"] = std::move(names);
  holder["by_category"] = std::move(by);
}

void VariantRun::write_vllm_level(const experiment::BenchmarkSpec& spec, const std::string& tag,
                                  const bench::LevelResult& level) {
  auto v = bench::vllm_level_of(level, target().model, to_bench(spec.endpoint), std::chrono::system_clock::now());
  // The benchmark's SLO as vLLM's --goodput: request_goodput then counts as goodput_rps does.
  const auto bounds = report::request_bounds(spec.slo);
  v.goodput_ttft_ms = bounds.ttft_ms;
  v.goodput_tpot_ms = bounds.tpot_ms;
  v.goodput_e2el_ms = bounds.e2e_ms;
  if (!m_s.failures.write(m_s.paths.vllm(m_variant.name, spec.name, tag), bench::vllm_result_json(v).dump(2) + '\n')) {
    throw PhaseFailure{m_phase,
                       Error(fmt::format("cannot keep the vLLM-shaped results: {}", m_s.failures.first()->what()))};
  }
}

} // namespace specctl::run::detail
