#pragma once

#include <specctl/sim/gpu_power.hpp>

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>

#include <nlohmann/json.hpp>

#include <chrono>
#include <deque>
#include <filesystem>
#include <vector>

namespace specctl::sim {

// The server's side of the GPUs' power: integrates what its GPUs draw above idle over
// real time, step by step as the scheduler reports them, and publishes it in
// DIR/power/PID (write_power_record) at every change between stepping and idle or of
// the limit, and every 100 ms while stepping (until the one-second means have drained
// after the last step). Lives on the server's event loop.
class PowerMeter {
public:
  PowerMeter(boost::asio::io_context& io, std::filesystem::path gpu_dir, std::vector<int> gpus, int gpu_count,
             PowerSpec spec);
  // Folds the server's energy into the folder's base (retire_power_record).
  ~PowerMeter();
  PowerMeter(const PowerMeter&) = delete;
  PowerMeter& operator=(const PowerMeter&) = delete;

  // A step began on every GPU of the server, drawing `power_w` each at `sm_mhz`;
  // `capped`: the power limit holds it back (sw_power_cap).
  void on_step(double power_w, double sm_mhz, bool capped);
  // Nothing to step: the GPUs fall back to idle.
  void on_idle();
  // The enforced power limit (the power-cap fault lowers it).
  void set_limit(double limit_w);
  const PowerSpec& spec() const { return m_spec; }

  // For /sim/truth: each GPU's energy counter and draw at this instant, computed as
  // nvidia-smi would read them at the same moment (with this server's exact figures).
  nlohmann::ordered_json truth();

private:
  struct Sample {
    std::chrono::steady_clock::time_point at;
    double extra_mj = 0.0;
    double busy_s = 0.0;
  };

  void advance();
  PowerRecord record(std::chrono::system_clock::time_point wall);
  void publish();
  void start_ticking();
  void tick();

  boost::asio::steady_timer m_timer;
  std::filesystem::path m_gpu_dir;
  std::vector<int> m_gpus;
  int m_gpu_count = 0;
  PowerSpec m_spec;
  unsigned long long m_start_time = 0;
  double m_power_w = 0.0;
  double m_sm_mhz = 0.0;
  double m_limit_w = 0.0;
  bool m_busy = false;
  bool m_capped = false;
  bool m_ticking = false;
  double m_extra_mj = 0.0;
  double m_busy_s = 0.0;
  std::chrono::steady_clock::time_point m_last;
  std::chrono::steady_clock::time_point m_idle_since;
  // The cumulative figures at each publication over the last second or so.
  std::deque<Sample> m_window;
};

} // namespace specctl::sim
