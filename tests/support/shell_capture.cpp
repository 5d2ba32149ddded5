#include "shell_capture.hpp"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <unistd.h>

namespace specctl::test {

std::vector<std::string> split_nul(const std::string& text) {
  std::vector<std::string> words;
  std::string current;
  for (char c : text) {
    if (c == '\0') {
      words.push_back(current);
      current.clear();
    } else {
      current += c;
    }
  }
  return words;
}

std::vector<std::string> run_shell(const std::string& line) {
  auto script = std::filesystem::temp_directory_path() / ("specctl-test-" + std::to_string(getpid()) + ".sh");
  {
    std::ofstream out(script);
    out << line << '\n';
  }
  std::string command = "/bin/sh " + script.string();
  FILE* pipe = popen(command.c_str(), "r");
  std::string output;
  if (pipe != nullptr) {
    char buffer[4096];
    std::size_t n = 0;
    while ((n = fread(buffer, 1, sizeof buffer, pipe)) > 0) {
      output.append(buffer, n);
    }
    pclose(pipe);
  }
  std::filesystem::remove(script);
  return split_nul(output);
}

} // namespace specctl::test
