// daemon_flags.h — flowclassd's command line, parsed by CLI11 (Debian's
// libcli11-dev).
//
// Contract
// --------
// ParseDaemonFlags(argv) reads the whole command line before anything else
// happens.  It either gives the flags to run with, or says what to print and
// with which exit code to stop:
//   --help               the help text (HelpText) on stdout, exit 0;
//   --version            "flowclassd VERSION" on stdout, exit 0;
//   a bad command line   "flowclassd: <what was wrong, naming the flag>" and
//                        the help text on stderr, exit kExitUsage (2): an
//                        unknown flag, a missing value, --set without
//                        KEY=VALUE, a --log-level or --log-format value that
//                        is not one of its names, -c with --check-config, no
//                        config file.
// Every flag but -c / --check-config is a config override: `overrides` holds
// them as "dotted.key=value" in command-line order (--rules F is
// rules.file=F, ...), so a later flag wins, as it does with --set.  Values
// are checked by the config parser (a bad one is a config error, exit 3),
// except --log-level and --log-format, checked here.
#ifndef FLOWCLASS_SERVER_DAEMON_FLAGS_H_
#define FLOWCLASS_SERVER_DAEMON_FLAGS_H_

#include <string>
#include <vector>

#include "server/log_options.h"

namespace flowclass {

// flowclassd's exit codes (docs/flowclassd.md, "Exit codes").
inline constexpr int kExitOk = 0;
inline constexpr int kExitInternal = 1;
inline constexpr int kExitUsage = 2;
inline constexpr int kExitConfig = 3;
inline constexpr int kExitEal = 4;
inline constexpr int kExitPort = 5;
inline constexpr int kExitMempool = 6;
inline constexpr int kExitRules = 7;
inline constexpr int kExitLcore = 8;
inline constexpr int kExitMetrics = 9;  // cannot serve /metrics
inline constexpr int kExitStore = 10;   // the rule store cannot be opened, read or restored

struct DaemonFlags {
  std::string config_path;             // -c FILE or --check-config FILE
  bool check_only = false;             // --check-config
  std::vector<std::string> overrides;  // "dotted.key=value", command-line order
};

struct ParsedFlags {
  bool run = false;   // false: print `out` to stdout and `err` to stderr, exit `exit_code`
  int exit_code = kExitOk;
  std::string out, err;
  DaemonFlags flags;  // when `run`
};

ParsedFlags ParseDaemonFlags(int argc, const char* const* argv);

// What --help prints.
std::string HelpText();

// The log settings the command line asks for (the last log.level= and
// log.format= override with a valid value; defaults otherwise): the log
// before the config file is read.
LogOptions LogOptionsFromOverrides(const std::vector<std::string>& overrides);

}  // namespace flowclass

#endif  // FLOWCLASS_SERVER_DAEMON_FLAGS_H_
