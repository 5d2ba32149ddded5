#include <specctl/sim/dcgmi.hpp>
#include <specctl/sim/nvidia_smi.hpp>
#include <specctl/sim/specsim.hpp>
#include <specctl/sim/workers.hpp>
#include <specctl/util/error.hpp>

#include <fmt/format.h>

#include <unistd.h>

#include <exception>
#include <string>
#include <string_view>
#include <vector>

namespace specctl::sim {
namespace {

void print_error(std::string_view message) {
  const std::string line = fmt::format("specsim: error: {}\n", message);
  (void)!::write(2, line.data(), line.size());
}

void print_text(int fd, std::string_view text) {
  while (!text.empty()) {
    const ssize_t written = ::write(fd, text.data(), text.size());
    if (written <= 0) {
      return;
    }
    text.remove_prefix(static_cast<std::size_t>(written));
  }
}

std::string_view basename_of(std::string_view path) {
  const auto slash = path.rfind('/');
  return slash == std::string_view::npos ? path : path.substr(slash + 1);
}

int dispatch(int argc, char** argv) {
  if (is_worker_process()) {
    return run_worker();
  }
  std::vector<std::string> args(argv + (argc > 0 ? 1 : 0), argv + argc);
  const std::string_view program = argc > 0 ? basename_of(argv[0]) : std::string_view("specsim");
  if (program == "nvidia-smi") {
    return run_nvidia_smi(args);
  }
  if (!args.empty() && args.front() == "nvidia-smi") {
    return run_nvidia_smi(std::span(args).subspan(1));
  }
  if (program == "dcgmi") {
    return run_dcgmi(args);
  }
  if (!args.empty() && args.front() == "dcgmi") {
    return run_dcgmi(std::span(args).subspan(1));
  }
  auto options = parse_args(args);
  if (!options && options.error().style == ArgStyle::llamacpp) {
    // common_params_parse prints the exception text; llama-server's main returns 1.
    print_text(2, options.error().message + "\n");
    return k_exit_failures;
  }
  if (!options) {
    // argparse's shape: the usage, then "prog: error: message", exit 2.
    print_text(2, usage_text());
    print_error(options.error().message);
    return k_exit_bad_input;
  }
  if (options->help) {
    print_text(1, help_text());
    return k_exit_ok;
  }
  return run_server(*options);
}

} // namespace

int main(int argc, char** argv) {
  try {
    return dispatch(argc, argv);
  } catch (const Error& error) {
    print_error(error.what());
    return error.kind() == ErrorKind::bad_input ? k_exit_bad_input : k_exit_failures;
  } catch (const std::exception& error) {
    print_error(error.what());
    return k_exit_failures;
  }
}

} // namespace specctl::sim
