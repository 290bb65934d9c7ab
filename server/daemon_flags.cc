#include "server/daemon_flags.h"

#include <functional>
#include <memory>

#include "CLI/CLI.hpp"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/version.h"

namespace flowclass {
namespace {

constexpr const char* kDescription =
    "flowclassd: the DPDK dataplane process (docs/flowclassd.md)\n"
    "  run:      flowclassd -c FILE [OPTIONS]\n"
    "  validate: flowclassd --check-config FILE [--set KEY=VALUE]...";

constexpr const char* kFooter =
    "exit codes: 0 ok, 1 internal, 2 usage, 3 config, 4 EAL, 5 port,\n"
    "            6 mempool, 7 rules, 8 lcore, 9 metrics, 10 store\n"
    "(docs/flowclassd.md)";

// The flags on `app`, writing into `f` (and `version`).
void AddFlags(CLI::App& app, DaemonFlags* f, bool* version) {
  app.description(kDescription);
  app.footer(kFooter);
  app.get_formatter()->column_width(30);
  app.set_help_flag("-h,--help", "print this text and exit 0");
  CLI::Option* config = app.add_option("-c,--config", f->config_path,
                                       "YAML configuration (see docs/flowclassd.md)");
  config->type_name("FILE");
  app.add_option_function<std::string>(
         "--check-config",
         [f](const std::string& path) {
           f->config_path = path;
           f->check_only = true;
         },
         "validate FILE (and its rules file), print a summary and exit 0,\n"
         "or 3/7 on error")
      ->type_name("FILE")
      ->excludes(config);
  // Overrides keep their command-line order: each is appended as it is
  // parsed (trigger_on_parse), whichever flag it came from.
  auto override_flag = [&app, f](const std::string& name, const std::string& key,
                                 const std::string& type, const std::string& help,
                                 std::function<std::string(const std::string&)> value) {
    return app
        .add_option_function<std::string>(
            name, [f, key, value](const std::string& v) { f->overrides.push_back(key + value(v)); },
            help)
        ->type_name(type)
        ->trigger_on_parse()
        ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  };
  auto as_is = [](const std::string& v) { return v; };
  override_flag("--set", "", "KEY=VALUE",
                "override a config key, dotted path, value in YAML syntax\n"
                "(e.g. --set pmd.lcores=[1,2], --set ports.0.args=rx_pcap=in.pcap);\n"
                "repeatable",
                as_is)
      ->check(CLI::Validator(
          [](std::string& v) -> std::string {
            if (v.find('=') == std::string::npos || v.front() == '=')
              return absl::StrCat("needs KEY=VALUE, got \"", v, "\"");
            return "";
          },
          ""));
  override_flag("--rules", "rules.file=", "FILE", "same as --set rules.file=FILE", as_is);
  override_flag("--lcores", "pmd.lcores=", "L,L", "same as --set pmd.lcores=[L,L]",
                [](const std::string& v) { return absl::StrCat("[", v, "]"); });
  override_flag("--file-prefix", "eal.file_prefix=", "NAME", "same as --set eal.file_prefix=NAME",
                as_is);
  override_flag("--stats-interval-ms", "stats.interval_ms=", "N",
                "same as --set stats.interval_ms=N", as_is);
  override_flag("--duration-s", "run.duration_s=", "N", "same as --set run.duration_s=N", as_is);
  override_flag("--store", "store.path=", "DIR",
                "same as --set store.path=DIR (the durable rule store;\n"
                "without one rules live in memory only)",
                as_is);
  app.add_flag_callback(
         "--recover-to-last-consistent",
         [f] { f->overrides.push_back("store.recover_to_last_consistent=true"); },
         "same as --set store.recover_to_last_consistent=true: a damaged\n"
         "store starts from its last consistent state instead of refusing to start")
      ->trigger_on_parse();
  // Values from a fixed set are checked here (exit 2 naming the flag).
  auto one_of = [](const auto& names) {
    return CLI::IsMember(std::vector<std::string>(names.begin(), names.end()));
  };
  override_flag("--log-level", "log.level=", "LEVEL",
                "same as --set log.level=LEVEL: the least severe log lines\n"
                "printed (default info)",
                as_is)
      ->check(one_of(kLogLevelNames));
  override_flag("--log-format", "log.format=", "FORMAT",
                "same as --set log.format=FORMAT: text (TIMESTAMP LEVEL flowclassd:\n"
                "MESSAGE, the default) or json (one object a line: ts, level, msg)",
                as_is)
      ->check(one_of(kLogFormatNames));
  app.add_flag("--version", *version, "print flowclassd's version and exit 0");
}

}  // namespace

std::string HelpText() {
  CLI::App app("", "flowclassd");
  DaemonFlags f;
  bool version = false;
  AddFlags(app, &f, &version);
  return app.help();
}

ParsedFlags ParseDaemonFlags(int argc, const char* const* argv) {
  ParsedFlags r;
  CLI::App app("", "flowclassd");
  bool version = false;
  AddFlags(app, &r.flags, &version);
  auto usage_error = [&](const std::string& what) {
    r.exit_code = kExitUsage;
    r.err = absl::StrCat("flowclassd: ", what, "\n", app.help());
    return r;
  };
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    r.out = app.help();
    return r;
  } catch (const CLI::ParseError& e) {
    return usage_error(e.what());
  }
  if (version) {
    r.out = absl::StrCat("flowclassd ", kFlowclassVersion, "\n");
    return r;
  }
  if (r.flags.config_path.empty()) return usage_error("no config file (-c FILE)");
  r.run = true;
  return r;
}

LogOptions LogOptionsFromOverrides(const std::vector<std::string>& overrides) {
  LogOptions o;
  for (const std::string& ov : overrides) {
    if (absl::StartsWith(ov, "log.level=")) {
      if (std::optional<LogLevel> l = ParseLogLevel(ov.substr(10))) o.level = *l;
    } else if (absl::StartsWith(ov, "log.format=")) {
      if (std::optional<LogFormat> f = ParseLogFormat(ov.substr(11))) o.format = *f;
    }
  }
  return o;
}

}  // namespace flowclass
