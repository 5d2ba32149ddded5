#include <specctl/tune/search.hpp>

#include <specctl/util/error.hpp>

#include <algorithm>
#include <cmath>
#include <fmt/format.h>
#include <functional>

namespace specctl::tune {

namespace {

// A pass of the strategy past the measurements: the configuration it needs next.
struct NeedLaunch {
  Config config;
};
// The budget of launches is spent.
struct BudgetSpent {};

// The bound on passes over the knobs, far above what a space needs (a pass that keeps
// nothing ends the search): it only makes the loop's end evident.
constexpr int k_max_search_passes = 64;

// Answers the strategy's questions from the measurements, in the order it asks.
class Replay {
public:
  Replay(const Measured& measured, const Options& options) : m_measured(measured), m_options(options) {}

  const std::vector<Figure>& figures(const Config& config) {
    if (std::find(m_asked.begin(), m_asked.end(), config) == m_asked.end()) {
      if (static_cast<int>(m_asked.size()) >= m_options.max_loads) {
        throw BudgetSpent{};
      }
      m_asked.push_back(config);
    }
    auto it = m_measured.find(config);
    if (it == m_measured.end()) {
      throw NeedLaunch{config};
    }
    return it->second;
  }
  const Figure& at(const Config& config, std::size_t point) { return figures(config)[point]; }
  const std::vector<Config>& asked() const { return m_asked; }

private:
  const Measured& m_measured;
  const Options& m_options;
  std::vector<Config> m_asked;
};

std::size_t index_of(const Dimension& dimension, const std::string& value) {
  auto it = std::find(dimension.values.begin(), dimension.values.end(), value);
  return static_cast<std::size_t>(it - dimension.values.begin());
}

Config with(Config config, const std::string& knob, const std::string& value) {
  config[knob] = value;
  return config;
}

// `a` has the higher mean, meeting the SLO first.
bool ahead(const Figure& a, const Figure& b) {
  return a.meets_slo != b.meets_slo ? a.meets_slo : a.mean > b.mean;
}

// A tie whose means are also within the noise of each other: close enough that the
// simpler of the two (the start, the smaller value) is kept.
bool near(const Figure& a, const Figure& b, double noise) {
  return compare(a, b, noise) == Order::tie && std::abs(a.mean - b.mean) <= noise * std::abs(b.mean);
}

// The index in [lo, hi] whose configuration is best at `point`, by a golden-section
// search that takes the objective to be unimodal; among the last candidates, the
// smallest index within the noise of the best.
std::size_t golden_search(const std::function<const Figure&(std::size_t)>& at, std::size_t lo, std::size_t hi,
                          double noise) {
  constexpr double k_golden = 0.381966;
  while (hi - lo > 2) {
    std::size_t m1 = lo + static_cast<std::size_t>(std::lround(k_golden * static_cast<double>(hi - lo)));
    std::size_t m2 = lo + hi - m1;
    if (m1 >= m2) {
      m2 = m1 + 1;
    }
    // One after the other: which configuration is asked for first must not be left to
    // the compiler's order of evaluating arguments.
    const Figure& low = at(m1);
    const Figure& high = at(m2);
    switch (compare(low, high, noise)) {
    case Order::better:
      hi = m2 - 1;
      break;
    case Order::worse:
      lo = m1 + 1;
      break;
    case Order::tie:
      // The best lies between them, or they share a plateau with it.
      lo = m1;
      hi = m2;
      break;
    }
  }
  // The highest of the last candidates, then the smallest index near it: a value
  // with a wide interval that merely overlaps the best does not win by being small.
  std::size_t best = lo;
  for (std::size_t i = lo + 1; i <= hi; ++i) {
    if (ahead(at(i), at(best))) {
      best = i;
    }
  }
  for (std::size_t i = lo; i < best; ++i) {
    if (near(at(i), at(best), noise)) {
      return i;
    }
  }
  return best;
}

void run_strategy(const Space& space, Replay& replay, const Options& options, std::vector<Config>& best) {
  best.assign(options.points, space.start());
  replay.figures(space.start());
  for (int pass = 0; pass < k_max_search_passes; ++pass) {
    bool kept = false;
    for (const auto& dimension : space.dimensions()) {
      // Whether `config` is in contention at point p for this knob: best there, or,
      // where the best lacks the knob (no steps without speculation), within the
      // noise of the best: a tie is not a defeat, and the knob may make it win.
      const auto contends = [&](const Config& config, std::size_t p) {
        if (best[p] == config) {
          return true;
        }
        const Figure& figure = replay.at(config, p);
        return figure.meets_slo && !space.applies(dimension, best[p]) && space.applies(dimension, config) &&
               compare(figure, replay.at(best[p], p), options.noise) == Order::tie;
      };
      // The configurations in contention somewhere, each once: the best in point
      // order, then the others in the order they were measured.
      std::vector<Config> bases;
      std::vector<Config> candidates = best;
      const auto asked = replay.asked();
      candidates.insert(candidates.end(), asked.begin(), asked.end());
      for (const auto& config : candidates) {
        if (!space.applies(dimension, config) || std::find(bases.begin(), bases.end(), config) != bases.end()) {
          continue;
        }
        for (std::size_t p = 0; p < options.points; ++p) {
          if (contends(config, p)) {
            bases.push_back(config);
            break;
          }
        }
      }
      for (const auto& base : bases) {
        if (!dimension.ordered) {
          for (const auto& value : dimension.values) {
            const Config moved = space.normalize(with(base, dimension.knob, value));
            if (moved == base) {
              continue;
            }
            const auto& figures = replay.figures(moved);
            for (std::size_t p = 0; p < options.points; ++p) {
              if (compare(figures[p], replay.at(best[p], p), options.noise) == Order::better) {
                best[p] = moved;
                kept = true;
              }
            }
          }
          continue;
        }
        for (std::size_t p = 0; p < options.points; ++p) {
          if (!contends(base, p)) {
            continue;
          }
          const auto config_at = [&](std::size_t i) {
            return space.normalize(with(base, dimension.knob, dimension.values[i]));
          };
          const std::function<const Figure&(std::size_t)> at = [&](std::size_t i) -> const Figure& {
            return replay.at(config_at(i), p);
          };
          const std::size_t found = golden_search(at, 0, dimension.values.size() - 1, options.noise);
          const Config moved = config_at(found);
          if (moved == best[p]) {
            continue;
          }
          // Within the noise, the smaller value stays: fewer steps, less memory. A
          // contender that only ties the best keeps its place behind it.
          const Order order = compare(replay.at(moved, p), replay.at(best[p], p), options.noise);
          const bool smaller = best[p] == base && found < index_of(dimension, base.at(dimension.knob));
          if (order == Order::better || (smaller && near(replay.at(moved, p), replay.at(best[p], p), options.noise))) {
            best[p] = moved;
            kept = true;
          }
        }
      }
    }
    if (!kept) {
      return;
    }
  }
}

} // namespace

std::string describe(const Config& config) {
  std::string out;
  for (const auto& [knob, value] : config) {
    out += (out.empty() ? "" : " ") + knob + "=" + value;
  }
  return out;
}

Space::Space(std::vector<Dimension> dimensions) : m_dimensions(std::move(dimensions)) {
  for (const auto& d : m_dimensions) {
    if (d.values.empty()) {
      throw Error(fmt::format("tune: knob \"{}\" has no values", d.knob), ErrorKind::bad_input);
    }
    if (!d.start.empty() && std::find(d.values.begin(), d.values.end(), d.start) == d.values.end()) {
      throw Error(fmt::format("tune: knob \"{}\" starts at \"{}\", which is not one of its values", d.knob, d.start),
                  ErrorKind::bad_input);
    }
  }
}

bool Space::applies(const Dimension& dimension, const Config& config) const {
  if (dimension.where_knob.empty()) {
    return true;
  }
  auto it = config.find(dimension.where_knob);
  return it != config.end() && std::find(dimension.where_values.begin(), dimension.where_values.end(), it->second) !=
                                   dimension.where_values.end();
}

Config Space::normalize(Config config) const {
  // A knob's condition names an earlier knob, so one pass in order settles every one.
  Config out;
  for (const auto& d : m_dimensions) {
    if (!applies(d, out)) {
      continue;
    }
    auto it = config.find(d.knob);
    out[d.knob] = it != config.end() ? it->second : (d.start.empty() ? d.values.front() : d.start);
  }
  return out;
}

Config Space::start() const {
  return normalize({});
}

std::vector<Config> Space::grid() const {
  std::vector<Config> out = {Config{}};
  for (const auto& d : m_dimensions) {
    std::vector<Config> next;
    for (const auto& config : out) {
      if (!applies(d, config)) {
        next.push_back(config);
        continue;
      }
      for (const auto& value : d.values) {
        next.push_back(with(config, d.knob, value));
      }
    }
    out = std::move(next);
  }
  return out;
}

Order compare(const Figure& a, const Figure& b, double noise) {
  if (a.meets_slo != b.meets_slo) {
    return a.meets_slo ? Order::better : Order::worse;
  }
  const double gap = a.mean - b.mean;
  const double margin = std::max(a.half_width + b.half_width, noise * std::abs(b.mean));
  if (gap > margin) {
    return Order::better;
  }
  if (-gap > margin) {
    return Order::worse;
  }
  return Order::tie;
}

Step next_step(const Space& space, const Measured& measured, const Options& options) {
  for (const auto& [config, figures] : measured) {
    if (figures.size() != options.points) {
      throw Error(fmt::format("tune: trial {} has {} figures for {} load points", describe(config), figures.size(),
                              options.points),
                  ErrorKind::bad_input);
    }
  }
  Replay replay(measured, options);
  Step step;
  try {
    run_strategy(space, replay, options, step.best);
    step.why = "no move improves any load point";
  } catch (const NeedLaunch& need) {
    step.launch = need.config;
  } catch (const BudgetSpent&) {
    step.why = fmt::format("the budget of {} launches is spent", options.max_loads);
  }
  step.asked = replay.asked();
  return step;
}

std::vector<PointAnswer> answer(const Space& space, const Measured& measured, const Options& options) {
  const Step step = next_step(space, measured, options);
  // The search's best, or where it misses the SLO the first measured that meets it;
  // then any measured configuration better beyond the noise (one measured while
  // searching another point) takes its place. Ties never move it.
  std::vector<Config> order;
  for (const auto& config : step.asked) {
    if (measured.contains(config)) {
      order.push_back(config);
    }
  }
  for (const auto& [config, figures] : measured) {
    if (std::find(order.begin(), order.end(), config) == order.end()) {
      order.push_back(config);
    }
  }
  std::vector<PointAnswer> out(options.points);
  for (std::size_t p = 0; p < options.points; ++p) {
    const Figure* best = nullptr;
    Config chosen;
    const auto consider = [&](const Config& config) {
      auto it = measured.find(config);
      if (it == measured.end() || !it->second[p].meets_slo) {
        return;
      }
      if (best == nullptr || compare(it->second[p], *best, options.noise) == Order::better) {
        best = &it->second[p];
        chosen = config;
      }
    };
    if (p < step.best.size()) {
      consider(step.best[p]);
    }
    for (int round = 0; round < 2; ++round) {
      for (const auto& config : order) {
        consider(config);
      }
    }
    if (best == nullptr) {
      continue;
    }
    out[p].best = chosen;
    const Figure* second = nullptr;
    for (const auto& config : order) {
      const auto& figures = measured.at(config);
      if (config != chosen && (second == nullptr || ahead(figures[p], *second))) {
        second = &figures[p];
        out[p].runner_up = config;
      }
    }
    out[p].tie = second != nullptr && compare(*second, *best, options.noise) == Order::tie;
  }
  return out;
}

} // namespace specctl::tune
