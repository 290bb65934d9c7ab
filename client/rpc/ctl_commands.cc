#include "client/rpc/ctl_commands.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/match.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "client/rpc/flowclass_client.h"
#include "common/quote.h"
#include "common/text_file.h"
#include "dataplane/rules/rule_format.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "proto/rich_error.h"
#include "proto/rule_convert.h"
#include "yaml-cpp/yaml.h"

namespace flowclass {

const char kRpcCommandsHelp[] =
    "  add-rules   stream a rule file (native or ClassBench) to flowclassd\n"
    "  del-rules   delete rules by id, by cookie, or all\n"
    "  dump-rules  print the rule set in native text (feeds add-rules)\n"
    "  replace-rules  replace the whole rule set with a file's, as one generation\n"
    "  diff-rules  what differs between the server's rule set and a file (exit 1: differs)\n"
    "  sync-rules  make the server's rule set equal a file's with the fewest operations\n"
    "  stats       PMD counters, like ovs-appctl dpif-netdev/pmd-stats-show\n"
    "  config      get or set run-time configuration keys\n"
    "  trace       where a PMD classifies one flow or packet (read-only)\n"
    "  dump-megaflows  the PMDs' megaflows, like ovs-appctl dpctl/dump-flows\n"
    "  stats-clear zero what `stats` shows, like ovs-appctl dpif-netdev/pmd-stats-clear\n"
    "  lookup-impl get or set subtable lookup implementation priorities\n"
    "\n"
    "  add-rules, del-rules, replace-rules, sync-rules, config set and stats also\n"
    "  program or read a fleet: --servers A,B,C or --discover dns:NAME[:PORT].\n";

namespace {

constexpr char kConnHelp[] =
    "connection options (every command that talks to flowclassd; an unset option\n"
    "comes from the environment variable after it, an empty variable is unset):\n"
    "  --server HOST:PORT   flowclassd's gRPC address (else 127.0.0.1:50051)\n"
    "                       $FLOWCLASS_SERVER\n"
    "  --plaintext          no TLS (the server must have grpc.plaintext: true)\n"
    "                       $FLOWCLASS_PLAINTEXT (1/true/yes or 0/false/no)\n"
    "  --ca FILE            PEM CA that signed the server certificate  $FLOWCLASS_CA\n"
    "  --cert FILE --key FILE  client certificate and key (mutual TLS)\n"
    "                       $FLOWCLASS_CERT, $FLOWCLASS_KEY\n"
    "  --server-name NAME   TLS name to verify instead of HOST  $FLOWCLASS_SERVER_NAME\n"
    "  --token-file FILE    bearer token (the file's first line) sent on every\n"
    "                       call, for a server with grpc.auth.token_file\n"
    "                       $FLOWCLASS_TOKEN_FILE\n"
    "  --timeout-ms N       deadline per call (default 30000, 0 = none; add-rules:\n"
    "                       one for the stream, N x (1 + batches/window))\n"
    "                       $FLOWCLASS_TIMEOUT_MS\n"
    "  -o, --output text|json|yaml  dump-rules, dump-megaflows, stats, config,\n"
    "                       trace, lookup-impl, and every fleet table: json prints\n"
    "                       the API's own message (protobuf JSON, proto field\n"
    "                       names, zero values included, 64-bit numbers as\n"
    "                       strings) on one line, yaml the same document as YAML;\n"
    "                       stats --watch prints one line (document) per report\n"
    "                       (default text)  $FLOWCLASS_OUTPUT\n"
    "fleet options (add-rules, del-rules, replace-rules, sync-rules, config set,\n"
    "stats; instead of --server):\n"
    "  --servers A,B,...    every node, HOST:PORT each  $FLOWCLASS_SERVERS\n"
    "  --discover dns:NAME[:PORT]  every A/AAAA record of NAME (a headless\n"
    "                       Service), PORT default 50051  $FLOWCLASS_DISCOVER\n"
    "  --rollout all-at-once|one-at-a-time  all nodes in parallel (default), or\n"
    "                       in order, stopping at the first failure\n"
    "                       $FLOWCLASS_ROLLOUT\n"
    "  Prints a table: NODE RESULT GENERATION ACK ERROR, then 'fleet: nodes=N ok=K\n"
    "  failed=F not_touched=T'; exit code: the highest of the failed nodes'.\n"
    "An option given twice is refused (but --cookie of del-rules, and --rule).\n"
    "exit codes: 0 ok, 1 diff-rules found differences, 2 usage, 3 bad input file,\n"
    "            4 rejected by the server, 5 server unreachable (connect, TLS,\n"
    "            deadline, a name that does not resolve)\n";

constexpr char kAddHelp[] =
    "usage: flowclassctl add-rules [options] FILE|-\n"
    "       flowclassctl add-rules [options] --rule TEXT [--rule TEXT]...\n"
    "Streams the rules of FILE in batches on one ApplyRules stream and waits\n"
    "for every ack.  Each batch is atomic; at the first rejected batch no\n"
    "more are sent (up to --window - 1 batches behind it may still apply;\n"
    "the last line names the rules that did, by position in FILE).\n"
    "  --format auto|native|classbench   (default auto)\n"
    "  --batch-size N        operations per batch (default 1000)\n"
    "  --window N            batches in flight (default 32)\n"
    "  --replace             send replace instead of insert\n"
    "  --cookie C            set this cookie on every rule (decimal or 0x hex)\n"
    "  --classbench-ports N  ClassBench rule L gets output:((L-1)%N)+1\n"
    "  --progress auto|on|off  progress bar on stderr (auto: on a terminal)\n"
    "FILE - reads standard input; --rule TEXT is one native rule (repeatable;\n"
    "one without id= gets its position, 1, 2, ...).\n"
    "Prints: add-rules: rules=N batches=B generation=G seconds=S rules_per_s=R\n";
constexpr char kReplaceHelp[] =
    "usage: flowclassctl replace-rules [options] FILE|-\n"
    "       flowclassctl replace-rules [options] --rule TEXT [--rule TEXT]...\n"
    "Replaces the whole rule set with the rules of FILE as ONE batch (one\n"
    "generation, all or nothing; like ovs-ofctl replace-flows): rules of FILE\n"
    "whose id exists are replaced, new ids inserted, ids not in FILE deleted,\n"
    "and no packet sees a partial rule set.  `dump-rules > f` then\n"
    "`replace-rules f` resynchronises a flowclassd with a saved state.  An\n"
    "empty FILE deletes every rule.\n"
    "  --format auto|native|classbench   (default auto)\n"
    "  --classbench-ports N  ClassBench rule L gets output:((L-1)%N)+1\n"
    "Prints: replace-rules: rules=N inserted=I replaced=R deleted=D generation=G\n";
constexpr char kDelHelp[] =
    "usage: flowclassctl del-rules [options] [ID...] [--cookie C]... | --all\n"
    "Deletes the given ids and every rule with each cookie (both decimal or\n"
    "0x hex) in ONE batch (all or nothing: an unknown id rejects the batch),\n"
    "or every rule.\n";
constexpr char kDumpHelp[] =
    "usage: flowclassctl dump-rules [options]\n"
    "Prints rules in native text, (priority desc, id asc).\n"
    "  --cookie C  --min-priority N  --max-priority N  --limit N\n"
    "  --hits      append '# hits=N' to each line\n";
constexpr char kStatsHelp[] =
    "usage: flowclassctl stats [options]\n"
    "  --watch SECONDS   repeat every SECONDS (0.001..86400) until interrupted;\n"
    "                    each report starts with 'time: <UTC>' and, from the\n"
    "                    second on, ends with 'rates over S s: rx_pps=...'\n"
    "  --count N         with --watch: stop after N >= 1 reports\n"
    "  --rule-hits       also per-rule hit counts (rules with hits; dump-rules\n"
    "                    --hits lists every rule)\n";
constexpr char kConfigHelp[] =
    "usage: flowclassctl config get [KEY]\n"
    "       flowclassctl config set KEY=VALUE [KEY=VALUE]...\n"
    "Keys are dotted names of flowclassd's YAML (pmd.tx_retries,\n"
    "pipeline.emc_insert_inv_prob, dpcls.lookup_prio.avx512, ...; `config get`\n"
    "lists them).  set is all or nothing.\n";
constexpr char kTraceHelp[] =
    "usage: flowclassctl trace [options] FLOW\n"
    "       flowclassctl trace [options] --packet-hex HEX [--in-port N]\n"
    "FLOW is native match text with exact values, e.g.\n"
    "  in_port=1,udp,nw_src=10.0.0.1,nw_dst=10.0.0.2,tp_src=5,tp_dst=53\n"
    "(no masks, ranges or actions=).  --packet-hex is an Ethernet frame;\n"
    "--in-port N its port (default 0).\n"
    "Prints the key, the layer that would classify it on a PMD (emc, smc,\n"
    "cd, megaflow, or upcall: the slow path installs a megaflow), the PMD,\n"
    "the megaflow (cached, or the one an upcall would install), the\n"
    "subtables probed, the rule and its action.  Nothing is counted.\n";
constexpr char kMegaflowsHelp[] =
    "usage: flowclassctl dump-megaflows [options]\n"
    "Prints the PMDs' megaflows (like ovs-appctl dpctl/dump-flows), one a\n"
    "line, PMD by PMD:\n"
    "  pmd=P MATCH, packets:N, used:S.SSSs, rule:ID|none, actions:output:N|drop\n"
    "MATCH is the megaflow's value/mask in native text; used: time since its\n"
    "last packet.  Read-only; each PMD copies them in bounded steps between\n"
    "its bursts.\n"
    "  --in-port N   megaflows of in_port N only\n"
    "  --rule-id N   megaflows whose verdict is rule N (0: no rule matched)\n"
    "  --pmd N       megaflows of PMD N only\n"
    "  --match TEXT  megaflows whose MATCH contains TEXT\n"
    "  --limit N     at most N lines (0: all)\n";
constexpr char kStatsClearHelp[] =
    "usage: flowclassctl stats-clear [options]\n"
    "Zeroes the counters `stats` shows (like ovs-appctl\n"
    "dpif-netdev/pmd-stats-clear): flowclassd keeps a baseline that GetStats\n"
    "subtracts, for every client.  Rules, generation, megaflows and the\n"
    "/metrics counters (monotonic, for Prometheus) are unchanged.\n"
    "Prints: stats-clear: cleared at generation G\n";
constexpr char kLookupHelp[] =
    "usage: flowclassctl lookup-impl get\n"
    "       flowclassctl lookup-impl set NAME PRIORITY\n"
    "Subtable lookup implementations and their priorities (OVS\n"
    "dpif-netdev/subtable-lookup-prio-get/-set).\n";

constexpr char kDiffHelp[] =
    "usage: flowclassctl diff-rules [options] FILE|-\n"
    "       flowclassctl diff-rules [options] --rule TEXT [--rule TEXT]...\n"
    "What differs between the server's rule set and FILE, by rule id (like\n"
    "ovs-ofctl diff-flows), in id order:\n"
    "  + RULE        in FILE only (sync-rules inserts it)\n"
    "  - RULE        on the server only (sync-rules deletes it)\n"
    "  - RULE / + RULE  the same id, different rule: the server's, then FILE's\n"
    "                (sync-rules replaces it)\n"
    "then: diff-rules: added=A removed=R changed=C unchanged=U\n"
    "Exit status like diff: 0 equal, 1 different.\n"
    "  --format auto|native|classbench   (default auto)\n"
    "  --classbench-ports N  ClassBench rule L gets output:((L-1)%N)+1\n";
constexpr char kSyncHelp[] =
    "usage: flowclassctl sync-rules [options] FILE|-\n"
    "       flowclassctl sync-rules [options] --rule TEXT [--rule TEXT]...\n"
    "Makes the server's rule set equal FILE's with the operations diff-rules\n"
    "shows and no others: deletes of the ids FILE lacks, inserts of its new\n"
    "ids, replacements of the changed ones, as ONE batch (one generation, all\n"
    "or nothing; like ovs-ofctl replace-flows --bundle).  Rules that are equal\n"
    "are not sent; when every rule is, nothing is sent and the generation\n"
    "stays.  The batch is bounded by the server's grpc.max_batch_ops (a larger\n"
    "difference is rejected whole: use replace-rules).\n"
    "  --format auto|native|classbench   (default auto)\n"
    "  --classbench-ports N  ClassBench rule L gets output:((L-1)%N)+1\n"
    "Prints: sync-rules: inserted=I replaced=R deleted=D unchanged=U generation=G\n"
    "  (nothing to do: sync-rules: in sync, nothing sent: rules=N generation=G)\n";

// A gRPC command: its help, its own options (the connection options are
// everyone's) and whether it takes the fleet options.
struct Command {
  const char* name;
  const char* help;
  std::vector<std::string> flags;
  bool fleet;
  std::vector<std::string> words;  // first positional words, for completion
};

const std::vector<Command>& Commands() {
  static const auto* c = new std::vector<Command>{
      {"add-rules", kAddHelp,
       {"--format", "--batch-size", "--window", "--replace", "--cookie", "--classbench-ports",
        "--progress", "--rule"},
       true, {}},
      {"del-rules", kDelHelp, {"--cookie", "--all"}, true, {}},
      {"dump-rules", kDumpHelp,
       {"--cookie", "--min-priority", "--max-priority", "--limit", "--hits"}, false, {}},
      {"replace-rules", kReplaceHelp, {"--format", "--classbench-ports", "--rule"}, true, {}},
      {"diff-rules", kDiffHelp, {"--format", "--classbench-ports", "--rule"}, false, {}},
      {"sync-rules", kSyncHelp, {"--format", "--classbench-ports", "--rule"}, true, {}},
      {"stats", kStatsHelp, {"--watch", "--count", "--rule-hits"}, true, {}},
      {"config", kConfigHelp, {}, true, {"get", "set"}},
      {"trace", kTraceHelp, {"--packet-hex", "--in-port"}, false, {}},
      {"dump-megaflows", kMegaflowsHelp,
       {"--in-port", "--rule-id", "--pmd", "--match", "--limit"}, false, {}},
      {"stats-clear", kStatsClearHelp, {}, false, {}},
      {"lookup-impl", kLookupHelp, {}, false, {"get", "set"}}};
  return *c;
}

const Command* FindCommand(absl::string_view name) {
  for (const Command& c : Commands())
    if (name == c.name) return &c;
  return nullptr;
}

int Usage(absl::string_view cmd, const std::string& msg) {
  std::fprintf(stderr, "flowclassctl %s: %s\n\n%s\n%s", std::string(cmd).c_str(),
               msg.c_str(), FindCommand(cmd)->help, kConnHelp);
  return kCtlExitUsage;
}

// The exit code of a failed call: 5 when the server did not answer, else 4.
int FailCode(const absl::Status& s) {
  switch (s.code()) {
    case absl::StatusCode::kUnavailable:
    case absl::StatusCode::kDeadlineExceeded:
    case absl::StatusCode::kCancelled:
    case absl::StatusCode::kUnauthenticated:
    case absl::StatusCode::kUnknown:
      return kCtlExitUnavailable;
    default:
      return kCtlExitRejected;
  }
}

// What one command did on one server: what a one-server run prints, and the
// cells of the fleet table (RunOnServers).
struct NodeResult {
  int code = kCtlExitOk;
  std::string out;  // stdout of a one-server run
  std::string err;  // its stderr: "flowclassctl CMD: ..." lines
  std::string ack;  // what the node acknowledged ("inserted=3 deleted=1")
  std::optional<uint64_t> generation;
  std::string json;  // the node's answer as protobuf JSON, for -o json|yaml ("": none)
};

// A failed call as "flowclassctl CMD: CODE: message" and its exit code.
NodeResult Failed(absl::string_view cmd, const absl::Status& s) {
  NodeResult r;
  r.code = FailCode(s);
  r.err = absl::StrFormat("flowclassctl %s: %s: %s%s\n", cmd, absl::StatusCodeToString(s.code()),
                          s.message(), ConnectionHint(s));
  return r;
}

int Fail(absl::string_view cmd, const absl::Status& s) {
  const NodeResult r = Failed(cmd, s);
  std::fputs(r.err.c_str(), stderr);
  return r.code;
}

// Parsed command line: connection options taken out, the rest left.
struct Args {
  ClientOptions conn;
  std::vector<std::string> flags;  // the command's own options given ("--name")
  std::map<std::string, std::vector<std::string>> values;  // their values ("" for on/off)
  std::string unknown;  // the first option neither the command nor the connection has
  std::vector<std::string> positional;
  bool help = false;
  std::string token_file;  // --token-file / $FLOWCLASS_TOKEN_FILE, read by Dial
  bool json = false;       // -o json|yaml / --output / $FLOWCLASS_OUTPUT: a structured output
  bool yaml = false;       // ... and it is yaml
  std::string output;      // text, json or yaml
  bool output_given = false;
  // The fleet: --servers / $FLOWCLASS_SERVERS (targets) or --discover /
  // $FLOWCLASS_DISCOVER (resolved by FleetNodes); both empty: one server.
  std::vector<std::string> servers;
  std::string discover;
  std::string fleet_from;  // the option or variable that named the fleet
  bool one_at_a_time = false;  // --rollout one-at-a-time
};

// On/off options (present or not) of some command.
bool IsOnOff(absl::string_view a) {
  return a == "--all" || a == "--hits" || a == "--replace" || a == "--rule-hits" ||
         a == "--plaintext";
}

// HOST:PORT (a name, an IPv4 address or a [bracketed] IPv6 one; port
// 1..65535), or a gRPC target URI with a scheme (unix:PATH, dns:///...).
bool IsServerTarget(absl::string_view t) {
  if (absl::StartsWith(t, "unix:") || absl::StartsWith(t, "unix-abstract:") ||
      absl::StartsWith(t, "dns:") || absl::StartsWith(t, "ipv4:") || absl::StartsWith(t, "ipv6:"))
    return t.find(':') + 1 < t.size();
  const size_t colon = t.rfind(':');
  if (colon == absl::string_view::npos || colon == 0) return false;
  const absl::string_view host = t.substr(0, colon);
  if (host.find(':') != absl::string_view::npos &&  // IPv6 needs brackets
      !(host.front() == '[' && host.back() == ']'))
    return false;
  uint32_t port = 0;
  return absl::SimpleAtoi(t.substr(colon + 1), &port) && port >= 1 && port <= 65535 &&
         absl::ascii_isdigit(static_cast<unsigned char>(t.back()));
}

// An environment variable, or nullptr when it is unset or empty.
const char* Env(const char* name) {
  const char* v = std::getenv(name);
  return v && *v ? v : nullptr;
}

// --servers A,B,C: every one HOST:PORT, none twice.
absl::Status ParseServers(absl::string_view from, absl::string_view list,
                          std::vector<std::string>* out) {
  for (absl::string_view t : absl::StrSplit(list, ',')) {
    if (!IsServerTarget(t))
      return absl::InvalidArgumentError(
          absl::StrCat(from, ": '", t, "' is not HOST:PORT (A,B,C: e.g. 10.0.0.1:50051)"));
    if (std::find(out->begin(), out->end(), t) != out->end())
      return absl::InvalidArgumentError(absl::StrCat(from, ": '", t, "' is listed twice"));
    out->emplace_back(t);
  }
  return absl::OkStatus();
}

absl::Status ParseArgs(const std::vector<absl::string_view>& in, const Command& cmd, Args* out) {
  std::string target_from = "$FLOWCLASS_SERVER";
  if (const char* env = std::getenv("FLOWCLASS_SERVER")) out->conn.target = env;
  // The TLS files and the token from the environment (a flag wins); empty
  // values count as unset.
  const struct {
    const char* env;
    std::string* field;
  } kEnv[] = {{"FLOWCLASS_CA", &out->conn.ca_file},
              {"FLOWCLASS_CERT", &out->conn.cert_file},
              {"FLOWCLASS_KEY", &out->conn.key_file},
              {"FLOWCLASS_SERVER_NAME", &out->conn.server_name},
              {"FLOWCLASS_TOKEN_FILE", &out->token_file}};
  for (const auto& e : kEnv)
    if (const char* v = Env(e.env)) *e.field = v;
  if (const char* v = Env("FLOWCLASS_PLAINTEXT")) {
    const std::string b = absl::AsciiStrToLower(v);
    if (b == "1" || b == "true" || b == "yes") {
      out->conn.plaintext = true;
    } else if (b != "0" && b != "false" && b != "no") {
      return absl::InvalidArgumentError(absl::StrCat("$FLOWCLASS_PLAINTEXT ",
                                                     QuoteForMessage(v, '"'),
                                                     ": expected 1, true, yes, 0, false or no"));
    }
  }
  std::string timeout_ms, timeout_from = "$FLOWCLASS_TIMEOUT_MS";
  if (const char* v = Env("FLOWCLASS_TIMEOUT_MS")) timeout_ms = v;
  std::string output = "text", output_from = "$FLOWCLASS_OUTPUT";
  if (const char* v = Env("FLOWCLASS_OUTPUT")) output = v;
  std::string rollout = "all-at-once", rollout_from = "$FLOWCLASS_ROLLOUT";
  if (const char* v = Env("FLOWCLASS_ROLLOUT")) rollout = v;
  std::string servers, discover;  // from the options
  bool server_given = false;
  // An on/off option is on by being there: "--all=no" must not mean --all
  // (it deleted every rule).
  for (absl::string_view arg : in)
    if (const size_t eq = arg.find('='); absl::StartsWith(arg, "--") &&
                                         eq != absl::string_view::npos &&
                                         IsOnOff(arg.substr(0, eq)))
      return absl::InvalidArgumentError(absl::StrCat(arg.substr(0, eq), " takes no value (got '",
                                                     arg, "'); leave it out to turn it off"));
  // CLI11 reads the command line: the connection options, the command's own
  // (cmd.flags) and the positional arguments; what it does not know is an
  // unknown option (refused after --help, by OnlyFlags).
  CLI::App app;
  app.set_help_flag();  // -h / --help: the command's own help text
  app.allow_extras();
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  std::map<std::string, std::vector<std::string>> given;  // option -> its values
  std::map<std::string, CLI::Option*> options;
  const auto add = [&](const std::string& name, const std::string& spec) {
    options[name] = IsOnOff(name) ? app.add_flag(spec)
                                  : app.add_option(spec, given[name])->allow_extra_args(false);
  };
  for (const char* name : {"--server", "--plaintext", "--ca", "--cert", "--key", "--server-name",
                           "--token-file", "--timeout-ms", "--servers", "--discover", "--rollout"})
    add(name, name);
  add("--output", "-o,--output");
  for (const std::string& name : cmd.flags) add(name, name);
  app.add_flag("-h,--help", out->help);
  app.add_option("positional", out->positional);
  std::vector<std::string> argv_text = {std::string("flowclassctl ") + cmd.name};
  for (absl::string_view arg : in) argv_text.emplace_back(arg);
  std::vector<const char*> argv;
  for (const std::string& arg : argv_text) argv.push_back(arg.c_str());
  try {
    app.parse(static_cast<int>(argv.size()), argv.data());
  } catch (const CLI::ParseError& e) {
    return absl::InvalidArgumentError(e.what());
  }
  for (const std::string& extra : app.remaining())
    if (extra != "--" && out->unknown.empty()) out->unknown = extra.substr(0, extra.find('='));
  // Given twice, one value would silently win: refused (del-rules takes
  // several --cookie, one delete per cookie; --rule is one rule each).
  for (const auto& [name, option] : options) {
    if (option->count() > 1 && name != "--cookie" && name != "--rule")
      return absl::InvalidArgumentError(absl::StrCat(name, " is given more than once"));
    if (option->count() == 0) continue;
    const std::vector<std::string>& values =
        IsOnOff(name) ? std::vector<std::string>{""} : given[name];
    const std::string& value = values.back();
    if (name == "--server") {
      out->conn.target = value;
      target_from = "--server";
      server_given = true;
    } else if (name == "--plaintext") {
      out->conn.plaintext = true;
    } else if (name == "--ca") {
      out->conn.ca_file = value;
    } else if (name == "--cert") {
      out->conn.cert_file = value;
    } else if (name == "--key") {
      out->conn.key_file = value;
    } else if (name == "--server-name") {
      out->conn.server_name = value;
    } else if (name == "--token-file") {
      out->token_file = value;
    } else if (name == "--servers") {
      servers = value;
    } else if (name == "--discover") {
      discover = value;
    } else if (name == "--output" || name == "--rollout" || name == "--timeout-ms") {
      (name == "--output" ? output : name == "--rollout" ? rollout : timeout_ms) = value;
      (name == "--output" ? output_from : name == "--rollout" ? rollout_from : timeout_from) =
          name;
      out->output_given |= name == "--output";
    } else {
      out->flags.push_back(name);
      out->values[name] = values;
    }
  }
  if (output != "text" && output != "json" && output != "yaml")
    return absl::InvalidArgumentError(absl::StrCat(
        output_from, " ", QuoteForMessage(output, '"'), ": expected text, json or yaml"));
  out->output = output;
  out->json = output != "text";
  out->yaml = output == "yaml";
  if (!timeout_ms.empty()) {
    int64_t ms = 0;
    if (!absl::SimpleAtoi(timeout_ms, &ms) || ms < 0)
      return absl::InvalidArgumentError(absl::StrCat(timeout_from, " needs a whole number >= 0"));
    out->conn.timeout = std::chrono::milliseconds(ms);
  }
  if (out->help) return absl::OkStatus();

  // The fleet: options first, then the environment; never with --server.
  if (server_given + !servers.empty() + !discover.empty() > 1)
    return absl::InvalidArgumentError("give one of --server, --servers and --discover");
  if (!server_given && servers.empty() && discover.empty()) {
    const char* env_servers = Env("FLOWCLASS_SERVERS");
    const char* env_discover = Env("FLOWCLASS_DISCOVER");
    if (env_servers && env_discover)
      return absl::InvalidArgumentError(
          "$FLOWCLASS_SERVERS and $FLOWCLASS_DISCOVER are both set: unset one (or give --server, "
          "--servers or --discover)");
    // A one-server command with a fleet in the environment: the fleet does
    // not apply, and without $FLOWCLASS_SERVER a default server would be a
    // surprise.
    if ((env_servers || env_discover) && !cmd.fleet && !std::getenv("FLOWCLASS_SERVER"))
      return absl::InvalidArgumentError(absl::StrCat(
          cmd.name, " talks to one server: give --server or set $FLOWCLASS_SERVER (",
          env_servers ? "$FLOWCLASS_SERVERS" : "$FLOWCLASS_DISCOVER", " is for a fleet)"));
    if (cmd.fleet && env_servers) {
      servers = env_servers;
      out->fleet_from = "$FLOWCLASS_SERVERS";
    } else if (cmd.fleet && env_discover) {
      discover = env_discover;
      out->fleet_from = "$FLOWCLASS_DISCOVER";
    }
  } else if (!servers.empty() || !discover.empty()) {
    out->fleet_from = servers.empty() ? "--discover" : "--servers";
    if (!cmd.fleet)
      return absl::InvalidArgumentError(absl::StrCat(
          out->fleet_from, ": ", cmd.name,
          " talks to one server (a fleet: add-rules, del-rules, replace-rules, sync-rules, "
          "config set, stats)"));
  }
  if (!servers.empty())
    if (absl::Status s = ParseServers(out->fleet_from, servers, &out->servers); !s.ok()) return s;
  if (!discover.empty()) {
    if (!absl::StartsWith(discover, "dns:") || discover.size() == 4)
      return absl::InvalidArgumentError(absl::StrCat(
          out->fleet_from, " '", discover, "': expected dns:NAME or dns:NAME:PORT"));
    out->discover = discover;
  }
  if (rollout != "all-at-once" && rollout != "one-at-a-time")
    return absl::InvalidArgumentError(absl::StrCat(
        rollout_from, " ", QuoteForMessage(rollout, '"'),
        ": expected all-at-once or one-at-a-time"));
  if (rollout_from == "--rollout" && out->fleet_from.empty())
    return absl::InvalidArgumentError("--rollout goes with --servers or --discover");
  out->one_at_a_time = rollout == "one-at-a-time";
  if (out->fleet_from.empty() && !IsServerTarget(out->conn.target))
    return absl::InvalidArgumentError(
        absl::StrCat(target_from, " '", out->conn.target,
                     "': expected HOST:PORT, e.g. 127.0.0.1:50051 or [::1]:50051"));
  return absl::OkStatus();
}

// An option that neither the command nor the connection has is refused.
absl::Status OnlyFlags(const Args& a) {
  if (!a.unknown.empty())
    return absl::InvalidArgumentError(absl::StrCat("unknown option '", a.unknown, "'"));
  return absl::OkStatus();
}

template <typename T>
absl::Status FlagNumber(const Args& a, const char* name, T* out) {
  auto it = a.values.find(name);
  if (it == a.values.end()) return absl::OkStatus();
  if (!absl::SimpleAtoi(it->second.back(), out))
    return absl::InvalidArgumentError(absl::StrCat(name, " needs a whole number"));
  return absl::OkStatus();
}

// --cookie as the native format (and dump-rules) writes it: decimal or 0x hex.
absl::Status FlagCookie(const Args& a, uint64_t* out) {
  auto it = a.values.find("--cookie");
  if (it == a.values.end()) return absl::OkStatus();
  if (it->second.size() > 1)
    return absl::InvalidArgumentError("--cookie is given more than once (only del-rules takes several)");
  if (!ParseNativeNumber(it->second.back(), out))
    return absl::InvalidArgumentError(
        absl::StrCat("--cookie '", it->second.back(), "' is not a number (decimal, or hex with 0x)"));
  return absl::OkStatus();
}

std::string FlagString(const Args& a, const char* name, std::string dflt) {
  auto it = a.values.find(name);
  return it == a.values.end() ? dflt : it->second.back();
}

bool HasFlag(const Args& a, const char* name) { return a.values.count(name) > 0; }

// stats --watch: what the totals did per second since the previous report.
// A counter that went down (stats-clear, a restarted daemon) starts again.
std::string WatchRates(const v1::GetStatsResponse& prev, const v1::GetStatsResponse& now, double seconds) {
  const v1::PmdStats &p = prev.total(), &n = now.total();
  if (n.packets() < p.packets() || n.tx_packets() < p.tx_packets() ||
      now.server().boot_id() != prev.server().boot_id())
    return "rates: counters were reset (stats-clear or a restart); from the next report\n";
  auto rate = [seconds](uint64_t a, uint64_t b) {
    return b >= a && seconds > 0 ? static_cast<double>(b - a) / seconds : 0.0;
  };
  const uint64_t drops_p = p.tx_dropped() + p.rule_drops() + p.no_match() + p.bad_port() +
                           p.upcall_limit_drops();
  const uint64_t drops_n = n.tx_dropped() + n.rule_drops() + n.no_match() + n.bad_port() +
                           n.upcall_limit_drops();
  return absl::StrFormat(
      "rates over %.3f s: rx_pps=%.0f tx_pps=%.0f drops_pps=%.0f upcalls_per_s=%.0f "
      "emc_hits_per_s=%.0f megaflow_hits_per_s=%.0f rules=%llu generation=%llu\n",
      seconds, rate(p.packets(), n.packets()), rate(p.tx_packets(), n.tx_packets()),
      rate(drops_p, drops_n),
      rate(p.upcall_ok() + p.upcall_failed(), n.upcall_ok() + n.upcall_failed()),
      rate(p.emc_hits(), n.emc_hits()), rate(p.megaflow_hits(), n.megaflow_hits()),
      static_cast<unsigned long long>(now.rules()),
      static_cast<unsigned long long>(now.generation()));
}

// `m` as protobuf's JSON on one line, with the .proto field names (stable
// across languages: what a script keys on) and zero values printed (a
// counter at 0 is there, not missing).
std::string ToJson(const google::protobuf::Message& m) {
  google::protobuf::util::JsonPrintOptions o;
  o.preserve_proto_field_names = true;
  o.always_print_primitive_fields = true;
  std::string out;
  if (const auto s = google::protobuf::util::MessageToJsonString(m, &out, o); !s.ok())
    return absl::StrCat("{\"error\":\"", absl::CEscape(std::string(s.message())), "\"}");
  return out;
}

// A JSON document as YAML (block style).  Strings JSON quoted stay quoted
// (64-bit numbers are strings in protobuf JSON: "12" must not become 12),
// so a YAML reader sees the same types and the same field names.
void EmitYaml(const YAML::Node& n, YAML::Emitter* e) {
  switch (n.Type()) {
    case YAML::NodeType::Map:
      *e << YAML::BeginMap;
      for (const auto& kv : n) {
        *e << YAML::Key << kv.first.Scalar() << YAML::Value;
        EmitYaml(kv.second, e);
      }
      *e << YAML::EndMap;
      break;
    case YAML::NodeType::Sequence:
      *e << YAML::BeginSeq;
      for (const auto& v : n) EmitYaml(v, e);
      *e << YAML::EndSeq;
      break;
    case YAML::NodeType::Scalar:
      if (n.Tag() == "!") *e << YAML::DoubleQuoted;
      *e << n.Scalar();
      break;
    default:
      *e << YAML::Null;
  }
}

std::string JsonToYaml(const std::string& json) {
  YAML::Emitter e;
  try {
    EmitYaml(YAML::Load(json), &e);
  } catch (const YAML::Exception& ex) {
    return absl::StrCat("error: \"", absl::CEscape(ex.what()), "\"");
  }
  return e.c_str();
}

// `json` (one line) as -o asks: that line, or a YAML document.
std::string StructuredText(const Args& a, const std::string& json) {
  return a.yaml ? absl::StrCat("---\n", JsonToYaml(json), "\n") : json + "\n";
}

void PrintStructured(const Args& a, const google::protobuf::Message& m) {
  std::fputs(StructuredText(a, ToJson(m)).c_str(), stdout);
}

// A command that prints no result to format: -o json is refused, not ignored.
absl::Status NoOutputFormat(const Args& a) {
  if (a.output_given && a.json)
    return absl::InvalidArgumentError(absl::StrCat(
        "-o ", a.output, ": this command prints a one-line summary only (", a.output,
        " is for dump-rules, dump-megaflows, stats, config, trace, lookup-impl and fleet "
        "tables)"));
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<FlowclassClient>> Dial(const Args& a) {
  ClientOptions o = a.conn;
  if (!a.token_file.empty()) {
    absl::StatusOr<std::string> t = ReadTokenFile("--token-file", a.token_file);
    if (!t.ok()) return t.status();
    o.token = *std::move(t);
  }
  return FlowclassClient::Connect(o);
}

// ------------------------------------------------------------------ fleet

// --discover dns:NAME[:PORT]: HOST:PORT for every A and AAAA record of NAME
// (getaddrinfo; IPv6 bracketed), each address once, sorted.  NAME may be a
// [bracketed] IPv6 address.  INVALID_ARGUMENT for a malformed spec,
// UNAVAILABLE when NAME does not resolve.
absl::StatusOr<std::vector<std::string>> Discover(absl::string_view from,
                                                  absl::string_view spec) {
  absl::string_view rest = spec.substr(4);  // after "dns:"
  absl::string_view name = rest, port = "50051";
  const auto bad = [&](absl::string_view why) {
    return absl::InvalidArgumentError(
        absl::StrCat(from, " '", spec, "': ", why, " (expected dns:NAME or dns:NAME:PORT)"));
  };
  if (absl::StartsWith(rest, "[")) {
    const size_t close = rest.find(']');
    if (close == absl::string_view::npos) return bad("no ']' after an IPv6 address");
    name = rest.substr(1, close - 1);
    const absl::string_view after = rest.substr(close + 1);
    if (!after.empty() && after[0] != ':') return bad("':PORT' expected after ']'");
    if (!after.empty()) port = after.substr(1);
  } else if (const size_t colon = rest.rfind(':'); colon != absl::string_view::npos) {
    if (rest.find(':') != colon) return bad("an IPv6 address needs [brackets]");
    name = rest.substr(0, colon);
    port = rest.substr(colon + 1);
  }
  uint32_t port_number = 0;
  if (name.empty()) return bad("no NAME");
  if (!absl::SimpleAtoi(port, &port_number) || port_number < 1 || port_number > 65535)
    return bad(absl::StrCat("PORT '", port, "' is not in 1..65535"));
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  const std::string host(name);
  if (const int rc = getaddrinfo(host.c_str(), nullptr, &hints, &res); rc != 0)
    return absl::UnavailableError(
        absl::StrCat(from, " '", spec, "': ", host, " does not resolve: ", gai_strerror(rc)));
  std::set<std::string> nodes;
  for (const addrinfo* ai = res; ai; ai = ai->ai_next) {
    char text[INET6_ADDRSTRLEN] = "";
    if (ai->ai_family == AF_INET) {
      inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(ai->ai_addr)->sin_addr, text,
                sizeof(text));
      nodes.insert(absl::StrCat(text, ":", port_number));
    } else if (ai->ai_family == AF_INET6) {
      inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(ai->ai_addr)->sin6_addr, text,
                sizeof(text));
      nodes.insert(absl::StrCat("[", text, "]:", port_number));
    }
  }
  freeaddrinfo(res);
  if (nodes.empty())
    return absl::UnavailableError(
        absl::StrCat(from, " '", spec, "': ", host, " has no IPv4 or IPv6 address"));
  return std::vector<std::string>(nodes.begin(), nodes.end());
}

// The table's ERROR cell: a node's stderr without the "flowclassctl CMD: "
// prefixes, on one line.
std::string ErrorCell(absl::string_view cmd, const std::string& err) {
  const std::string prefix = absl::StrCat("flowclassctl ", cmd, ": ");
  std::vector<std::string> parts;
  for (absl::string_view line : absl::StrSplit(err, '\n', absl::SkipWhitespace())) {
    absl::ConsumePrefix(&line, prefix);
    parts.emplace_back(absl::StripAsciiWhitespace(line));
  }
  return absl::StrJoin(parts, "; ");
}

// The fleet table as -o json|yaml prints it: {"nodes": [{"node", "result",
// "generation", "ack", "error", "response"}], "ok", "failed", "not_touched"}
// (a google.protobuf.Struct, so that protobuf escapes the strings).
std::string FleetJson(absl::string_view cmd, const std::vector<std::string>& nodes,
                      const std::vector<std::optional<NodeResult>>& results, size_t ok,
                      size_t failed) {
  google::protobuf::Struct doc;
  auto& fields = *doc.mutable_fields();
  google::protobuf::ListValue* list = fields["nodes"].mutable_list_value();
  for (size_t i = 0; i < nodes.size(); ++i) {
    auto& f = *list->add_values()->mutable_struct_value()->mutable_fields();
    const std::optional<NodeResult>& r = results[i];
    f["node"].set_string_value(nodes[i]);
    f["result"].set_string_value(!r ? "not-touched" : r->code == kCtlExitOk ? "ok" : "failed");
    f["generation"].set_string_value(r && r->generation ? absl::StrCat(*r->generation) : "");
    f["ack"].set_string_value(r ? r->ack : "");
    f["error"].set_string_value(r ? ErrorCell(cmd, r->err) : "");
    if (r && !r->json.empty() &&
        !google::protobuf::util::JsonStringToMessage(r->json, f["response"].mutable_struct_value())
             .ok())
      f["response"].set_string_value(r->json);
  }
  fields["ok"].set_number_value(static_cast<double>(ok));
  fields["failed"].set_number_value(static_cast<double>(failed));
  fields["not_touched"].set_number_value(static_cast<double>(nodes.size() - ok - failed));
  return ToJson(doc);
}

// `fn` on the one server of `a` (printing what it prints), or on every node
// of the fleet (--servers / --discover): all at once, or one at a time up to
// the first failure; then the per-node table and the fleet line on stdout,
// and on stderr the nodes that failed and those not touched.  The exit code
// is the highest of the failed nodes'.
int RunOnServers(absl::string_view cmd, const Args& a,
                 const std::function<NodeResult(FlowclassClient&)>& fn) {
  if (a.fleet_from.empty()) {
    auto client = Dial(a);
    if (!client.ok()) return Usage(cmd, std::string(client.status().message()));
    const NodeResult r = fn(**client);
    std::fputs(r.out.c_str(), stdout);
    std::fputs(r.err.c_str(), stderr);
    return r.code;
  }
  absl::StatusOr<std::vector<std::string>> nodes =
      a.discover.empty() ? absl::StatusOr<std::vector<std::string>>(a.servers)
                         : Discover(a.fleet_from, a.discover);
  if (!nodes.ok()) {
    if (nodes.status().code() == absl::StatusCode::kInvalidArgument)
      return Usage(cmd, std::string(nodes.status().message()));
    return Fail(cmd, nodes.status());
  }
  std::vector<std::optional<NodeResult>> results(nodes->size());
  const auto run = [&](size_t i) {
    Args one = a;
    one.conn.target = (*nodes)[i];
    auto client = Dial(one);
    if (client.ok()) {
      results[i] = fn(**client);
    } else {
      results[i].emplace();
      results[i]->code = kCtlExitUsage;
      results[i]->err = absl::StrCat("flowclassctl ", cmd, ": ", client.status().message());
    }
  };
  std::optional<size_t> stopped_at;
  if (a.one_at_a_time) {
    for (size_t i = 0; i < nodes->size() && !stopped_at; ++i) {
      run(i);
      if (results[i]->code != kCtlExitOk) stopped_at = i;
    }
  } else {
    std::vector<std::thread> threads;
    for (size_t i = 0; i < nodes->size(); ++i) threads.emplace_back(run, i);
    for (std::thread& t : threads) t.join();
  }
  int code = kCtlExitOk;
  size_t ok = 0;
  std::vector<std::string> failed, untouched;
  for (size_t i = 0; i < nodes->size(); ++i) {
    if (!results[i]) {
      untouched.push_back((*nodes)[i]);
    } else if (results[i]->code == kCtlExitOk) {
      ++ok;
    } else {
      failed.push_back((*nodes)[i]);
      code = std::max(code, results[i]->code);
    }
  }
  if (a.json) {
    std::fputs(StructuredText(a, FleetJson(cmd, *nodes, results, ok, failed.size())).c_str(),
               stdout);
  } else {
    std::vector<std::vector<std::string>> rows = {{"NODE", "RESULT", "GENERATION", "ACK", "ERROR"}};
    for (size_t i = 0; i < nodes->size(); ++i) {
      const std::optional<NodeResult>& r = results[i];
      const std::string e = r ? ErrorCell(cmd, r->err) : "";
      rows.push_back({(*nodes)[i], !r ? "not-touched" : r->code == kCtlExitOk ? "ok" : "failed",
                      r && r->generation ? absl::StrCat(*r->generation) : "-",
                      r && !r->ack.empty() ? r->ack : "-", e.empty() ? "-" : e});
    }
    std::vector<size_t> width(rows[0].size(), 0);
    for (const auto& row : rows)
      for (size_t c = 0; c < row.size(); ++c) width[c] = std::max(width[c], row[c].size());
    std::string table;
    for (const auto& row : rows) {
      for (size_t c = 0; c + 1 < row.size(); ++c)
        absl::StrAppend(&table, row[c], std::string(width[c] - row[c].size() + 2, ' '));
      absl::StrAppend(&table, row.back(), "\n");
    }
    absl::StrAppend(&table, "fleet: nodes=", nodes->size(), " ok=", ok, " failed=", failed.size(),
                    " not_touched=", untouched.size(), "\n");
    std::fputs(table.c_str(), stdout);
  }
  if (!failed.empty())
    std::fprintf(stderr, "flowclassctl %s: failed on %zu of %zu nodes: %s\n",
                 std::string(cmd).c_str(), failed.size(), nodes->size(),
                 absl::StrJoin(failed, ", ").c_str());
  if (stopped_at && !untouched.empty())
    std::fprintf(stderr, "flowclassctl %s: one-at-a-time stopped at %s; not touched: %s\n",
                 std::string(cmd).c_str(), (*nodes)[*stopped_at].c_str(),
                 absl::StrJoin(untouched, ", ").c_str());
  return code;
}

// ------------------------------------------------------------------ commands

// The rules, by 1-based position in the file, of `batches` (0-based,
// ascending): "#21-#80, #91-#100".
std::string RulesOfBatches(const std::vector<size_t>& batches, size_t batch_size,
                           size_t n_rules) {
  std::string text;
  size_t lo = 0, hi = 0;  // the run being built (hi 0: none)
  auto flush = [&] {
    if (hi != 0) absl::StrAppend(&text, text.empty() ? "" : ", ", "#", lo, "-#", hi);
  };
  for (size_t b : batches) {
    const size_t first = b * batch_size + 1, last = std::min(n_rules, (b + 1) * batch_size);
    if (hi != 0 && first == hi + 1) {
      hi = last;
      continue;
    }
    flush();
    lo = first;
    hi = last;
  }
  flush();
  return text;
}

// Those of the batches acked OK after batch `bad` (0-based).
std::string RulesOfBatchesAfter(const std::vector<size_t>& ok_batches, size_t bad,
                                size_t batch_size, size_t n_rules) {
  std::vector<size_t> after;
  for (size_t b : ok_batches)
    if (b > bad) after.push_back(b);
  return RulesOfBatches(after, batch_size, n_rules);
}

// What a stream that failed part way left behind, for the user to act on:
// acks arrive in batch order, so batches [0, acked) were answered (the OK
// ones are in), [acked, sent) were sent without an answer (applied or not:
// unknown) and the rest were never sent.
std::string StreamFailureReport(const ApplyResult& p, size_t batch_size, size_t n_rules) {
  auto rules_in = [&](size_t lo_batch, size_t hi_batch) {
    const size_t lo = std::min(n_rules, lo_batch * batch_size);
    const size_t hi = std::min(n_rules, hi_batch * batch_size);
    return std::pair<size_t, std::string>(
        hi - lo, hi > lo ? absl::StrCat(" (#", lo + 1, "-#", hi, ")") : "");
  };
  const size_t acked = static_cast<size_t>(p.batches_acked);
  const size_t sent = std::max(acked, static_cast<size_t>(p.batches_sent));
  const size_t n_batches = (n_rules + batch_size - 1) / batch_size;
  const std::string ok = RulesOfBatches(p.ok_batches, batch_size, n_rules);
  const auto [unanswered, unanswered_text] = rules_in(acked, sent);
  const auto [unsent, unsent_text] = rules_in(sent, n_batches);
  return absl::StrCat("the stream ended early: ", p.ops_applied, " of ", n_rules,
                      " rules applied", ok.empty() ? "" : absl::StrCat(" (", ok, ")"), "; ",
                      unanswered, " sent without an answer, applied or not", unanswered_text,
                      " (dump-rules shows which); ", unsent, " not sent", unsent_text);
}

// The rule-file flags add-rules and replace-rules share: --format, and the
// range of --classbench-ports (already read into `cb_ports`).
absl::Status RuleFileFlags(const Args& a, uint32_t cb_ports, RuleFormat* rf) {
  if (HasFlag(a, "--classbench-ports") && (cb_ports < 1 || cb_ports > kMaxPortNumber))
    return absl::InvalidArgumentError(
        absl::StrCat("--classbench-ports: ", FlagString(a, "--classbench-ports", ""),
                     " is outside 1..", kMaxPortNumber, " (output ports)"));
  const std::string fmt = FlagString(a, "--format", "auto");
  if (fmt == "native") *rf = RuleFormat::kNative;
  else if (fmt == "classbench") *rf = RuleFormat::kClassBench;
  else if (fmt != "auto") return absl::InvalidArgumentError("--format: auto, native or classbench");
  return absl::OkStatus();
}

// The rules a command reads: FILE, `-` (standard input) or every --rule TEXT
// (one rule each, as line 1, 2, ... of a native rule file).  `source` names
// the input in messages.  `*usage` tells a usage error (exit 2) from input
// that cannot be read or parsed (exit 3).
absl::StatusOr<std::vector<Rule>> LoadRulesInput(const Args& a, RuleFormat rf,
                                                 const ClassBenchOptions& cbo,
                                                 std::vector<size_t>* lines, RuleFormat* used,
                                                 std::string* source, bool* usage) {
  *usage = true;
  auto it = a.values.find("--rule");
  if (it != a.values.end()) {
    if (!a.positional.empty())
      return absl::InvalidArgumentError("give FILE, - or --rule TEXT, not both");
    if (rf == RuleFormat::kClassBench)
      return absl::InvalidArgumentError("--rule takes native rule text, not --format classbench");
    std::string text;
    for (const std::string& r : it->second) {
      if (r.find('\n') != std::string::npos)
        return absl::InvalidArgumentError("--rule: one rule, on one line (give --rule again)");
      absl::StrAppend(&text, r, "\n");
    }
    *source = "--rule";
    *usage = false;
    absl::StatusOr<std::vector<Rule>> rules =
        ParseRuleText(std::move(text), *source, RuleFormat::kNative, cbo, lines, used);
    if (rules.ok() && rules->size() != it->second.size())  // a blank or '#' --rule
      return absl::InvalidArgumentError("--rule: a blank or comment rule");
    return rules;
  }
  if (a.positional.size() != 1)
    return absl::InvalidArgumentError("expected one FILE (or -, or --rule TEXT)");
  *usage = false;
  *source = a.positional[0];
  if (*source == "-") {
    *source = "stdin";
    absl::StatusOr<std::string> text = ReadTextFile("/dev/stdin");
    if (!text.ok()) return text.status();
    return ParseRuleText(*std::move(text), *source, rf, cbo, lines, used);
  }
  return LoadRuleFile(*source, rf, cbo, lines, used);
}

// The rules of FILE, `-` or --rule TEXT that add-rules, replace-rules,
// diff-rules and sync-rules read, with --format and --classbench-ports.
struct RulesInput {
  std::vector<Rule> rules;
  std::vector<size_t> lines;  // of each rule, for the report of a rejected one
  RuleFormat used = RuleFormat::kAuto;
  std::string source;  // FILE, stdin or --rule
};

// The exit code when the rules cannot be had (usage, or bad input: the
// message printed), else nullopt and `*in` filled.
std::optional<int> ReadRulesInput(absl::string_view cmd, const Args& a, RulesInput* in) {
  uint32_t cb_ports = 0;
  if (absl::Status s = FlagNumber(a, "--classbench-ports", &cb_ports); !s.ok())
    return Usage(cmd, std::string(s.message()));
  RuleFormat rf = RuleFormat::kAuto;
  if (absl::Status s = RuleFileFlags(a, cb_ports, &rf); !s.ok())
    return Usage(cmd, std::string(s.message()));
  ClassBenchOptions cbo;
  cbo.num_ports = cb_ports;
  in->used = rf;
  bool usage = false;
  absl::StatusOr<std::vector<Rule>> rules =
      LoadRulesInput(a, rf, cbo, &in->lines, &in->used, &in->source, &usage);
  if (!rules.ok()) {
    if (usage) return Usage(cmd, std::string(rules.status().message()));
    std::fprintf(stderr, "flowclassctl %s: %s\n", std::string(cmd).c_str(),
                 std::string(rules.status().message()).c_str());
    return kCtlExitBadInput;
  }
  // Native rules carry their own actions: the option would be ignored.
  if (HasFlag(a, "--classbench-ports") && in->used == RuleFormat::kNative)
    return Usage(cmd, absl::StrCat("--classbench-ports: ", in->source,
                                   " is a native rule file (its rules have their own actions); "
                                   "the option is only for ClassBench files"));
  in->rules = *std::move(rules);
  return std::nullopt;
}

int ReplaceRules(absl::string_view cmd, const Args& a) {
  RulesInput in;
  if (std::optional<int> code = ReadRulesInput(cmd, a, &in)) return *code;
  return RunOnServers(cmd, a, [&](FlowclassClient& client) {
    absl::StatusOr<v1::BatchAck> ack = client.ReplaceRules(in.rules);
    if (!ack.ok()) return Failed(cmd, ack.status());
    NodeResult r;
    r.ack = absl::StrFormat("rules=%u inserted=%u replaced=%u deleted=%u", in.rules.size(),
                            ack->inserted(), ack->replaced(), ack->deleted());
    r.generation = ack->generation();
    r.out = absl::StrFormat("replace-rules: %s generation=%u\n", r.ack, ack->generation());
    return r;
  });
}

// The server's rule set against a file's, by id (a file lists an id once).
struct RuleDiff {
  std::vector<Rule> added;    // in the file only
  std::vector<Rule> removed;  // on the server only
  std::vector<std::pair<Rule, Rule>> changed;  // same id: the server's, the file's
  size_t unchanged = 0;
  bool empty() const { return added.empty() && removed.empty() && changed.empty(); }
};

RuleDiff DiffRuleSets(const std::vector<Rule>& server, const std::vector<Rule>& file) {
  std::map<uint64_t, const Rule*> on_server, in_file;
  for (const Rule& r : server) on_server[r.id] = &r;
  for (const Rule& r : file) in_file[r.id] = &r;
  RuleDiff d;
  for (const auto& [id, r] : in_file) {
    auto it = on_server.find(id);
    if (it == on_server.end()) d.added.push_back(*r);
    else if (*it->second == *r) ++d.unchanged;
    else d.changed.emplace_back(*it->second, *r);
  }
  for (const auto& [id, r] : on_server)
    if (!in_file.count(id)) d.removed.push_back(*r);
  return d;
}

// The server's rules, and their difference from `file`.
absl::StatusOr<RuleDiff> DiffWithServer(FlowclassClient& client, const std::vector<Rule>& file) {
  absl::StatusOr<std::vector<v1::Rule>> listed = client.ListRules();
  if (!listed.ok()) return listed.status();
  std::vector<Rule> server(listed->size());
  for (size_t i = 0; i < listed->size(); ++i)
    if (absl::Status s = RuleFromProto((*listed)[i], &server[i]); !s.ok()) return s;
  return DiffRuleSets(server, file);
}

// A file that lists an id twice has no one rule set to compare: bad input.
std::optional<int> RefuseDuplicateIds(absl::string_view cmd, const RulesInput& in) {
  std::map<uint64_t, size_t> first;  // id -> index
  for (size_t i = 0; i < in.rules.size(); ++i) {
    auto [it, fresh] = first.emplace(in.rules[i].id, i);
    if (fresh) continue;
    std::fprintf(stderr, "flowclassctl %s: %s: rule id %llu twice (rules #%zu and #%zu)\n",
                 std::string(cmd).c_str(), in.source.c_str(),
                 static_cast<unsigned long long>(in.rules[i].id), it->second + 1, i + 1);
    return kCtlExitBadInput;
  }
  return std::nullopt;
}

// diff-rules and sync-rules: FILE read once, then `fn` with each server's
// difference from it.
int RunOnDiff(absl::string_view cmd, const Args& a,
              const std::function<NodeResult(FlowclassClient&, const RuleDiff&)>& fn) {
  RulesInput in;
  if (std::optional<int> code = ReadRulesInput(cmd, a, &in)) return *code;
  if (std::optional<int> code = RefuseDuplicateIds(cmd, in)) return *code;
  return RunOnServers(cmd, a, [&](FlowclassClient& client) {
    absl::StatusOr<RuleDiff> d = DiffWithServer(client, in.rules);
    return d.ok() ? fn(client, *d) : Failed(cmd, d.status());
  });
}

int DiffRules(absl::string_view cmd, const Args& a) {
  return RunOnDiff(cmd, a, [&](FlowclassClient&, const RuleDiff& d) {
    // In id order, like the file after sync-rules.
    std::map<uint64_t, std::string> lines;
    for (const Rule& r : d.added) lines[r.id] = absl::StrCat("+ ", r.ToString(), "\n");
    for (const Rule& r : d.removed) lines[r.id] = absl::StrCat("- ", r.ToString(), "\n");
    for (const auto& [old_rule, new_rule] : d.changed)
      lines[old_rule.id] =
          absl::StrCat("- ", old_rule.ToString(), "\n+ ", new_rule.ToString(), "\n");
    NodeResult r;
    for (const auto& [id, text] : lines) r.out += text;
    r.ack = absl::StrCat("added=", d.added.size(), " removed=", d.removed.size(),
                         " changed=", d.changed.size(), " unchanged=", d.unchanged);
    absl::StrAppend(&r.out, "diff-rules: ", r.ack, "\n");
    r.code = d.empty() ? kCtlExitOk : kCtlExitDiffers;
    return r;
  });
}

int SyncRules(absl::string_view cmd, const Args& a) {
  return RunOnDiff(cmd, a, [&](FlowclassClient& client, const RuleDiff& d) {
    NodeResult r;
    if (d.empty()) {  // nothing to send; the generation it is in sync at
      absl::StatusOr<v1::GetStatsResponse> st = client.GetStats();
      if (!st.ok()) return Failed(cmd, st.status());
      r.generation = st->generation();
      r.ack = absl::StrCat("in sync, nothing sent: rules=", d.unchanged);
      r.out = absl::StrCat("sync-rules: ", r.ack, " generation=", st->generation(), "\n");
      return r;
    }
    // One batch: all of it or nothing.  Deletes first, then inserts and
    // replacements, in id order.
    v1::ApplyRulesRequest batch;
    batch.set_batch_id(1);
    for (const Rule& rule : d.removed) batch.add_ops()->set_delete_id(rule.id);
    for (const Rule& rule : d.added) RuleToProto(rule, batch.add_ops()->mutable_insert());
    for (const auto& [old_rule, new_rule] : d.changed)
      RuleToProto(new_rule, batch.add_ops()->mutable_replace());
    absl::StatusOr<v1::BatchAck> ack = client.ApplyBatch(batch);
    if (!ack.ok()) return Failed(cmd, ack.status());
    if (ack->status().code() != 0) return Failed(cmd, AckStatus(*ack));
    r.generation = ack->generation();
    r.ack = absl::StrCat("inserted=", ack->inserted(), " replaced=", ack->replaced(),
                         " deleted=", ack->deleted(), " unchanged=", d.unchanged);
    r.out = absl::StrCat("sync-rules: ", r.ack, " generation=", ack->generation(), "\n");
    return r;
  });
}

// add-rules on one server: `ops` streamed in batches (ApplyOps), the
// report of a rejected batch or a broken stream in `err`.
NodeResult ApplyRuleOps(absl::string_view cmd, FlowclassClient& client,
                        const std::vector<RuleOp>& ops, ApplyOptions ao, bool bar,
                        const RulesInput& in) {
  NodeResult res;
  const auto start = std::chrono::steady_clock::now();
  if (bar) {
    ao.progress = [&](size_t done, size_t total) {
      const double s =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      const int width = 30;
      const int fill = total ? static_cast<int>(width * done / total) : width;
      std::fprintf(stderr, "\r[%s%s] %3d%% %zu/%zu rules %.0f rules/s",
                   std::string(static_cast<size_t>(fill), '#').c_str(),
                   std::string(static_cast<size_t>(width - fill), ' ').c_str(),
                   total ? static_cast<int>(100 * done / total) : 100, done, total,
                   s > 0 ? static_cast<double>(done) / s : 0.0);
      std::fflush(stderr);
    };
  }
  ApplyResult partial;
  absl::StatusOr<ApplyResult> r = client.ApplyOps(ops, ao, &partial);
  if (bar) std::fputs("\n", stderr);
  if (!r.ok()) {
    res = Failed(cmd, r.status());
    if (partial.first_error.has_value())
      absl::StrAppendFormat(&res.err,
                            "flowclassctl add-rules: batch %llu was rejected before: %s\n",
                            static_cast<unsigned long long>(partial.first_error->batch_id()),
                            partial.first_error->status().message().c_str());
    if (!ops.empty())
      absl::StrAppendFormat(&res.err, "flowclassctl add-rules: %s\n",
                            StreamFailureReport(partial, ao.batch_size, ops.size()).c_str());
    return res;
  }
  if (r->first_error.has_value()) {
    const v1::BatchAck& e = *r->first_error;
    absl::StrAppendFormat(
        &res.err, "flowclassctl add-rules: batch %llu rejected: %s: %s\n",
        static_cast<unsigned long long>(e.batch_id()),
        absl::StatusCodeToString(static_cast<absl::StatusCode>(e.status().code())).c_str(),
        e.status().message().c_str());
    if (const std::optional<FieldViolation> v = GetFieldViolation(e.status());
        v.has_value() && v->op_index.has_value()) {
      const size_t idx = (e.batch_id() - ao.first_batch_id) * ao.batch_size + *v->op_index;
      if (idx < ops.size())
        absl::StrAppendFormat(&res.err, "  rule #%zu of %s (line %zu, field %s): %s\n", idx + 1,
                              in.source.c_str(), idx < in.lines.size() ? in.lines[idx] : idx + 1,
                              v->field.empty() ? "-" : v->field.c_str(),
                              ops[idx].rule.ToString().c_str());
    }
    // Every batch before the rejected one was applied, so the rest of
    // ops_applied is after it: batches already in flight, applied or
    // rejected on their own.
    const size_t bad = static_cast<size_t>(e.batch_id() - ao.first_batch_id);
    const size_t before = std::min(ops.size(), bad * ao.batch_size);
    const size_t n_after = r->ops_applied - before;
    const std::string after = RulesOfBatchesAfter(r->ok_batches, bad, ao.batch_size, ops.size());
    absl::StrAppendFormat(
        &res.err, "flowclassctl add-rules: %zu of %zu rules applied before it%s%s\n", before,
        ops.size(), before ? absl::StrCat(" (#1-#", before, ")").c_str() : "",
        n_after ? absl::StrCat("; also applied, from batches already in flight after it: ", n_after,
                               " (", after, ")")
                      .c_str()
                : "; none after it");
    res.code = kCtlExitRejected;
    return res;
  }
  res.generation = r->generation;
  res.ack = absl::StrCat("rules=", r->ops_applied, " batches=", r->batches_acked);
  res.out = absl::StrFormat(
      "add-rules: %s generation=%u seconds=%.3f rules_per_s=%.0f\n", res.ack, r->generation,
      r->seconds, r->seconds > 0 ? static_cast<double>(r->ops_applied) / r->seconds : 0.0);
  return res;
}

int DelRules(absl::string_view cmd, const Args& a) {
  const bool all = HasFlag(a, "--all");
  v1::ApplyRulesRequest batch;
  batch.set_batch_id(1);
  for (const std::string& p : a.positional) {
    uint64_t id = 0;
    if (!ParseNativeNumber(p, &id))
      return Usage(cmd, "ID '" + p + "' is not a number (decimal, or hex with 0x)");
    batch.add_ops()->set_delete_id(id);
  }
  if (auto it = a.values.find("--cookie"); it != a.values.end())
    for (const std::string& c : it->second) {
      uint64_t v = 0;
      if (!ParseNativeNumber(c, &v)) return Usage(cmd, "--cookie '" + c + "' is not a number");
      batch.add_ops()->set_delete_cookie(v);
    }
  if (all == (batch.ops_size() > 0)) return Usage(cmd, "give ids and/or --cookie, or --all");
  return RunOnServers(cmd, a, [&](FlowclassClient& client) {
    absl::StatusOr<v1::BatchAck> ack = all ? client.DeleteAll() : client.ApplyBatch(batch);
    if (!ack.ok()) return Failed(cmd, ack.status());
    if (ack->status().code() != 0) return Failed(cmd, AckStatus(*ack));
    NodeResult r;
    r.generation = ack->generation();
    r.ack = absl::StrCat("deleted=", ack->deleted());
    r.out = absl::StrCat("del-rules: ", r.ack, " generation=", ack->generation(), "\n");
    return r;
  });
}

int AddRules(absl::string_view cmd, const Args& a) {
  ApplyOptions ao;
  uint64_t cookie = 0;
  for (absl::Status s : {FlagNumber(a, "--batch-size", &ao.batch_size),
                         FlagNumber(a, "--window", &ao.window), FlagCookie(a, &cookie)})
    if (!s.ok()) return Usage(cmd, std::string(s.message()));
  if (ao.batch_size == 0 || ao.window == 0)
    return Usage(cmd, "--batch-size and --window must be at least 1");
  const std::string progress = FlagString(a, "--progress", "auto");
  if (progress != "auto" && progress != "on" && progress != "off")
    return Usage(cmd, "--progress: auto, on or off");
  // A fleet's nodes answer at once: no bar.
  const bool bar = a.fleet_from.empty() &&
                   (progress == "on" || (progress == "auto" && isatty(STDERR_FILENO)));
  RulesInput in;
  if (std::optional<int> code = ReadRulesInput(cmd, a, &in)) return *code;
  std::vector<RuleOp> ops;
  ops.reserve(in.rules.size());
  for (Rule& r : in.rules) {
    if (HasFlag(a, "--cookie")) r.cookie = cookie;
    ops.push_back(HasFlag(a, "--replace") ? RuleOp::Replace(std::move(r))
                                          : RuleOp::Insert(std::move(r)));
  }
  return RunOnServers(cmd, a, [&](FlowclassClient& client) {
    return ApplyRuleOps(cmd, client, ops, ao, bar, in);
  });
}

int DumpRules(absl::string_view cmd, const Args& a) {
  if (!a.positional.empty()) return Usage(cmd, "no positional arguments");
  v1::ListRulesRequest req;
  uint64_t cookie = 0, limit = 0;
  uint32_t lo = 0, hi = 0;
  for (absl::Status s : {FlagCookie(a, &cookie), FlagNumber(a, "--limit", &limit),
                         FlagNumber(a, "--min-priority", &lo),
                         FlagNumber(a, "--max-priority", &hi)})
    if (!s.ok()) return Usage(cmd, std::string(s.message()));
  if (HasFlag(a, "--cookie")) req.set_cookie(cookie);
  if (HasFlag(a, "--min-priority")) req.set_min_priority(lo);
  if (HasFlag(a, "--max-priority")) req.set_max_priority(hi);
  req.set_limit(limit);
  auto client = Dial(a);
  if (!client.ok()) return Usage(cmd, std::string(client.status().message()));
  absl::StatusOr<std::vector<v1::Rule>> rules = (*client)->ListRules(req);
  if (!rules.ok()) return Fail(cmd, rules.status());
  if (a.json) {  // one ListRulesResponse with every rule (hits included)
    v1::ListRulesResponse page;
    for (v1::Rule& p : *rules) *page.add_rules() = std::move(p);
    PrintStructured(a, page);
    return kCtlExitOk;
  }
  std::string out;
  for (const v1::Rule& p : *rules) {
    Rule r;
    if (absl::Status s = RuleFromProto(p, &r); !s.ok()) return Fail(cmd, s);
    absl::StrAppend(&out, r.ToString());
    if (HasFlag(a, "--hits")) absl::StrAppend(&out, "  # hits=", p.hits());
    out += '\n';
  }
  std::fputs(out.c_str(), stdout);
  return kCtlExitOk;
}

int Stats(absl::string_view cmd, const Args& a) {
  if (!a.positional.empty()) return Usage(cmd, "no positional arguments");
  if (HasFlag(a, "--count") && !HasFlag(a, "--watch"))
    return Usage(cmd, "--count needs --watch");
  double watch = 0;
  uint64_t count = 0;
  // !(watch >= 0.001) also refuses nan; a day at most (inf would not sleep).
  if (HasFlag(a, "--watch") && (!absl::SimpleAtod(FlagString(a, "--watch", ""), &watch) ||
                                !(watch >= 0.001) || watch > 86400))
    return Usage(cmd, "--watch needs a number of seconds from 0.001 to 86400");
  if (absl::Status s = FlagNumber(a, "--count", &count); !s.ok())
    return Usage(cmd, std::string(s.message()));
  if (HasFlag(a, "--count") && count == 0)
    return Usage(cmd, "--count needs a number of reports >= 1 (leave it out to repeat until interrupted)");
  if (!a.fleet_from.empty()) {  // one report a node, in the table
    if (watch > 0) return Usage(cmd, absl::StrCat("--watch reads one server, not ", a.fleet_from));
    return RunOnServers(cmd, a, [&](FlowclassClient& client) {
      absl::StatusOr<v1::GetStatsResponse> st = client.GetStats(false, HasFlag(a, "--rule-hits"));
      if (!st.ok()) return Failed(cmd, st.status());
      NodeResult r;
      r.generation = st->generation();
      r.ack = absl::StrCat("rules=", st->rules(), " pmds=", st->pmds_size(),
                           " packets=", st->total().packets());
      r.json = ToJson(*st);
      return r;
    });
  }
  auto client = Dial(a);
  if (!client.ok()) return Usage(cmd, std::string(client.status().message()));
  std::optional<v1::GetStatsResponse> prev;
  std::chrono::steady_clock::time_point prev_at;
  for (uint64_t n = 1;; ++n) {
    absl::StatusOr<v1::GetStatsResponse> st = (*client)->GetStats(false, HasFlag(a, "--rule-hits"));
    if (!st.ok()) return Fail(cmd, st.status());
    const auto at = std::chrono::steady_clock::now();
    if (a.json) {
      PrintStructured(a, *st);  // JSON lines: one Stats a report, no screen clearing
    } else {
      if (watch > 0 && isatty(STDOUT_FILENO)) std::fputs("\033[H\033[2J", stdout);
      if (watch > 0)
        std::printf("time: %s\n",
                    absl::FormatTime("%Y-%m-%dT%H:%M:%E3SZ", absl::Now(), absl::UTCTimeZone())
                        .c_str());
      std::fputs(FormatStats(*st).c_str(), stdout);
      if (prev.has_value())
        std::fputs(
            WatchRates(*prev, *st, std::chrono::duration<double>(at - prev_at).count()).c_str(),
            stdout);
    }
    prev = *std::move(st);
    prev_at = at;
    std::fflush(stdout);
    if (watch <= 0 || (count && n >= count)) break;
    std::this_thread::sleep_for(std::chrono::duration<double>(watch));
  }
  return kCtlExitOk;
}

// config set KEY=VALUE...: one SetConfig (all or nothing) on each server.
int ConfigSet(absl::string_view cmd, const Args& a) {
  if (a.positional.size() < 2) return Usage(cmd, "set needs KEY=VALUE");
  v1::Config set;
  for (size_t i = 1; i < a.positional.size(); ++i) {
    const std::string& kv = a.positional[i];
    const size_t eq = kv.find('=');
    if (eq == std::string::npos || eq == 0) return Usage(cmd, "'" + kv + "' is not KEY=VALUE");
    if (!set.mutable_values()->insert({kv.substr(0, eq), kv.substr(eq + 1)}).second)
      return Usage(cmd, absl::StrCat(kv.substr(0, eq), " is set more than once"));
  }
  return RunOnServers(cmd, a, [&](FlowclassClient& client) {
    absl::StatusOr<v1::Config> c = client.SetConfig(set);
    if (!c.ok()) return Failed(cmd, c.status());
    NodeResult r;
    r.json = ToJson(*c);  // the whole Config after the change
    std::vector<std::string> now;
    for (const auto& [k, v] : std::map<std::string, std::string>(set.values().begin(),
                                                                 set.values().end()))
      now.push_back(absl::StrCat(k, "=", c->values().count(k) ? c->values().at(k) : "?"));
    r.ack = absl::StrJoin(now, " ");
    r.out = a.json ? StructuredText(a, r.json) : absl::StrCat(absl::StrJoin(now, "\n"), "\n");
    return r;
  });
}

int Config(absl::string_view cmd, const Args& a) {
  if (a.positional.empty()) return Usage(cmd, "expected get or set");
  const std::string& verb = a.positional[0];
  if (verb == "set") return ConfigSet(cmd, a);
  if (!a.fleet_from.empty())
    return Usage(cmd, absl::StrCat("config ", verb, " reads one server, not ", a.fleet_from));
  auto client = Dial(a);
  if (!client.ok()) return Usage(cmd, std::string(client.status().message()));
  if (verb == "get") {
    if (a.positional.size() > 2) return Usage(cmd, "get takes at most one KEY");
    absl::StatusOr<v1::Config> c = (*client)->GetConfig();
    if (!c.ok()) return Fail(cmd, c.status());
    std::map<std::string, std::string> sorted(c->values().begin(), c->values().end());
    if (a.positional.size() == 2) {
      auto it = sorted.find(a.positional[1]);
      if (it == sorted.end())
        return Fail(cmd, absl::NotFoundError(absl::StrCat("config key ", QuoteForMessage(a.positional[1], '"'),
                                                          ": unknown")));
      if (a.json) {  // the Config with that one key in values
        v1::Config one;
        (*one.mutable_values())[it->first] = it->second;
        *one.mutable_server() = c->server();
        PrintStructured(a, one);
        return kCtlExitOk;
      }
      std::printf("%s\n", it->second.c_str());
      return kCtlExitOk;
    }
    if (a.json) {
      PrintStructured(a, *c);
      return kCtlExitOk;
    }
    for (const auto& [k, v] : sorted) std::printf("%s=%s\n", k.c_str(), v.c_str());
    return kCtlExitOk;
  }
  return Usage(cmd, "expected get or set, not '" + verb + "'");
}

int Trace(absl::string_view cmd, const Args& a) {
  v1::TraceRequest req;
  if (HasFlag(a, "--packet-hex")) {
    if (!a.positional.empty()) return Usage(cmd, "give FLOW or --packet-hex, not both");
    const std::string hex = FlagString(a, "--packet-hex", "");
    bool hex_ok = !hex.empty() && hex.size() % 2 == 0;
    for (char ch : hex) hex_ok &= absl::ascii_isxdigit(static_cast<unsigned char>(ch));
    if (!hex_ok) return Usage(cmd, "--packet-hex: not a non-empty, even-length hex string");
    const std::string bytes = absl::HexStringToBytes(hex);
    req.set_packet(bytes);
    uint32_t in_port = 0;
    if (absl::Status s = FlagNumber(a, "--in-port", &in_port); !s.ok())
      return Usage(cmd, std::string(s.message()));
    req.set_in_port(in_port);
  } else {
    if (a.positional.size() != 1) return Usage(cmd, "expected one FLOW");
    if (HasFlag(a, "--in-port"))
      return Usage(cmd, "--in-port goes with --packet-hex; a FLOW names its in_port=");
    req.set_flow(a.positional[0]);
  }
  auto client = Dial(a);
  if (!client.ok()) return Usage(cmd, std::string(client.status().message()));
  absl::StatusOr<v1::TraceResponse> t = (*client)->Trace(req);
  if (!t.ok()) return Fail(cmd, t.status());
  if (a.json) {
    PrintStructured(a, *t);
    return kCtlExitOk;
  }
  std::printf("key: %s\n", t->key().c_str());
  // The parser's flags for a frame: what the key is missing and why (a PMD
  // counts such frames as parse_errors and classifies what it could read).
  if (t->parse_flags_size() != 0) {
    std::string why;
    for (const int f : t->parse_flags())
      absl::StrAppend(&why, why.empty() ? "" : ", ",
                      f == v1::PARSE_FLAG_TRUNCATED   ? "truncated (the frame ends inside a header)"
                      : f == v1::PARSE_FLAG_MALFORMED ? "malformed (a header field is invalid)"
                                                      : v1::ParseFlag_Name(f));
    std::printf("parse: %s\n", why.c_str());
  }
  // The layer's enum name without its prefix: "emc", "slow_path", ...
  std::printf("layer: %s\n",
              absl::AsciiStrToLower(absl::StripPrefix(v1::Layer_Name(t->layer()), "LAYER_"))
                  .c_str());
  if (t->has_pmd()) std::printf("pmd: %u\n", t->pmd());
  std::printf("megaflow: %s\nrule subtables visited: %u\n", t->megaflow().c_str(),
              t->rule_subtables_visited());
  if (t->subtables_visited_size()) {
    std::string s;
    for (uint32_t v : t->subtables_visited()) absl::StrAppend(&s, s.empty() ? "" : ",", v);
    std::printf("megaflow subtables probed (ids, in order): %s\n", s.c_str());
  }
  if (t->rule_id())
    std::printf("rule: %s\n", t->rule().c_str());
  else
    std::printf("rule: none (no rule matched)\n");
  std::printf("action: %s\ngeneration: %llu\n",
              t->action().has_drop() ? "drop"
                                     : absl::StrCat("output:", t->action().output_port()).c_str(),
              static_cast<unsigned long long>(t->generation()));
  return kCtlExitOk;
}

int DumpMegaflows(absl::string_view cmd, const Args& a) {
  if (!a.positional.empty()) return Usage(cmd, "no positional arguments");
  v1::DumpMegaflowsRequest req;
  uint32_t in_port = 0, pmd = 0;
  uint64_t rule_id = 0, limit = 0;
  for (absl::Status s : {FlagNumber(a, "--in-port", &in_port), FlagNumber(a, "--rule-id", &rule_id),
                         FlagNumber(a, "--pmd", &pmd), FlagNumber(a, "--limit", &limit)})
    if (!s.ok()) return Usage(cmd, std::string(s.message()));
  if (HasFlag(a, "--in-port")) req.set_in_port(in_port);
  if (HasFlag(a, "--rule-id")) req.set_rule_id(rule_id);
  if (HasFlag(a, "--pmd")) req.set_pmd(pmd);
  req.set_match(FlagString(a, "--match", ""));
  req.set_limit(limit);
  auto client = Dial(a);
  if (!client.ok()) return Usage(cmd, std::string(client.status().message()));
  absl::StatusOr<std::vector<v1::MegaflowEntry>> mfs = (*client)->DumpMegaflows(req);
  if (!mfs.ok()) return Fail(cmd, mfs.status());
  if (a.json) {  // one DumpMegaflowsResponse with every megaflow
    v1::DumpMegaflowsResponse all;
    for (v1::MegaflowEntry& m : *mfs) *all.add_megaflows() = std::move(m);
    PrintStructured(a, all);
    return kCtlExitOk;
  }
  std::string out;
  for (const v1::MegaflowEntry& m : *mfs) absl::StrAppend(&out, FormatMegaflow(m), "\n");
  std::fputs(out.c_str(), stdout);
  return kCtlExitOk;
}

int StatsClear(absl::string_view cmd, const Args& a) {
  if (!a.positional.empty()) return Usage(cmd, "no positional arguments");
  auto client = Dial(a);
  if (!client.ok()) return Usage(cmd, std::string(client.status().message()));
  absl::StatusOr<v1::ClearStatsResponse> r = (*client)->ClearStats();
  if (!r.ok()) return Fail(cmd, r.status());
  std::printf("stats-clear: cleared at generation %llu\n",
              static_cast<unsigned long long>(r->generation()));
  return kCtlExitOk;
}

int LookupImpl(absl::string_view cmd, const Args& a) {
  if (a.positional.empty()) return Usage(cmd, "expected get or set");
  auto client = Dial(a);
  if (!client.ok()) return Usage(cmd, std::string(client.status().message()));
  absl::StatusOr<v1::Config> c;
  if (a.positional[0] == "get" && a.positional.size() == 1) {
    c = (*client)->GetConfig();
  } else if (a.positional[0] == "set" && a.positional.size() == 3) {
    uint32_t prio = 0;
    if (!absl::SimpleAtoi(a.positional[2], &prio))
      return Usage(cmd, "PRIORITY must be a whole number");
    v1::Config set;
    v1::LookupImpl* li = set.add_lookup_impls();
    li->set_name(a.positional[1]);
    li->set_priority(prio);
    c = (*client)->SetConfig(set);
  } else {
    return Usage(cmd, "expected 'get' or 'set NAME PRIORITY'");
  }
  if (!c.ok()) return Fail(cmd, c.status());
  if (a.json) {  // the Config's lookup_impls
    v1::Config impls;
    *impls.mutable_lookup_impls() = c->lookup_impls();
    PrintStructured(a, impls);
    return kCtlExitOk;
  }
  if (c->lookup_impls_size() == 0) std::printf("(the dataplane reports no lookup implementations)\n");
  for (const v1::LookupImpl& li : c->lookup_impls())
    std::printf("%-16s priority %u%s\n", li.name().c_str(), li.priority(),
                li.available() ? "" : " (not available on this CPU)");
  return kCtlExitOk;
}

}  // namespace

bool IsRpcCommand(absl::string_view cmd) { return FindCommand(cmd) != nullptr; }

std::vector<CompletionCommand> RpcCompletionCommands() {
  static const char* const kConn[] = {"--server", "--plaintext", "--ca", "--cert", "--key",
                                      "--server-name", "--token-file", "--timeout-ms", "-o",
                                      "--output", "--help"};
  static const char* const kFleet[] = {"--servers", "--discover", "--rollout"};
  std::vector<CompletionCommand> out;
  for (const Command& c : Commands()) {
    CompletionCommand cc{c.name, c.flags, OptionValuesInHelp(c.help), c.words};
    cc.options.insert(cc.options.end(), std::begin(kConn), std::end(kConn));
    if (c.fleet) cc.options.insert(cc.options.end(), std::begin(kFleet), std::end(kFleet));
    for (auto& [opt, values] : OptionValuesInHelp(kConnHelp))
      if (std::find(cc.options.begin(), cc.options.end(), opt) != cc.options.end())
        cc.values[opt] = values;
    cc.values["-o"] = cc.values["--output"];
    out.push_back(std::move(cc));
  }
  return out;
}

int RunRpcCommand(absl::string_view cmd, const std::vector<absl::string_view>& raw) {
  Args a;
  if (absl::Status s = ParseArgs(raw, *FindCommand(cmd), &a); !s.ok())
    return Usage(cmd, std::string(s.message()));
  if (a.help) {
    std::printf("%s\n%s", FindCommand(cmd)->help, kConnHelp);
    return kCtlExitOk;
  }
  // A fleet's table has json and yaml forms; one server's summary line not.
  if ((cmd == "add-rules" || cmd == "del-rules" || cmd == "replace-rules" ||
       cmd == "sync-rules" || cmd == "diff-rules" || cmd == "stats-clear") &&
      a.fleet_from.empty())
    if (absl::Status s = NoOutputFormat(a); !s.ok()) return Usage(cmd, std::string(s.message()));
  if (absl::Status s = OnlyFlags(a); !s.ok())
    return Usage(cmd, std::string(s.message()));
  if (cmd == "diff-rules") return DiffRules(cmd, a);
  if (cmd == "sync-rules") return SyncRules(cmd, a);
  if (cmd == "add-rules") return AddRules(cmd, a);
  if (cmd == "del-rules") return DelRules(cmd, a);
  if (cmd == "replace-rules") return ReplaceRules(cmd, a);
  if (cmd == "dump-rules") return DumpRules(cmd, a);
  if (cmd == "stats") return Stats(cmd, a);
  if (cmd == "config") return Config(cmd, a);
  if (cmd == "trace") return Trace(cmd, a);
  if (cmd == "lookup-impl") return LookupImpl(cmd, a);
  if (cmd == "dump-megaflows") return DumpMegaflows(cmd, a);
  if (cmd == "stats-clear") return StatsClear(cmd, a);
  return Usage(cmd, "unknown command");
}

}  // namespace flowclass
