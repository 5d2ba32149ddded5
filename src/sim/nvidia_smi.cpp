#include <specctl/sim/nvidia_smi.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <ctime>
#include <functional>
#include <optional>
#include <unistd.h>

namespace specctl::sim {
namespace {

// nvidia-smi's documented return values.
constexpr int k_exit_invalid_argument = 2;
constexpr int k_exit_not_found = 6;

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
};

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

// A column: its header (with units) and how to render a value.
template <typename Row> struct Column {
  std::string header;
  std::function<std::string(const Row&, bool units)> value;
};

struct GpuRow {
  int index = 0;
  long used_mib = 0;
  int processes = 0;
};

struct AppRow {
  const AppEntry* app = nullptr;
};

std::string mib(long value, bool units) {
  return units ? fmt::format("{} MiB", value) : fmt::format("{}", value);
}

std::optional<Column<GpuRow>> gpu_column(const std::string& field, const SmiSnapshot& s) {
  const auto& c = s.config;
  if (field == "index") {
    return Column<GpuRow>{"index", [](const GpuRow& r, bool) { return std::to_string(r.index); }};
  }
  if (field == "uuid" || field == "gpu_uuid") {
    return Column<GpuRow>{"uuid", [&c](const GpuRow& r, bool) { return gpu_uuid(c, r.index); }};
  }
  if (field == "name" || field == "gpu_name") {
    return Column<GpuRow>{"name", [&c](const GpuRow&, bool) { return c.name; }};
  }
  if (field == "memory.used") {
    return Column<GpuRow>{"memory.used [MiB]", [](const GpuRow& r, bool u) { return mib(r.used_mib, u); }};
  }
  if (field == "memory.total") {
    return Column<GpuRow>{"memory.total [MiB]", [&c](const GpuRow&, bool u) { return mib(c.memory_total_mib, u); }};
  }
  if (field == "memory.free") {
    return Column<GpuRow>{"memory.free [MiB]", [&c](const GpuRow& r, bool u) {
                            return mib(std::max(0L, c.memory_total_mib - r.used_mib), u);
                          }};
  }
  if (field == "count") {
    return Column<GpuRow>{"count", [&c](const GpuRow&, bool) { return std::to_string(c.count); }};
  }
  if (field == "driver_version") {
    return Column<GpuRow>{"driver_version", [&c](const GpuRow&, bool) { return c.driver_version; }};
  }
  if (field == "pci.bus_id" || field == "gpu_bus_id") {
    return Column<GpuRow>{"pci.bus_id", [](const GpuRow& r, bool) { return gpu_bus_id(r.index); }};
  }
  if (field == "utilization.gpu") {
    return Column<GpuRow>{"utilization.gpu [%]", [](const GpuRow& r, bool u) {
                            const int busy = r.processes > 0 ? 100 : 0;
                            return u ? fmt::format("{} %", busy) : std::to_string(busy);
                          }};
  }
  if (field == "temperature.gpu") {
    return Column<GpuRow>{"temperature.gpu",
                          [](const GpuRow& r, bool) { return std::to_string(r.processes > 0 ? 41 : 29); }};
  }
  if (field == "pstate") {
    return Column<GpuRow>{"pstate", [](const GpuRow&, bool) { return std::string("P0"); }};
  }
  if (field == "serial") {
    return Column<GpuRow>{"serial", [](const GpuRow& r, bool) { return fmt::format("165232400{:04d}", r.index); }};
  }
  return std::nullopt;
}

std::optional<Column<AppRow>> app_column(const std::string& field, const SmiSnapshot& s) {
  const auto& c = s.config;
  if (field == "pid") {
    return Column<AppRow>{"pid", [](const AppRow& r, bool) { return std::to_string(r.app->pid); }};
  }
  if (field == "process_name" || field == "name") {
    return Column<AppRow>{"process_name", [](const AppRow& r, bool) { return r.app->name; }};
  }
  if (field == "used_memory" || field == "used_gpu_memory") {
    return Column<AppRow>{"used_gpu_memory [MiB]", [](const AppRow& r, bool u) { return mib(r.app->used_mib, u); }};
  }
  if (field == "gpu_uuid") {
    return Column<AppRow>{"gpu_uuid", [&c](const AppRow& r, bool) { return gpu_uuid(c, r.app->gpu); }};
  }
  if (field == "gpu_name") {
    return Column<AppRow>{"gpu_name", [&c](const AppRow&, bool) { return c.name; }};
  }
  if (field == "gpu_bus_id") {
    return Column<AppRow>{"gpu_bus_id", [](const AppRow& r, bool) { return gpu_bus_id(r.app->gpu); }};
  }
  if (field == "gpu_serial") {
    return Column<AppRow>{"gpu_serial",
                          [](const AppRow& r, bool) { return fmt::format("165232400{:04d}", r.app->gpu); }};
  }
  return std::nullopt;
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
    const bool busy = row.processes > 0;
    out += fmt::format("| {:>3}  {:<29}  On  | {:>18} Off |                    0 |\n", row.index,
                       s.config.name.substr(0, 29), gpu_bus_id(row.index));
    out += fmt::format("| N/A   {:>2}C    P0            {:>3}W /  700W | {:>22} | {:>5}%      Default |\n",
                       busy ? 41 : 29, busy ? 312 : 76,
                       fmt::format("{}MiB / {}MiB", row.used_mib, s.config.memory_total_mib), busy ? 100 : 0);
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
                     "    --format=                      csv[,noheader][,nounits]\n",
                     ""};
  }
  const auto gpus = selected_gpus(*request, snapshot.config);
  if (!gpus) {
    return SmiOutput{k_exit_not_found, "No devices were found\n", ""};
  }
  std::vector<GpuRow> gpu_rows;
  for (int index : *gpus) {
    GpuRow row{.index = index};
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

namespace {

void write_all(int fd, std::string_view text) {
  while (!text.empty()) {
    const ssize_t written = ::write(fd, text.data(), text.size());
    if (written <= 0) {
      return;
    }
    text.remove_prefix(static_cast<std::size_t>(written));
  }
}

} // namespace

int run_nvidia_smi(std::span<const std::string> args) {
  const auto dir = resolve_gpu_dir("");
  auto config = load_gpu_config(dir);
  if (!config) {
    write_all(2, "specsim nvidia-smi: " + config.error() + "\n");
    return k_exit_invalid_argument;
  }
  const SmiSnapshot snapshot{.config = *config, .apps = live_app_entries(dir)};
  const auto output = render_nvidia_smi(args, snapshot);
  write_all(1, output.out);
  write_all(2, output.err);
  return output.exit_code;
}

} // namespace specctl::sim
