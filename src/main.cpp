// sluice command line: run, check, --version, --help. Everything else lives in the modules.
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

#include <spdlog/spdlog.h>

#include "sluice/config/loader.hpp"
#include "sluice/runtime/runtime.hpp"
#include "sluice/telemetry/access_log.hpp"

namespace {

constexpr std::string_view default_config = "conf/sluice.toml";

constexpr std::string_view usage = R"(sluice - an L7 HTTP/1.1 reverse-proxy load balancer

Usage:
  sluice run [--config FILE]      run the proxy (default config: conf/sluice.toml)
  sluice [--config FILE]          same as run
  sluice check [--config] FILE    validate FILE; print every error as FILE:LINE:COL: key: message
  sluice --version                print the version
  sluice --help                   this text

Signals: SIGHUP reloads the config file; SIGTERM/SIGINT shut down gracefully.
)";

struct Options {
  std::string command = "run";
  std::string config{default_config};
  bool config_given = false;
  std::string error;
};

Options parse_args(int argc, char** argv) {
  Options o;
  std::vector<std::string_view> args(argv + 1, argv + argc);
  std::size_t i = 0;
  if (i < args.size() && !args[i].starts_with("-")) o.command = std::string(args[i++]);
  for (; i < args.size(); ++i) {
    const auto a = args[i];
    if (a == "--config" || a == "-c") {
      if (i + 1 >= args.size()) {
        o.error = "--config needs a file name";
        return o;
      }
      o.config = std::string(args[++i]);
      o.config_given = true;
    } else if (a.starts_with("--config=")) {
      o.config = std::string(a.substr(9));
      o.config_given = true;
    } else if (a == "--help" || a == "-h") {
      o.command = "help";
    } else if (a == "--version" || a == "-V") {
      o.command = "version";
    } else if (!a.starts_with("-") && o.command == "check" && !o.config_given) {
      o.config = std::string(a);
      o.config_given = true;
    } else {
      o.error = "unknown argument '" + std::string(a) + "'";
      return o;
    }
  }
  return o;
}

int check(const std::string& path) {
  const auto result = sluice::config::load_file(path);
  if (!result.ok()) {
    for (const auto& e : result.errors) std::printf("%s\n", e.to_string().c_str());
    std::fprintf(stderr, "%s: %zu error(s)\n", path.c_str(), result.errors.size());
    return 1;
  }
  std::printf("%s\n", sluice::config::summary(*result.config).c_str());
  return 0;
}

int run(const std::string& path) {
  auto result = sluice::config::load_file(path);
  if (!result.ok()) {
    for (const auto& e : result.errors) std::fprintf(stderr, "%s\n", e.to_string().c_str());
    std::fprintf(stderr, "sluice: %s has %zu error(s); not starting\n", path.c_str(), result.errors.size());
    return 1;
  }
  sluice::configure_error_log(result.config->log.level);
  sluice::Runtime runtime(std::move(*result.config), path);
  return runtime.run();
}

}  // namespace

int main(int argc, char** argv) {
  const auto o = parse_args(argc, argv);
  if (!o.error.empty()) {
    std::fprintf(stderr, "sluice: %s\n\n%.*s", o.error.c_str(), static_cast<int>(usage.size()), usage.data());
    return 2;
  }
  if (o.command == "help") {
    std::printf("%.*s", static_cast<int>(usage.size()), usage.data());
    return 0;
  }
  if (o.command == "version") {
    std::printf("sluice %s\n", SLUICE_VERSION);
    return 0;
  }
  if (o.command == "check") return check(o.config);
  if (o.command == "run") return run(o.config);
  std::fprintf(stderr, "sluice: unknown command '%s'\n\n%.*s", o.command.c_str(),
               static_cast<int>(usage.size()), usage.data());
  return 2;
}
