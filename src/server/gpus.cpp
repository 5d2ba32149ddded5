#include <specctl/server/gpus.hpp>

#include <specctl/util/parse.hpp>
#include <specctl/util/shell.hpp>
#include <specctl/util/text.hpp>
#include <specctl/util/try.hpp>

#include <fmt/format.h>
#include <sstream>

namespace specctl::server {

namespace {

constexpr util::Duration k_nvidia_smi_timeout = std::chrono::seconds{30};

std::vector<std::string> split_csv_line(std::string_view line) {
  std::vector<std::string> fields;
  std::size_t start = 0;
  while (true) {
    auto comma = line.find(',', start);
    fields.push_back(
        util::trim(line.substr(start, comma == std::string_view::npos ? std::string_view::npos : comma - start)));
    if (comma == std::string_view::npos) {
      return fields;
    }
    start = comma + 1;
  }
}

bool not_available(const std::string& text) {
  return text.empty() || text.front() == '[' || text == "N/A";
}

std::vector<std::string_view> lines_of(std::string_view csv) {
  std::vector<std::string_view> lines;
  std::size_t start = 0;
  while (start < csv.size()) {
    auto end = csv.find('\n', start);
    std::string_view line = csv.substr(start, end == std::string_view::npos ? std::string_view::npos : end - start);
    if (!util::trim_view(line).empty()) {
      lines.push_back(line);
    }
    if (end == std::string_view::npos) {
      break;
    }
    start = end + 1;
  }
  return lines;
}

} // namespace

std::expected<std::vector<GpuInfo>, std::string> parse_gpu_query(std::string_view csv) {
  std::vector<GpuInfo> out;
  for (auto line : lines_of(csv)) {
    auto fields = split_csv_line(line);
    auto index = fields.size() == 4 ? util::parse_number<int>(fields[0]) : std::nullopt;
    if (!index) {
      return std::unexpected(fmt::format("unexpected nvidia-smi --query-gpu line \"{}\"", util::trim_view(line)));
    }
    GpuInfo gpu{*index, fields[1], std::nullopt, std::nullopt};
    if (!not_available(fields[2])) {
      gpu.used_mib = util::parse_number<std::uint64_t>(fields[2]);
    }
    if (!not_available(fields[3])) {
      gpu.total_mib = util::parse_number<std::uint64_t>(fields[3]);
    }
    out.push_back(std::move(gpu));
  }
  return out;
}

std::expected<std::vector<ComputeApp>, std::string> parse_compute_apps(std::string_view csv) {
  std::vector<ComputeApp> out;
  for (auto line : lines_of(csv)) {
    auto fields = split_csv_line(line);
    // A process name may itself contain commas: the pid is first and the two last fields are fixed.
    if (fields.size() < 4) {
      return std::unexpected(
          fmt::format("unexpected nvidia-smi --query-compute-apps line \"{}\"", util::trim_view(line)));
    }
    auto pid = util::parse_number<int>(fields[0]);
    if (!pid) {
      return std::unexpected(
          fmt::format("unexpected nvidia-smi --query-compute-apps line \"{}\"", util::trim_view(line)));
    }
    ComputeApp app;
    app.pid = *pid;
    std::vector<std::string> name_parts(fields.begin() + 1, fields.end() - 2);
    app.name = util::join(name_parts, ",");
    const std::string& memory = fields[fields.size() - 2];
    if (!not_available(memory)) {
      app.used_mib = util::parse_number<std::uint64_t>(memory);
    }
    app.gpu_uuid = fields.back();
    out.push_back(std::move(app));
  }
  return out;
}

std::expected<bool, Error> has_nvidia_smi(remote::Host& host) {
  return SPECCTL_TRY(host.exec("command -v nvidia-smi >/dev/null 2>&1")).exit_code == 0;
}

std::expected<GpuSnapshot, Error> query_gpus(remote::Host& host, const std::optional<std::vector<int>>& indices) {
  std::string select;
  if (indices) {
    std::vector<std::string> ids;
    for (int index : *indices) {
      ids.push_back(std::to_string(index));
    }
    select = " -i " + util::shell_quote(util::join(ids, ","));
  }
  std::string line =
      fmt::format("command -v nvidia-smi >/dev/null 2>&1 || {{ echo 'nvidia-smi: not found' >&2; exit 127; }}; "
                  "nvidia-smi --query-gpu=index,uuid,memory.used,memory.total --format=csv,noheader,nounits{0} && "
                  "echo '--apps--' && nvidia-smi --query-compute-apps=pid,process_name,used_memory,gpu_uuid "
                  "--format=csv,noheader,nounits{0}",
                  select);
  auto result = host.exec(line, k_nvidia_smi_timeout);
  if (!result) {
    return std::unexpected(result.error());
  }
  if (result->timed_out) {
    return std::unexpected(Error(fmt::format("{}: nvidia-smi did not answer within {}", host.describe(),
                                             util::format_duration(k_nvidia_smi_timeout)),
                                 ErrorKind::timed_out));
  }
  if (result->exit_code != 0) {
    return std::unexpected(Error(fmt::format("{}: nvidia-smi failed (exit {}): {}", host.describe(), result->exit_code,
                                             util::first_line(result->err.empty() ? result->out : result->err))));
  }
  auto split = result->out.find("--apps--\n");
  if (split == std::string::npos) {
    split = result->out.find("--apps--");
  }
  std::string_view out = result->out;
  auto gpus = parse_gpu_query(out.substr(0, split));
  auto apps = parse_compute_apps(split == std::string::npos ? std::string_view() : out.substr(split + 8));
  if (!gpus || !apps) {
    return std::unexpected(Error(fmt::format("{}: {}", host.describe(), !gpus ? gpus.error() : apps.error())));
  }
  GpuSnapshot snapshot{std::move(*gpus), std::move(*apps)};
  for (auto& app : snapshot.apps) {
    for (const auto& gpu : snapshot.gpus) {
      if (gpu.uuid == app.gpu_uuid) {
        app.gpu_index = gpu.index;
      }
    }
  }
  // With -i, nvidia-smi lists only those GPUs' processes; without the join an app belongs to an unseen GPU.
  if (indices) {
    std::erase_if(snapshot.apps, [](const ComputeApp& app) { return !app.gpu_index; });
  }
  return snapshot;
}

} // namespace specctl::server
