// specsim's `dcgmi dmon`. The output's shape is DCGM's dcgmi/DeviceMonitor.cpp: the
// header (SetHeaderForOutput: "#Entity" / "ID" in 10 columns, then each field's short
// name / unit in its format's width + 6, plus 2) before the first block and again
// after every 14; rows (PrintMetricsRow) "GPU <id>" in 10 columns, each value in the
// field's column; doubles "{:.3f}", integers whole, blanks "N/A"; a block flushed at
// once; SIGINT: "\n\ndmon was stopped do to receiving a signal\n" (sic) and exit 0.
// The fields' short names, units, types and widths are dcgmlib/src/dcgm_fields.cpp's.
// Values come from the same readings as specsim's nvidia-smi, through its query.

#include <specctl/sim/dcgmi.hpp>
#include <specctl/sim/gpu_power.hpp>
#include <specctl/sim/gpu_state.hpp>
#include <specctl/sim/nvidia_smi.hpp>

#include "nvidia_smi_columns.hpp"

#include <fmt/format.h>

#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cmath>
#include <sstream>

namespace specctl::sim {

namespace {

constexpr int k_dmon_exit_error = 255;
constexpr int k_dmon_header_every = 14;

struct DmonField {
  int id;
  const char* short_name;
  const char* unit;
  int width;
  bool is_double;
  // The nvidia-smi field that reads the same value here.
  const char* smi_field;
};

const std::vector<DmonField>& dmon_fields() {
  static const std::vector<DmonField> fields = {
      {100, "SMCLK", "", 5, false, "clocks.sm"},     {112, "DVCCTR", "", 20, false, "clocks_event_reasons.active"},
      {113, "SMMAX", "", 5, false, "clocks.max.sm"}, {150, "TMPTR", "C", 5, false, "temperature.gpu"},
      {155, "POWER", "W", 10, true, "power.draw"},   {156, "TOTEC", "mJ", 16, false, "total_energy_consumption"},
      {160, "PMLMT", "W", 10, true, "power.limit"},  {203, "GPUTL", "", 10, false, "utilization.gpu"},
      {250, "FBTTL", "", 10, false, "memory.total"}, {252, "FBUSD", "", 10, false, "memory.used"},
  };
  return fields;
}

const DmonField* dmon_field(int id) {
  for (const auto& field : dmon_fields()) {
    if (field.id == id) {
      return &field;
    }
  }
  return nullptr;
}

std::optional<int> dmon_whole(std::string_view text) {
  int value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc{} || end != text.data() + text.size() || value < 0) {
    return std::nullopt;
  }
  return value;
}

// An nvidia-smi value (no units) as dmon prints the field.
std::string dmon_value(const DmonField& field, const std::string& smi) {
  if (smi.empty() || smi.front() == '[') {
    return "N/A";
  }
  if (smi.starts_with("0x")) {
    std::uint64_t mask = 0;
    std::from_chars(smi.data() + 2, smi.data() + smi.size(), mask, 16);
    return std::to_string(mask);
  }
  double value = 0;
  auto [end, ec] = std::from_chars(smi.data(), smi.data() + smi.size(), value);
  if (ec != std::errc{} || !std::isfinite(value)) {
    return "N/A";
  }
  return field.is_double ? fmt::format("{:.3f}", value) : fmt::format("{}", std::llround(value));
}

void dmon_write(int fd, std::string_view text) {
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

} // namespace

std::expected<DmonRequest, std::string> parse_dmon(std::span<const std::string> args) {
  if (args.empty() || args.front() != "dmon") {
    return std::unexpected("only `dcgmi dmon` is simulated");
  }
  DmonRequest request;
  for (std::size_t i = 1; i < args.size(); ++i) {
    const std::string& name = args[i];
    if (i + 1 >= args.size()) {
      return std::unexpected(fmt::format("{} needs a value", name));
    }
    const std::string& value = args[++i];
    if (name == "-e" || name == "--field-id") {
      std::istringstream ids(value);
      for (std::string id; std::getline(ids, id, ',');) {
        auto number = dmon_whole(id);
        if (!number || dmon_field(*number) == nullptr) {
          return std::unexpected(fmt::format("field id {} is not simulated", id));
        }
        request.fields.push_back(*number);
      }
    } else if (name == "-d" || name == "--delay") {
      auto ms = dmon_whole(value);
      if (!ms || *ms < 1) {
        return std::unexpected("invalid delay " + value);
      }
      request.delay = std::chrono::milliseconds(*ms);
    } else if (name == "-c" || name == "--count") {
      auto count = dmon_whole(value);
      if (!count) {
        return std::unexpected("invalid count " + value);
      }
      request.count = *count;
    } else if (name == "-i" || name == "--entity-id") {
      request.entities = value;
    } else {
      return std::unexpected("unknown option " + name);
    }
  }
  if (request.fields.empty()) {
    return std::unexpected("Either field group ID or a list of field IDs must be provided. "
                           "See dcgmi dmon --help for usage.");
  }
  return request;
}

std::string dmon_header(const DmonRequest& request) {
  std::string names = fmt::format("{:<10}", "#Entity");
  std::string units = fmt::format("{:<10}", "ID");
  for (int id : request.fields) {
    const DmonField& field = *dmon_field(id);
    names += fmt::format("{:<{}}", field.short_name, field.width + 6 + 2);
    units += fmt::format("{:<{}}", field.unit, field.width + 6 + 2);
  }
  return names + "\n" + units + "\n";
}

SmiOutput dmon_block(const DmonRequest& request, const SmiSnapshot& snapshot) {
  // The same instant through specsim's nvidia-smi: one CSV row a GPU, no units.
  std::vector<std::string> smi_fields{"index"};
  for (int id : request.fields) {
    std::string name = dmon_field(id)->smi_field;
    if (id == 112 && driver_major(snapshot.config) < 535) {
      name = "clocks_throttle_reasons.active";
    }
    smi_fields.push_back(name);
  }
  std::string query = "--query-gpu=";
  for (std::size_t i = 0; i < smi_fields.size(); ++i) {
    query += (i > 0 ? "," : "") + smi_fields[i];
  }
  std::vector<std::string> args{query, "--format=csv,noheader,nounits"};
  if (request.entities) {
    args.insert(args.end(), {"-i", *request.entities});
  }
  const SmiOutput smi = render_nvidia_smi(args, snapshot);
  if (smi.exit_code != 0) {
    return SmiOutput{k_dmon_exit_error, "", "Error: " + (smi.out.empty() ? smi.err : smi.out)};
  }
  std::string out;
  std::istringstream lines(smi.out);
  for (std::string line; std::getline(lines, line);) {
    std::vector<std::string> cells;
    std::istringstream in(line);
    for (std::string cell; std::getline(in, cell, ',');) {
      const auto first = cell.find_first_not_of(' ');
      cells.push_back(first == std::string::npos ? "" : cell.substr(first));
    }
    if (cells.size() != smi_fields.size()) {
      continue;
    }
    out += fmt::format("{:<10}", "GPU " + cells[0]);
    for (std::size_t i = 0; i < request.fields.size(); ++i) {
      const DmonField& field = *dmon_field(request.fields[i]);
      out += fmt::format("{:<{}}", dmon_value(field, cells[i + 1]), field.width + 6 + 2);
    }
    out += "\n";
  }
  return SmiOutput{0, out, ""};
}

int run_dcgmi(std::span<const std::string> args) {
  auto request = parse_dmon(args);
  if (!request) {
    dmon_write(1, "Error: " + request.error() + "\n");
    return k_dmon_exit_error;
  }
  auto sampler = GpuSampler::open();
  if (!sampler) {
    dmon_write(2, "specsim dcgmi: " + sampler.error() + "\n");
    return k_dmon_exit_error;
  }
  const auto sample = [&] { return sampler->sample(); };
  // SIGINT is waited for between blocks; SIGTERM keeps its default action (death).
  sigset_t stops;
  sigemptyset(&stops);
  sigaddset(&stops, SIGINT);
  ::sigprocmask(SIG_BLOCK, &stops, nullptr);
  dmon_write(1, dmon_header(*request));
  int since_header = 0;
  for (int block = 1;; ++block) {
    const auto output = dmon_block(*request, sample());
    if (output.exit_code != 0) {
      dmon_write(1, output.err);
      return output.exit_code;
    }
    dmon_write(1, output.out);
    if (request->count > 0 && block >= request->count) {
      return 0;
    }
    const auto delay = request->delay;
    const auto seconds = std::chrono::duration_cast<std::chrono::seconds>(delay);
    const timespec timeout{.tv_sec = static_cast<time_t>(seconds.count()),
                           .tv_nsec = static_cast<long>(std::chrono::nanoseconds(delay - seconds).count())};
    int got = -1;
    do {
      got = ::sigtimedwait(&stops, nullptr, &timeout);
    } while (got < 0 && errno == EINTR);
    if (got == SIGINT) {
      dmon_write(1, "\n\ndmon was stopped do to receiving a signal\n");
      return 0;
    }
    if (since_header == k_dmon_header_every) {
      dmon_write(1, dmon_header(*request));
      since_header = 0;
    }
    ++since_header;
  }
}

} // namespace specctl::sim
