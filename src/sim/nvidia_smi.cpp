#include <specctl/sim/nvidia_smi.hpp>

#include "nvidia_smi_columns.hpp"

#include <fmt/format.h>
#include <specctl/util/try.hpp>

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <ctime>
#include <optional>

namespace specctl::sim {
namespace {

// nvidia-smi's documented return values.
constexpr int k_exit_invalid_argument = 2;
constexpr int k_exit_not_found = 6;
constexpr timespec k_no_wait{.tv_sec = 0, .tv_nsec = 0};

constexpr std::string_view k_invalid_combination =
    "Invalid combination of input arguments. Please run 'nvidia-smi -h' for help.\n";

struct Format {
  bool csv = false;
  bool header = true;
  bool units = true;
};

struct Request {
  std::optional<std::string> query_apps;
  std::optional<std::string> query_gpu;
  std::optional<Format> format;
  std::optional<std::string> ids;
  bool list = false;
  bool help = false;
  // -lms / -l: print again every interval until SIGINT or SIGTERM.
  std::optional<std::chrono::milliseconds> loop;
};

// -l without an interval.
constexpr std::chrono::seconds k_default_loop{5};

// A loop interval: digits only, short enough for a long.
bool is_interval(std::string_view text) {
  constexpr std::size_t k_max_digits = 9;
  return !text.empty() && text.size() <= k_max_digits && text.find_first_not_of("0123456789") == std::string::npos;
}

std::vector<std::string> split(std::string_view text, char separator) {
  std::vector<std::string> parts;
  std::size_t start = 0;
  while (start <= text.size()) {
    const auto end = std::min(text.find(separator, start), text.size());
    std::string part(text.substr(start, end - start));
    part.erase(0, part.find_first_not_of(' '));
    part.erase(part.find_last_not_of(' ') + 1);
    parts.push_back(std::move(part));
    start = end + 1;
  }
  return parts;
}

std::optional<Request> parse(std::span<const std::string> args) {
  Request request;
  for (std::size_t i = 0; i < args.size(); ++i) {
    std::string name = args[i];
    std::optional<std::string> value;
    if (const auto equals = name.find('='); equals != std::string::npos) {
      value = name.substr(equals + 1);
      name.resize(equals);
    }
    const auto take = [&]() -> std::optional<std::string> {
      if (value) {
        return value;
      }
      if (i + 1 < args.size()) {
        return args[++i];
      }
      return std::nullopt;
    };
    if (name == "--query-compute-apps" || name == "--query-gpu") {
      auto fields = take();
      if (!fields) {
        return std::nullopt;
      }
      (name == "--query-gpu" ? request.query_gpu : request.query_apps) = std::move(fields);
    } else if (name == "--format") {
      const auto text = take();
      if (!text) {
        return std::nullopt;
      }
      Format format;
      for (const auto& part : split(*text, ',')) {
        if (part == "csv") {
          format.csv = true;
        } else if (part == "noheader") {
          format.header = false;
        } else if (part == "nounits") {
          format.units = false;
        } else {
          return std::nullopt;
        }
      }
      if (!format.csv) {
        return std::nullopt;
      }
      request.format = format;
    } else if (name == "-i" || name == "--id") {
      request.ids = take();
      if (!request.ids) {
        return std::nullopt;
      }
    } else if (name == "-lms" || name == "--loop-ms" || name == "-l" || name == "--loop") {
      const bool seconds = name == "-l" || name == "--loop";
      // -l's interval is optional (5 s); a following argument is its interval only if a number.
      std::optional<std::string> text = value;
      if (!text && i + 1 < args.size() && is_interval(args[i + 1])) {
        text = args[++i];
      }
      if (!text && seconds) {
        text = std::to_string(k_default_loop.count());
      }
      if (!text || !is_interval(*text) || std::stol(*text) < 1) {
        return std::nullopt;
      }
      const long every = std::stol(*text);
      request.loop =
          seconds ? std::chrono::milliseconds{std::chrono::seconds{every}} : std::chrono::milliseconds{every};
    } else if (name == "-L" || name == "--list-gpus") {
      request.list = true;
    } else if (name == "-h" || name == "--help") {
      request.help = true;
    } else {
      return std::nullopt;
    }
  }
  if (request.query_apps && request.query_gpu) {
    return std::nullopt;
  }
  if ((request.query_apps || request.query_gpu) && !request.format) {
    return std::nullopt;
  }
  return request;
}

template <typename Row, typename Lookup>
SmiOutput render_csv(const std::string& fields, const Format& format, const std::vector<Row>& rows, Lookup lookup) {
  std::vector<Column<Row>> columns;
  for (const auto& field : split(fields, ',')) {
    auto column = lookup(field);
    if (!column) {
      return SmiOutput{k_exit_invalid_argument, "",
                       fmt::format("Field \"{}\" is not a valid field to query.\n\n", field)};
    }
    columns.push_back(std::move(*column));
  }
  SmiOutput output;
  const auto append_line = [&output](const std::vector<std::string>& cells) {
    for (std::size_t i = 0; i < cells.size(); ++i) {
      output.out += (i == 0 ? "" : ", ") + cells[i];
    }
    output.out += '\n';
  };
  if (format.header) {
    std::vector<std::string> headers;
    for (const auto& column : columns) {
      headers.push_back(column.header);
    }
    append_line(headers);
  }
  for (const auto& row : rows) {
    std::vector<std::string> cells;
    for (const auto& column : columns) {
      cells.push_back(column.value(row, format.units));
    }
    append_line(cells);
  }
  return output;
}

// The GPUs -i selects (indices or UUIDs), or every GPU.
std::optional<std::vector<int>> selected_gpus(const Request& request, const GpuConfig& config) {
  std::vector<int> gpus;
  if (!request.ids) {
    for (int i = 0; i < config.count; ++i) {
      gpus.push_back(i);
    }
    return gpus;
  }
  for (const auto& id : split(*request.ids, ',')) {
    int index = -1;
    for (int i = 0; i < config.count; ++i) {
      if (id == std::to_string(i) || id == gpu_uuid(config, i) || id == gpu_bus_id(i)) {
        index = i;
      }
    }
    if (index < 0) {
      return std::nullopt;
    }
    gpus.push_back(index);
  }
  return gpus;
}

std::string table(const SmiSnapshot& s, const std::vector<GpuRow>& rows, const std::vector<int>& gpus) {
  const std::time_t now = std::chrono::system_clock::to_time_t(s.now);
  std::tm local{};
  localtime_r(&now, &local);
  char stamp[64];
  std::strftime(stamp, sizeof stamp, "%a %b %e %H:%M:%S %Y", &local);
  const std::string rule =
      "+-----------------------------------------+------------------------+----------------------+\n";
  std::string out = fmt::format("{}       \n", stamp);
  out += "+-----------------------------------------------------------------------------------------+\n";
  out += fmt::format("| NVIDIA-SMI {:<22} Driver Version: {:<14} CUDA Version: {:<9}|\n", s.config.driver_version,
                     s.config.driver_version, s.config.cuda_version);
  out += "|-----------------------------------------+------------------------+----------------------+\n";
  out += "| GPU  Name                 Persistence-M | Bus-Id          Disp.A | Volatile Uncorr. ECC |\n";
  out += "| Fan  Temp   Perf          Pwr:Usage/Cap |           Memory-Usage | GPU-Util  Compute M. |\n";
  out += "|                                         |                        |               MIG M. |\n";
  out += "|=========================================+========================+======================|\n";
  for (const auto& row : rows) {
    const auto& g = row.reading;
    out += fmt::format("| {:>3}  {:<29}  On  | {:>18} Off |                    0 |\n", row.index,
                       s.config.name.substr(0, 29), gpu_bus_id(row.index));
    out += fmt::format("| N/A   {:>2.0f}C    P0            {:>3.0f}W / {:>4.0f}W | {:>22} | {:>5.0f}%      Default |\n",
                       g.temperature_c, g.power_w, g.limit_w,
                       fmt::format("{}MiB / {}MiB", row.used_mib, s.config.memory_total_mib), g.util_pct);
    out += "|                                         |                        |             Disabled |\n";
    out += rule;
  }
  out += "\n+-----------------------------------------------------------------------------------------+\n";
  out += "| Processes:                                                                              |\n";
  out += "|  GPU   GI   CI              PID   Type   Process name                        GPU Memory |\n";
  out += "|        ID   ID                                                               Usage      |\n";
  out += "|=========================================================================================|\n";
  bool any = false;
  for (const auto& app : s.apps) {
    if (std::ranges::find(gpus, app.gpu) == gpus.end()) {
      continue;
    }
    any = true;
    out += fmt::format("|  {:>3}   N/A  N/A  {:>15}      C   {:<33} {:>9}MiB |\n", app.gpu, app.pid,
                       app.name.substr(0, 33), app.used_mib);
  }
  if (!any) {
    out += "|  No running processes found                                                             |\n";
  }
  out += "+-----------------------------------------------------------------------------------------+\n";
  return out;
}

} // namespace

SmiOutput render_nvidia_smi(std::span<const std::string> args, const SmiSnapshot& snapshot) {
  const auto request = parse(args);
  if (!request) {
    return SmiOutput{k_exit_invalid_argument, "", std::string(k_invalid_combination)};
  }
  if (request->help) {
    return SmiOutput{0,
                     "NVIDIA System Management Interface -- specsim's stand-in\n\n"
                     "    -L,   --list-gpus              Display a list of GPUs connected to the system.\n"
                     "    -i,   --id=                    Target a specific GPU (index, UUID or PCI bus id).\n"
                     "    --query-gpu=                   index,uuid,name,memory.used,memory.total,memory.free,...\n"
                     "    --query-compute-apps=          pid,process_name,used_memory,gpu_uuid,...\n"
                     "    --format=                      csv[,noheader][,nounits]\n"
                     "    -l,   --loop=                  Probe until Ctrl+C at specified second interval.\n"
                     "    -lms, --loop-ms=               Probe until Ctrl+C at specified millisecond interval.\n",
                     ""};
  }
  const auto gpus = selected_gpus(*request, snapshot.config);
  if (!gpus) {
    return SmiOutput{k_exit_not_found, "No devices were found\n", ""};
  }
  const PowerSpec spec = power_spec(snapshot.config);
  std::vector<GpuRow> gpu_rows;
  for (int index : *gpus) {
    const auto at = static_cast<std::size_t>(index);
    GpuRow row{.index = index, .reading = at < snapshot.gpus.size() ? snapshot.gpus[at] : idle_reading(spec)};
    for (const auto& app : snapshot.apps) {
      if (app.gpu == index) {
        row.used_mib += app.used_mib;
        row.processes += 1;
      }
    }
    row.used_mib = std::min(row.used_mib, snapshot.config.memory_total_mib);
    gpu_rows.push_back(row);
  }
  if (request->query_gpu) {
    return render_csv(*request->query_gpu, *request->format, gpu_rows,
                      [&](const std::string& field) { return gpu_column(field, snapshot); });
  }
  if (request->query_apps) {
    std::vector<AppRow> app_rows;
    for (const auto& app : snapshot.apps) {
      if (std::ranges::find(*gpus, app.gpu) != gpus->end()) {
        app_rows.push_back(AppRow{&app});
      }
    }
    return render_csv(*request->query_apps, *request->format, app_rows,
                      [&](const std::string& field) { return app_column(field, snapshot); });
  }
  if (request->list) {
    SmiOutput output;
    for (int index : *gpus) {
      output.out +=
          fmt::format("GPU {}: {} (UUID: {})\n", index, snapshot.config.name, gpu_uuid(snapshot.config, index));
    }
    return output;
  }
  return SmiOutput{0, table(snapshot, gpu_rows, *gpus), ""};
}

std::optional<std::chrono::milliseconds> smi_loop_interval(std::span<const std::string> args) {
  const auto request = parse(args);
  return request ? request->loop : std::nullopt;
}

namespace {

void write_all(int fd, std::string_view text) {
  while (!text.empty()) {
    const ssize_t written = ::write(fd, text.data(), text.size());
    if (written < 0 && errno == EINTR) {
      continue;
    }
    if (written <= 0) {
      return;
    }
    text.remove_prefix(static_cast<std::size_t>(written));
  }
}

// Waits until `deadline` or SIGINT/SIGTERM (blocked, so one that arrives while a block
// is being sampled is not lost); true when a signal came.
bool wait_for_stop(const sigset_t& stops, std::chrono::steady_clock::time_point deadline) {
  while (true) {
    const auto left = deadline - std::chrono::steady_clock::now();
    if (left <= std::chrono::steady_clock::duration::zero()) {
      return ::sigtimedwait(&stops, nullptr, &k_no_wait) > 0;
    }
    const auto seconds = std::chrono::duration_cast<std::chrono::seconds>(left);
    const timespec timeout{.tv_sec = static_cast<time_t>(seconds.count()),
                           .tv_nsec = static_cast<long>(std::chrono::nanoseconds(left - seconds).count())};
    if (::sigtimedwait(&stops, nullptr, &timeout) > 0) {
      return true;
    }
    if (errno != EINTR && errno != EAGAIN) {
      return false;
    }
  }
}

} // namespace

std::expected<GpuSampler, std::string> GpuSampler::open() {
  auto dir = resolve_gpu_dir("");
  return GpuSampler(dir, SPECCTL_TRY(load_gpu_config(dir)));
}

SmiSnapshot GpuSampler::sample() const {
  SmiSnapshot snapshot{.config = m_config, .apps = live_app_entries(m_dir)};
  snapshot.gpus = read_gpu_power(m_dir, m_config.count, m_spec, snapshot.now);
  return snapshot;
}

int run_nvidia_smi(std::span<const std::string> args) {
  auto sampler = GpuSampler::open();
  if (!sampler) {
    write_all(2, "specsim nvidia-smi: " + sampler.error() + "\n");
    return k_exit_invalid_argument;
  }
  const auto sample = [&] { return sampler->sample(); };
  const auto request = parse(args);
  if (!request || !request->loop) {
    const auto output = render_nvidia_smi(args, sample());
    write_all(1, output.out);
    write_all(2, output.err);
    return output.exit_code;
  }
  // The loop: SIGINT and SIGTERM end it between blocks, exit 0.
  sigset_t stops;
  sigemptyset(&stops);
  sigaddset(&stops, SIGINT);
  sigaddset(&stops, SIGTERM);
  ::sigprocmask(SIG_BLOCK, &stops, nullptr);
  const bool csv_header = (request->query_gpu || request->query_apps) && request->format && request->format->header;
  const auto interval = *request->loop;
  auto next = std::chrono::steady_clock::now();
  for (bool first = true;; first = false) {
    const auto output = render_nvidia_smi(args, sample());
    if (output.exit_code != 0) {
      write_all(1, output.out);
      write_all(2, output.err);
      return output.exit_code;
    }
    std::string_view block = output.out;
    if (!first && csv_header) {
      block.remove_prefix(std::min(block.size(), block.find('\n') + 1));
    }
    // One write(2) a block: a reader of a redirected file sees it at once, whole.
    write_all(1, block);
    next += interval;
    // A stall longer than an interval restarts the schedule instead of a burst of blocks.
    if (const auto now = std::chrono::steady_clock::now(); next < now) {
      next = now;
    }
    if (wait_for_stop(stops, next)) {
      return 0;
    }
  }
}

} // namespace specctl::sim
