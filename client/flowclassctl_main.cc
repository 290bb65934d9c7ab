// flowclassctl — the flowclass command-line tool.
//
// Subcommands: replay and completion (offline, here) and the flowclass.v1
// client commands add-rules, replace-rules, diff-rules, sync-rules, del-rules,
// dump-rules, stats, config, trace, lookup-impl, ... (client/rpc/ctl_commands.h).
// docs/flowclassctl.md documents them all.
//
// Exit codes: 0 success; 1 replay finished with mismatches (diff-rules: the
// rule sets differ); 2 usage error;
// 3 bad input (a file that cannot be read or parsed, a rejected rule set);
// 4 the server rejected the request; 5 the server could not be reached.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <iterator>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "client/completion.h"
#include "client/replay.h"
#include "common/version.h"
#if FLOWCLASS_WITH_RPC
#include "client/rpc/ctl_commands.h"
#else
// Built without the gRPC client (the classifier-only sanitizer build):
// only the offline commands exist.
namespace flowclass {
inline constexpr char kRpcCommandsHelp[] = "";
inline bool IsRpcCommand(absl::string_view) { return false; }
inline std::vector<CompletionCommand> RpcCompletionCommands() { return {}; }
inline int RunRpcCommand(absl::string_view, std::vector<absl::string_view>) { return 2; }
}  // namespace flowclass
#endif
#include "dataplane/dataplane.h"
#include "dataplane/dpcls/subtable_lookup.h"

namespace flowclass {
namespace {

constexpr int kExitOk = 0;
constexpr int kExitMismatch = 1;
constexpr int kExitUsage = 2;
constexpr int kExitBadInput = 3;

constexpr char kMainHelp[] =
    "usage: flowclassctl <command> [options]\n"
    "\n"
    "commands:\n"
    "  replay      classify a ClassBench trace or a pcap offline against a rule file\n"
    "%s"
    "\n"
    "  version     print flowclassctl's version (also --version)\n"
    "  completion bash  print a bash completion script for flowclassctl\n"
    "              (load it: source <(flowclassctl completion bash))\n"
    "\n"
    "Run 'flowclassctl <command> --help' for the options of a command.\n"
    "Environment (an option wins): FLOWCLASS_SERVER, FLOWCLASS_SERVERS,\n"
    "FLOWCLASS_DISCOVER, FLOWCLASS_ROLLOUT, FLOWCLASS_PLAINTEXT, FLOWCLASS_CA,\n"
    "FLOWCLASS_CERT, FLOWCLASS_KEY, FLOWCLASS_SERVER_NAME, FLOWCLASS_TOKEN_FILE,\n"
    "FLOWCLASS_TIMEOUT_MS, FLOWCLASS_OUTPUT.\n"
    "Exit codes: 0 ok, 1 replay mismatches (diff-rules: differences), 2 usage\n"
    "            error, 3 bad input,\n"
    "            4 rejected by the server, 5 server unreachable.\n";

// kMainHelp with the gRPC commands filled in.
const std::string& MainHelp() {
  static const std::string* h = [] {
    char buf[4096];
    std::snprintf(buf, sizeof(buf), kMainHelp, kRpcCommandsHelp);
    return new std::string(buf);
  }();
  return *h;
}

constexpr char kReplayHelp[] =
    "usage: flowclassctl replay [options] RULES TRACE\n"
    "       flowclassctl replay [options] RULES --pcap FILE\n"
    "\n"
    "Loads RULES (ClassBench filter file or native rule text), builds one flow\n"
    "key per line of TRACE (ClassBench trace: sip dip sport dport proto\n"
    "expected), classifies the keys in bursts of 32 through the PMD pipeline\n"
    "and checks every verdict against the expected column: the id of the\n"
    "first matching rule (a ClassBench rule's 1-based position; a native\n"
    "rule's line, comments included, or its id=); 0 or greater than every\n"
    "rule id = no match.  Only the classification loop is timed, on one\n"
    "thread.\n"
    "\n"
    "With --pcap FILE instead of TRACE: every frame of the capture (libpcap;\n"
    "Ethernet link type) is parsed by the PMD's parser, and its expected rule\n"
    "is the rule table's own lookup of the parsed key (the slow path, no\n"
    "cache): a mismatch is a cache or pipeline that disagrees with it.\n"
    "\n"
    "options:\n"
    "  --format auto|classbench|native   rule file format (default auto:\n"
    "                                    ClassBench when the first rule line\n"
    "                                    starts with '@')\n"
    "  --repeat N                        passes over the trace (default 1)\n"
    "  --pcap FILE                       classify the frames of FILE (above)\n"
    "  --in-port N                       with --pcap: the frames' in_port\n"
    "                                    (default 0)\n"
    "  --top-rules N                     print the N rules with the most hits\n"
    "                                    over all passes, and the packets no\n"
    "                                    rule matched (default 10 with --pcap,\n"
    "                                    0 with a trace)\n"
    "  --megaflows on|off                the cache hierarchy (default on); off:\n"
    "                                    every packet is a slow-path lookup\n"
    "                                    (RuleTable), nothing is cached or\n"
    "                                    installed (miss with success upcall =\n"
    "                                    packets, megaflows 0) and --emc, --smc\n"
    "                                    and --cd have no effect\n"
    "  --allow-empty-rules               replay a RULES file without rules\n"
    "                                    (refused otherwise: every trace line\n"
    "                                    would pass as \"no match\")\n"
    "  --emc on|off                      exact-match cache (default on)\n"
    "  --emc-insert-inv-prob N           insert into the EMC with\n"
    "                                    probability 1/N (default 100, 0 never)\n"
    "  --smc on|off|auto                 signature match cache (default auto:\n"
    "                                    used while it saves cycles per packet,\n"
    "                                    as flowclassd's pipeline.smc)\n"
    "  --cd on|off|auto                  Cuckoo Distributor (default auto)\n"
    "  --ranking-interval-ms N           subtable re-ranking and CD decision\n"
    "                                    interval (default 1000)\n"
    "  --rare-mask-subtables N           mask-explosion defence threshold, as\n"
    "                                    flowclassd's pipeline.rare_mask_subtables\n"
    "                                    (default 32, 0 off)\n"
    "  --lookup generic|specialised|avx512|autovalidator\n"
    "                                    subtable lookup implementation (generic\n"
    "                                    where it rejects a shape; default: the\n"
    "                                    best available); autovalidator checks\n"
    "                                    every variant against generic and\n"
    "                                    exits 1 on any difference\n"
    "  --pipeline megaflow|acl           the pipeline (default megaflow); acl:\n"
    "                                    EMC -> DPDK rte_acl -> action (only\n"
    "                                    --emc and --emc-insert-inv-prob apply;\n"
    "                                    EAL starts without hugepages)\n"
    "  --acl-algorithm NAME              with --pipeline acl: default, scalar,\n"
    "                                    sse, avx2, avx512x16, avx512x32 or\n"
    "                                    autovalidator (every one the CPU runs,\n"
    "                                    checked against scalar; exits 1 on any\n"
    "                                    difference); default: the best\n"
    "  -h, --help                        this text\n"
    "\n"
    "Prints the rule and trace line (or pcap frame) counts, the timed loop's rate\n"
    "(classified: N packets in S s (P packets/s)), the pipeline counters,\n"
    "then exactly one summary line:\n"
    "  replay: packets=N mismatches=M mpps=X.XX\n"
    "Exit status: 0 when M = 0, 1 when M > 0 (or the autovalidator found a\n"
    "difference), 2 usage error, 3 bad input.\n";

// A command-line error: "flowclassctl: <msg>", then the help.
int Usage(const std::string& msg, const char* help) {
  std::fprintf(stderr, "flowclassctl: %s\n\n%s", msg.c_str(), help);
  return kExitUsage;
}

// A replay option error: "flowclassctl replay: <msg>", as the other commands
// name themselves (docs/flowclassctl.md), then replay's help.
int ReplayUsage(const std::string& msg) {
  std::fprintf(stderr, "flowclassctl replay: %s\n\n%s", msg.c_str(), kReplayHelp);
  return kExitUsage;
}

// replay's options that take a value.
constexpr const char* kReplayValueOptions[] = {
    "--format", "--pcap",     "--in-port",       "--top-rules",           "--repeat",
    "--emc",    "--smc",      "--megaflows",     "--cd",                  "--emc-insert-inv-prob",
    "--lookup", "--pipeline", "--acl-algorithm", "--ranking-interval-ms",
    "--rare-mask-subtables"};

int Replay(const std::vector<std::string_view>& raw) {
  // CLI11 reads the command line ("--opt value" or "--opt=value"; an option
  // given twice: the last value, as ever); the checks below give each option
  // its own message, and an unknown option is named.
  CLI::App app("flowclassctl replay");
  app.set_help_flag();  // -h / --help print kReplayHelp, not CLI11's text
  app.allow_extras();
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  bool help = false;
  ReplayOptions opts;
  app.add_flag("-h,--help", help);
  app.add_flag("--allow-empty-rules", opts.allow_empty_rules);
  std::map<std::string, std::string> value;  // of each option given
  std::map<std::string, CLI::Option*> option;
  for (const char* name : kReplayValueOptions) option[name] = app.add_option(name, value[name]);
  std::vector<std::string> positional;
  app.add_option("RULES-TRACE", positional);
  std::vector<std::string> argv_text = {"flowclassctl replay"};
  argv_text.insert(argv_text.end(), raw.begin(), raw.end());
  std::vector<const char*> argv;
  for (const std::string& a : argv_text) argv.push_back(a.c_str());
  try {
    app.parse(static_cast<int>(argv.size()), argv.data());
  } catch (const CLI::ParseError& e) {
    return ReplayUsage(e.what());
  }
  if (help) {
    std::fputs(kReplayHelp, stdout);
    return kExitOk;
  }
  if (!app.remaining().empty()) return ReplayUsage("unknown option '" + app.remaining()[0] + "'");
  // The value of `name` when it was given, else nullptr.
  const auto given = [&](const char* name) -> const std::string* {
    return option.at(name)->count() ? &value.at(name) : nullptr;
  };
  int top_rules = -1;  // default: 10 with --pcap, 0 with a trace
  if (const std::string* v = given("--format")) {
    if (*v == "auto") {
      opts.format = RuleFormat::kAuto;
    } else if (*v == "classbench") {
      opts.format = RuleFormat::kClassBench;
    } else if (*v == "native") {
      opts.format = RuleFormat::kNative;
    } else {
      return ReplayUsage("--format: unknown format '" + *v + "' (auto, classbench or native)");
    }
  }
  if (const std::string* v = given("--pcap")) {
    if (v->empty()) return ReplayUsage("--pcap needs a file");
    opts.pcap_path = *v;
  }
  for (const char* name : {"--in-port", "--top-rules"}) {
    const std::string* v = given(name);
    if (!v) continue;
    uint32_t n = 0;
    const uint32_t max = name == std::string_view("--in-port") ? UINT32_MAX : 1000000;
    if (!absl::SimpleAtoi(*v, &n) || n > max)
      return ReplayUsage(absl::StrCat(name, " needs a whole number in 0..", max));
    if (name == std::string_view("--in-port")) {
      opts.pcap_in_port = n;
    } else {
      top_rules = static_cast<int>(n);
    }
  }
  if (const std::string* v = given("--repeat");
      v && (!absl::SimpleAtoi(*v, &opts.repeat) || opts.repeat < 1))
    return ReplayUsage("--repeat needs a whole number >= 1");
  for (auto [name, field] : {std::pair{"--emc", &opts.pipeline.emc},
                             std::pair{"--megaflows", &opts.pipeline.megaflows}}) {
    const std::string* v = given(name);
    if (!v) continue;
    if (*v != "on" && *v != "off") return ReplayUsage(std::string(name) + " takes on or off");
    *field = *v == "on";
  }
  if (const std::string* v = given("--smc")) {
    absl::StatusOr<CacheMode> mode = ParseCacheMode(*v, "smc");
    if (!mode.ok()) return ReplayUsage("--smc takes on, off or auto");
    opts.pipeline.smc = *mode;
  }
  if (const std::string* v = given("--cd")) {
    absl::StatusOr<CdMode> mode = ParseCdMode(*v);
    if (!mode.ok()) return ReplayUsage("--cd takes on, off or auto");
    opts.pipeline.cd.mode = *mode;
  }
  // The ranges flowclassd's pipeline.* settings take.
  for (auto [name, max, field] :
       {std::tuple{"--emc-insert-inv-prob", kMaxEmcInsertInvProb,
                   &opts.pipeline.emc_config.insert_inv_prob},
        std::tuple{"--ranking-interval-ms", kMaxRankingIntervalMs,
                   &opts.pipeline.ranking_interval_ms},
        std::tuple{"--rare-mask-subtables", kMaxMaxSubtablesPerPort,
                   &opts.pipeline.rare_mask_subtables}}) {
    const std::string* v = given(name);
    if (!v) continue;
    uint32_t n = 0;
    if (!absl::SimpleAtoi(*v, &n)) return ReplayUsage(std::string(name) + " needs a whole number");
    if (n > max) return ReplayUsage(absl::StrCat(name, ": ", n, " is outside 0..", max));
    *field = n;
  }
  if (const std::string* v = given("--lookup")) {
    absl::StatusOr<LookupPriorities> p = LookupPriorities::Only(*v);
    if (!p.ok())
      return ReplayUsage("--lookup takes generic, specialised, avx512 or autovalidator");
    if (*v == "avx512" && !CpuHasAvx512Lookup())
      return ReplayUsage("--lookup avx512: this CPU lacks avx512f/bw/vl/dq, bmi2 or popcnt");
    opts.pipeline.dpcls.lookup = *p;
  }
  if (const std::string* v = given("--pipeline")) {
    std::optional<PipelineKind> k = ParsePipelineKind(*v);
    if (!k) return ReplayUsage("--pipeline takes megaflow or acl");
    opts.kind = *k;
  }
  if (const std::string* v = given("--acl-algorithm")) {
    constexpr std::string_view kAlgs[] = {"default",   "scalar",    "sse",          "avx2",
                                          "avx512x16", "avx512x32", "autovalidator"};
    if (std::find(std::begin(kAlgs), std::end(kAlgs), *v) == std::end(kAlgs))
      return ReplayUsage(
          "--acl-algorithm takes default, scalar, sse, avx2, avx512x16, avx512x32 or "
          "autovalidator");
    opts.acl_algorithm = *v;
  }
  if (!opts.pcap_path.empty()) {
    if (positional.size() != 1) return ReplayUsage("with --pcap FILE: expected RULES only");
  } else if (positional.size() != 2) {
    return ReplayUsage("expected RULES and TRACE (or RULES --pcap FILE)");
  }
  if (opts.pcap_path.empty() && opts.pcap_in_port != 0) {
    return ReplayUsage("--in-port applies to --pcap (a trace's keys have in_port 0)");
  }
  opts.rules_path = std::string(positional[0]);
  if (positional.size() == 2) opts.trace_path = std::string(positional[1]);
  opts.top_rules = top_rules >= 0 ? top_rules : (opts.pcap_path.empty() ? 0 : 10);
  absl::StatusOr<ReplayResult> r = RunReplay(opts, std::cout);
  if (!r.ok()) {
    std::fprintf(stderr, "flowclassctl replay: %s\n",
                 std::string(r.status().message()).c_str());
    return kExitBadInput;
  }
  if (r->lookup_mismatches != 0) {
    std::fprintf(stderr,
                 "flowclassctl replay: lookup autovalidator found %llu "
                 "differences\n",
                 static_cast<unsigned long long>(r->lookup_mismatches));
  }
  std::cout << ReplaySummaryLine(*r) << std::endl;
  return r->mismatches == 0 && r->lookup_mismatches == 0 ? kExitOk
                                                         : kExitMismatch;
}

// flowclassctl completion bash: the script, from the command table.
int Completion(const std::vector<std::string_view>& args) {
  if (args.size() != 1 || args[0] != "bash")
    return Usage("completion: expected 'completion bash' (the one shell it writes for)",
                 MainHelp().c_str());
  std::vector<CompletionCommand> commands = {
      {"replay", OptionsInHelp(kReplayHelp), OptionValuesInHelp(kReplayHelp), {}},
      {"completion", {}, {}, {"bash"}}};
  for (CompletionCommand& c : RpcCompletionCommands()) commands.push_back(std::move(c));
  std::fputs(BashCompletionScript(commands, {"help", "version"}).c_str(), stdout);
  return kExitOk;
}

}  // namespace
}  // namespace flowclass

int main(int argc, char** argv) {
  using namespace flowclass;
  if (argc < 2) return Usage("missing command", MainHelp().c_str());
  const std::string_view cmd = argv[1];
  std::vector<std::string_view> args(argv + 2, argv + argc);
  if (cmd == "-h" || cmd == "--help" || cmd == "help") {
    std::fputs(MainHelp().c_str(), stdout);
    return kExitOk;
  }
  if (cmd == "--version" || cmd == "version") {
    std::printf("flowclassctl %s\n", kFlowclassVersion);
    return kExitOk;
  }
  if (cmd == "replay") return Replay(args);
  if (cmd == "completion") return Completion(args);
  if (const absl::string_view rpc_cmd(cmd.data(), cmd.size()); IsRpcCommand(rpc_cmd)) {
    return RunRpcCommand(rpc_cmd, std::vector<absl::string_view>(argv + 2, argv + argc));
  }
  return Usage("unknown command '" + std::string(cmd) + "'", MainHelp().c_str());
}
