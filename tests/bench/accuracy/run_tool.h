// Shared by the end-to-end tests of bnn-experiment: runs the binary
// (BNN_EXPERIMENT_BINARY, set by CMake) with a command line, captures its
// output and exit code, and reads the JSON record it wrote.
#ifndef BNN_TESTS_BENCH_ACCURACY_RUN_TOOL_H_
#define BNN_TESTS_BENCH_ACCURACY_RUN_TOOL_H_

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <sys/wait.h>

#include <nlohmann/json.hpp>

namespace bnn::experiment::testing {

struct RunResult {
  int exit_code = -1;
  std::string output;  // stdout and stderr
};

// Runs `bnn-experiment args`, its stdout and stderr going to `log`.
inline RunResult RunTool(const std::string& args, const std::string& log) {
  const std::string command =
      std::string(BNN_EXPERIMENT_BINARY) + " " + args + " > " + log + " 2>&1";
  const int status = std::system(command.c_str());
  RunResult r;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  std::ifstream in(log);
  std::stringstream text;
  text << in.rdbuf();
  r.output = text.str();
  return r;
}

// The parsed file, or a discarded value if it is missing or malformed.
inline nlohmann::json ReadJson(const std::string& path) {
  std::ifstream in(path);
  return nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
}

inline void WriteText(const std::string& path, const std::string& text) {
  std::ofstream(path) << text;
}

}  // namespace bnn::experiment::testing

#endif  // BNN_TESTS_BENCH_ACCURACY_RUN_TOOL_H_
