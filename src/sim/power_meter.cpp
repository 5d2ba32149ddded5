#include <specctl/sim/power_meter.hpp>

#include <unistd.h>

#include <algorithm>
#include <cmath>

namespace specctl::sim {

namespace {

using SteadyClock = std::chrono::steady_clock;

// How often a stepping server publishes its figures.
constexpr std::chrono::milliseconds k_publish_interval{100};
// power.draw and utilization.gpu are means over this span (power.draw on Ampere and
// later: "average power draw over 1 sec").
constexpr std::chrono::milliseconds k_mean_span{1000};
// Below this span a mean is no mean: the figures of the moment stand in.
constexpr std::chrono::milliseconds k_min_mean_span{50};

// Thousandths: a millijoule's, a milliwatt's resolution.
double thousandths(double value) {
  return std::round(value * 1000.0) / 1000.0;
}

} // namespace

PowerMeter::PowerMeter(boost::asio::io_context& io, std::filesystem::path gpu_dir, std::vector<int> gpus, int gpu_count,
                       PowerSpec spec)
    : m_timer(io), m_gpu_dir(std::move(gpu_dir)), m_gpus(std::move(gpus)), m_gpu_count(gpu_count), m_spec(spec),
      m_start_time(process_start_time(::getpid()).value_or(0)), m_power_w(spec.idle_w), m_sm_mhz(spec.idle_sm_mhz),
      m_limit_w(spec.limit_w), m_last(SteadyClock::now()), m_idle_since(m_last) {
  m_window.push_back(Sample{.at = m_last});
  if (!m_gpus.empty()) {
    publish();
  }
}

PowerMeter::~PowerMeter() {
  if (m_gpus.empty()) {
    return;
  }
  advance();
  retire_power_record(m_gpu_dir, record(std::chrono::system_clock::now()));
}

void PowerMeter::advance() {
  const auto now = SteadyClock::now();
  const double seconds = std::chrono::duration<double>(now - m_last).count();
  m_extra_mj += (m_power_w - m_spec.idle_w) * seconds * 1000.0;
  if (m_busy) {
    m_busy_s += seconds;
  }
  m_last = now;
}

PowerRecord PowerMeter::record(std::chrono::system_clock::time_point wall) {
  // The means over the last second (or since the meter began): the cumulative figures
  // a second ago, interpolated between the publications around that instant (each
  // change between stepping and idle is one, so the draw between two is near steady).
  const auto span_start = std::max(m_last - k_mean_span, m_window.front().at);
  Sample base = m_window.front();
  for (std::size_t i = 0; i < m_window.size(); ++i) {
    const Sample& before = m_window[i];
    if (before.at > span_start) {
      break;
    }
    const Sample after =
        i + 1 < m_window.size() ? m_window[i + 1] : Sample{.at = m_last, .extra_mj = m_extra_mj, .busy_s = m_busy_s};
    const double gap = std::chrono::duration<double>(after.at - before.at).count();
    const double share = gap > 0.0 ? std::chrono::duration<double>(span_start - before.at).count() / gap : 0.0;
    base = Sample{.at = span_start,
                  .extra_mj = before.extra_mj + (after.extra_mj - before.extra_mj) * share,
                  .busy_s = before.busy_s + (after.busy_s - before.busy_s) * share};
  }
  const double span_s = std::chrono::duration<double>(m_last - base.at).count();
  const bool has_span = m_last - base.at >= k_min_mean_span;
  const double extra_now = m_power_w - m_spec.idle_w;
  return PowerRecord{
      .pid = ::getpid(),
      .start_time = m_start_time,
      .stamp_unix_ms = unix_ms(wall),
      .gpus = m_gpus,
      .extra_energy_mj = m_extra_mj,
      .extra_power_w = extra_now,
      .extra_power_avg_w = has_span ? (m_extra_mj - base.extra_mj) / 1000.0 / span_s : extra_now,
      .util_pct = std::clamp(has_span ? 100.0 * (m_busy_s - base.busy_s) / span_s : (m_busy ? 100.0 : 0.0), 0.0, 100.0),
      .sm_mhz = m_sm_mhz,
      .reasons = m_busy ? (m_capped ? k_reason_sw_power_cap : 0) : k_reason_gpu_idle,
      .limit_w = m_limit_w};
}

void PowerMeter::publish() {
  advance();
  m_window.push_back(Sample{.at = m_last, .extra_mj = m_extra_mj, .busy_s = m_busy_s});
  // Keep one sample at least a span old, as the means' base.
  while (m_window.size() > 2 && m_window[1].at <= m_last - k_mean_span) {
    m_window.pop_front();
  }
  write_power_record(m_gpu_dir, record(std::chrono::system_clock::now()));
}

void PowerMeter::start_ticking() {
  if (m_ticking || m_gpus.empty()) {
    return;
  }
  m_ticking = true;
  tick();
}

void PowerMeter::tick() {
  m_timer.expires_after(k_publish_interval);
  m_timer.async_wait([this](const boost::system::error_code& error) {
    if (error) {
      m_ticking = false;
      return;
    }
    publish();
    // Idle long enough that the means are all idle: the last record stands.
    if (!m_busy && m_last - m_idle_since > k_mean_span + k_publish_interval) {
      m_ticking = false;
      return;
    }
    tick();
  });
}

void PowerMeter::on_step(double power_w, double sm_mhz, bool capped) {
  advance();
  const bool changed = !m_busy || capped != m_capped;
  m_busy = true;
  m_power_w = power_w;
  m_sm_mhz = sm_mhz;
  m_capped = capped;
  if (changed && !m_gpus.empty()) {
    publish();
    start_ticking();
  }
}

void PowerMeter::on_idle() {
  advance();
  if (!m_busy) {
    return;
  }
  m_busy = false;
  m_capped = false;
  m_power_w = m_spec.idle_w;
  m_sm_mhz = m_spec.idle_sm_mhz;
  m_idle_since = m_last;
  if (!m_gpus.empty()) {
    publish();
    start_ticking();
  }
}

void PowerMeter::set_limit(double limit_w) {
  advance();
  m_limit_w = limit_w;
  // A raised limit frees the step in flight at once (its draw was already under it).
  m_capped = m_capped && m_power_w > limit_w;
  if (!m_gpus.empty()) {
    publish();
  }
}

nlohmann::ordered_json PowerMeter::truth() {
  advance();
  const auto now = std::chrono::system_clock::now();
  const PowerRecord own = record(now);
  int count = m_gpu_count;
  for (int gpu : m_gpus) {
    count = std::max(count, gpu + 1);
  }
  const auto readings = read_gpu_power(m_gpu_dir, count, m_spec, now, m_gpus.empty() ? nullptr : &own);
  nlohmann::ordered_json gpus = nlohmann::ordered_json::array();
  for (int gpu : m_gpus) {
    const auto& reading = readings[static_cast<std::size_t>(gpu)];
    gpus.push_back({{"index", gpu},
                    {"energy_mj", thousandths(reading.energy_mj)},
                    {"power_w", thousandths(reading.instant_w)},
                    {"server_energy_mj", thousandths(m_extra_mj)}});
  }
  return {{"at_unix_ms", unix_ms(now)},
          {"idle_power_w", m_spec.idle_w},
          {"power_limit_w", m_limit_w},
          {"gpus", std::move(gpus)}};
}

} // namespace specctl::sim
