#include "server/config.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <optional>
#include <regex>
#include <set>
#include <sstream>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/quote.h"
#include "common/text_file.h"
#include "dataplane/cache/cuckoo_distributor.h"
#include "dataplane/dataplane.h"
#include "dataplane/rules/rule_format.h"

namespace flowclass {
namespace {

// Highest lcore id accepted here; EAL checks the real limit (RTE_MAX_LCORE).
// DPDK refuses lcore ids from RTE_MAX_LCORE up (CPUs past it go through
// eal.lcore_map, whose lcore ids are small).
constexpr int kMaxLcoreId = kMaxEalLcores - 1;

#define FC_RETURN_IF_ERROR(expr)          \
  do {                                    \
    absl::Status _st = (expr);            \
    if (!_st.ok()) return _st;            \
  } while (0)

// A key as an error names it: as written when it is a short printable
// word, quoted and escaped otherwise (common/quote.h).
std::string ShownKey(const std::string& k) {
  const bool plain = !k.empty() && k.size() <= 64 &&
                     std::all_of(k.begin(), k.end(), [](char ch) {
                       return absl::ascii_isgraph(static_cast<unsigned char>(ch));
                     });
  return plain ? k : QuoteForMessage(k, '"');
}

// Reads typed values out of a YAML map, remembering which keys were used so
// that unknown ones can be reported.  yaml-cpp throws; we convert to Status.
class MapReader {
 public:
  MapReader(const YAML::Node& node, std::string path)
      : node_(node), path_(std::move(path)) {}

  absl::Status CheckIsMap() const {
    if (!node_ || node_.IsNull()) return absl::OkStatus();
    if (!node_.IsMap())
      return absl::InvalidArgumentError(absl::StrCat(path_, ": must be a mapping"));
    return absl::OkStatus();
  }
  std::string Key(const std::string& k) const {
    return path_.empty() ? k : absl::StrCat(path_, ".", k);
  }
  YAML::Node Get(const std::string& k) {
    used_.insert(k);
    if (!node_ || !node_.IsMap()) return YAML::Node();
    return node_[k];
  }

  template <typename T>
  absl::Status Int(const std::string& k, T* out, int64_t lo, int64_t hi) {
    YAML::Node n = Get(k);
    if (!n || n.IsNull()) return absl::OkStatus();
    int64_t v = 0;
    if (!n.IsScalar() || !absl::SimpleAtoi(n.Scalar(), &v))
      return absl::InvalidArgumentError(
          absl::StrCat(Key(k), ": ", QuoteForMessage(Dump(n), '"'), " is not an integer"));
    if (v < lo || v > hi)
      return absl::InvalidArgumentError(
          absl::StrCat(Key(k), ": ", v, " is outside ", lo, "..", hi));
    *out = static_cast<T>(v);
    return absl::OkStatus();
  }
  absl::Status Bool(const std::string& k, bool* out) {
    YAML::Node n = Get(k);
    if (!n || n.IsNull()) return absl::OkStatus();
    std::string s = n.IsScalar() ? absl::AsciiStrToLower(n.Scalar()) : "";
    if (s == "true" || s == "yes" || s == "on") *out = true;
    else if (s == "false" || s == "no" || s == "off") *out = false;
    else
      return absl::InvalidArgumentError(
          absl::StrCat(Key(k), ": ", QuoteForMessage(Dump(n), '"'), " is not a boolean (true/false)"));
    return absl::OkStatus();
  }
  absl::Status String(const std::string& k, std::string* out) {
    YAML::Node n = Get(k);
    if (!n || n.IsNull()) return absl::OkStatus();
    if (!n.IsScalar())
      return absl::InvalidArgumentError(absl::StrCat(Key(k), ": must be a string"));
    *out = n.Scalar();
    return absl::OkStatus();
  }
  absl::Status StringList(const std::string& k, std::vector<std::string>* out) {
    YAML::Node n = Get(k);
    if (!n || n.IsNull()) return absl::OkStatus();
    if (!n.IsSequence())
      return absl::InvalidArgumentError(absl::StrCat(Key(k), ": must be a list of strings"));
    out->clear();
    for (size_t i = 0; i < n.size(); ++i) {
      if (!n[i].IsScalar())
        return absl::InvalidArgumentError(
            absl::StrCat(Key(k), "[", i, "]: must be a string"));
      out->push_back(n[i].Scalar());
    }
    return absl::OkStatus();
  }
  absl::Status IntList(const std::string& k, std::vector<int>* out, int lo, int hi) {
    YAML::Node n = Get(k);
    if (!n || n.IsNull()) return absl::OkStatus();
    std::vector<std::string> items;
    if (n.IsSequence()) {
      for (size_t i = 0; i < n.size(); ++i) {
        if (!n[i].IsScalar())
          return absl::InvalidArgumentError(
              absl::StrCat(Key(k), "[", i, "]: must be an integer"));
        items.push_back(n[i].Scalar());
      }
    } else if (n.IsScalar()) {  // "1,2" is accepted too (command line)
      items = absl::StrSplit(n.Scalar(), ',', absl::SkipWhitespace());
    } else {
      return absl::InvalidArgumentError(absl::StrCat(Key(k), ": must be a list of integers"));
    }
    out->clear();
    for (size_t i = 0; i < items.size(); ++i) {
      int v = 0;
      if (!absl::SimpleAtoi(items[i], &v) || v < lo || v > hi)
        return absl::InvalidArgumentError(absl::StrCat(
            Key(k), "[", i, "]: ", QuoteForMessage(items[i], '"'), " is not an integer in ", lo, "..", hi));
      out->push_back(v);
    }
    return absl::OkStatus();
  }
  // Error for the first key of the map that no getter asked for.
  absl::Status CheckNoUnknownKeys() const {
    if (!node_ || !node_.IsMap()) return absl::OkStatus();
    for (const auto& kv : node_) {
      const std::string k = kv.first.Scalar();
      if (!used_.count(k))
        return absl::InvalidArgumentError(absl::StrCat(Key(ShownKey(k)), ": unknown key"));
    }
    return absl::OkStatus();
  }

 private:
  static std::string Dump(const YAML::Node& n) {
    if (n.IsScalar()) return n.Scalar();
    std::stringstream ss;
    ss << n;
    return ss.str();
  }
  YAML::Node node_;
  std::string path_;
  std::set<std::string> used_;
};

// yaml-cpp keeps every pair of a mapping, and node[key] finds the first: a
// key written twice would silently take its first value.  Refused instead,
// naming the key's path and both lines, in every mapping of the document.
// The walk counts the nodes it visits, aliases expanded: a document of
// nested aliases (a "billion laughs") is refused at kMaxConfigNodes instead
// of walked for ever, and so is one nested deeper than kMaxConfigDepth (an
// alias inside its own anchor nests for ever; each level would lengthen
// the key path it carries).
constexpr int64_t kMaxConfigNodes = 100000;
// rules.max_rules / rules.max_entries: 2^28 rules would need 90-230 GB of
// table (330-840 bytes a rule), far past any node.
constexpr int64_t kMaxRuleCap = int64_t{1} << 28;
constexpr int kMaxConfigDepth = 32;

absl::Status CheckDuplicateKeys(const YAML::Node& node, const std::string& path,
                                int64_t* budget, int depth = 0) {
  if (--*budget < 0)
    return absl::InvalidArgumentError(absl::StrCat(
        "more than ", kMaxConfigNodes, " YAML nodes (aliases expanded): not a config file"));
  if (depth > kMaxConfigDepth)
    return absl::InvalidArgumentError(absl::StrCat(
        QuoteForMessage(path, '"'), ": nested deeper than ", kMaxConfigDepth,
        " levels (aliases expanded): not a config file"));
  if (node.IsMap()) {
    std::map<std::string, int> seen;  // key -> 1-based line
    for (const auto& kv : node) {
      const std::string k = kv.first.IsScalar() ? kv.first.Scalar() : "";
      const std::string where =
          path.empty() ? ShownKey(k) : absl::StrCat(path, ".", ShownKey(k));
      if (kv.first.IsScalar()) {
        const int line = kv.first.Mark().line + 1;
        auto [it, fresh] = seen.emplace(k, line);
        if (!fresh)
          return absl::InvalidArgumentError(absl::StrCat(
              where, ": duplicate key (line ", line, "; first at line ", it->second, ")"));
      }
      FC_RETURN_IF_ERROR(CheckDuplicateKeys(kv.second, where, budget, depth + 1));
    }
  } else if (node.IsSequence()) {
    for (size_t i = 0; i < node.size(); ++i)
      FC_RETURN_IF_ERROR(
          CheckDuplicateKeys(node[i], absl::StrCat(path, "[", i, "]"), budget, depth + 1));
  }
  return absl::OkStatus();
}


// "a.b.0.c=value": walks (creating maps as needed) and sets the leaf to the
// value parsed as YAML, so "[1,2]" becomes a list and "true" a boolean.
// EAL's --log-level: LEVEL, or TYPE:LEVEL / TYPE-REGEX,LEVEL, several
// separated by spaces are not taken.  LEVEL is 1..8 or a name.  EAL itself
// only warns about a bad one and goes on at its default level.
absl::Status ValidateEalLogLevel(const std::string& v) {
  if (v.empty()) return absl::OkStatus();
  const size_t sep = v.find_last_of(":,");
  const std::string level = sep == std::string::npos ? v : v.substr(sep + 1);
  int n = 0;
  static const char* const kNames[] = {"emergency", "alert",  "critical", "error",
                                       "warning",   "notice", "info",     "debug"};
  bool ok = absl::SimpleAtoi(level, &n) && n >= 1 && n <= 8;
  for (const char* name : kNames) ok |= level == name;
  if (ok && sep != std::string::npos) ok = sep > 0;  // a type before the separator
  if (!ok)
    return absl::InvalidArgumentError(absl::StrCat(
        "eal.log_level: ", QuoteForMessage(v, '"'), " is not LEVEL, TYPE:LEVEL or TYPE-REGEX,LEVEL with LEVEL "
        "1..8 or emergency, alert, critical, error, warning, notice, info, debug"));
  return absl::OkStatus();
}

absl::Status ApplyOverride(YAML::Node& root, const std::string& ov) {
  const size_t eq = ov.find('=');
  if (eq == std::string::npos || eq == 0)
    return absl::InvalidArgumentError(
        absl::StrCat("override ", QuoteForMessage(ov, '"'), ": expected key=value"));
  const std::string key = ov.substr(0, eq);
  const std::string value = ov.substr(eq + 1);
  std::vector<std::string> parts = absl::StrSplit(key, '.');
  YAML::Node value_node;
  // A bracketed IPv6 address ("[::1]", "[::1]:9464") reads as a YAML list:
  // it is an address.  (Lists of lcores and the like have no ':'.)
  static const std::regex kBracketedIpv6(R"(\[[0-9A-Fa-f:.]*:[0-9A-Fa-f:.]*\](:[0-9]+)?)");
  try {
    const bool address_key = absl::EndsWith(key, "address");
    value_node = address_key && std::regex_match(value, kBracketedIpv6) ? YAML::Node(value)
                                                                        : YAML::Load(value);
  } catch (const YAML::Exception& e) {
    value_node = YAML::Node(value);
  }
  // A value such as "rx_pcap=a.pcap,tx_pcap=b.pcap" must stay a string.
  if (!value_node.IsScalar() && !value_node.IsSequence() && !value_node.IsMap())
    value_node = YAML::Node(value);
  YAML::Node cur;
  cur.reset(root);
  for (size_t i = 0; i < parts.size(); ++i) {
    const std::string& p = parts[i];
    if (p.empty())
      return absl::InvalidArgumentError(absl::StrCat("override ", QuoteForMessage(ov, '"'), ": empty key part"));
    const bool last = i + 1 == parts.size();
    size_t index = 0;
    YAML::Node child;
    if (cur.IsSequence()) {
      if (!absl::SimpleAtoi(p, &index) || index > cur.size())
        return absl::InvalidArgumentError(absl::StrCat(
            "override ", QuoteForMessage(ov, '"'), ": ", QuoteForMessage(p, '"'), " is not an index of a list of ",
            cur.size()));
      if (index == cur.size()) cur.push_back(YAML::Node(YAML::NodeType::Map));
      if (last) {
        cur[index] = value_node;
        return absl::OkStatus();
      }
      child.reset(cur[index]);
    } else {
      if (cur.IsScalar())
        return absl::InvalidArgumentError(absl::StrCat(
            "override ", QuoteForMessage(ov, '"'), ": ", QuoteForMessage(p, '"'), " is below a scalar"));
      if (last) {
        cur[p] = value_node;
        return absl::OkStatus();
      }
      if (!cur[p]) cur[p] = YAML::Node(YAML::NodeType::Map);
      child.reset(cur[p]);
    }
    cur.reset(child);
  }
  return absl::OkStatus();
}

absl::Status ConvertPort(const YAML::Node& n, size_t i, PortOptions* p) {
  MapReader r(n, absl::StrCat("ports[", i, "]"));
  if (!n.IsMap())
    return absl::InvalidArgumentError(absl::StrCat("ports[", i, "]: must be a mapping"));
  if (!r.Get("number"))
    return absl::InvalidArgumentError(absl::StrCat("ports[", i, "].number: required"));
  FC_RETURN_IF_ERROR(r.Int("number", &p->number, 0, kMaxPortNumber));
  FC_RETURN_IF_ERROR(r.String("device", &p->device));
  if (p->device.empty())
    return absl::InvalidArgumentError(absl::StrCat("ports[", i, "].device: required"));
  FC_RETURN_IF_ERROR(r.String("args", &p->devargs));
  FC_RETURN_IF_ERROR(r.Bool("poll", &p->poll));
  FC_RETURN_IF_ERROR(r.Int("rx_queues", &p->rx_queues, 1, 64));
  FC_RETURN_IF_ERROR(r.Int("rx_descriptors", &p->rx_descriptors, 32, 16384));
  FC_RETURN_IF_ERROR(r.Int("tx_descriptors", &p->tx_descriptors, 32, 16384));
  FC_RETURN_IF_ERROR(r.Bool("rss", &p->rss));
  FC_RETURN_IF_ERROR(r.Bool("promiscuous", &p->promiscuous));
  return r.CheckNoUnknownKeys();
}

absl::StatusOr<DaemonConfig> Convert(const YAML::Node& root) {
  DaemonConfig c;
  if (root && !root.IsNull() && !root.IsMap())
    return absl::InvalidArgumentError("config: the top level must be a mapping");
  MapReader top(root, "");

  MapReader eal(top.Get("eal"), "eal");
  FC_RETURN_IF_ERROR(eal.CheckIsMap());
  c.eal.file_prefix = "flowclassd";
  FC_RETURN_IF_ERROR(eal.Int("main_lcore", &c.eal.main_lcore, 0, kMaxLcoreId));
  FC_RETURN_IF_ERROR(eal.String("lcore_map", &c.eal.lcore_map));
  FC_RETURN_IF_ERROR(eal.Bool("hugepages", &c.eal.hugepages));
  FC_RETURN_IF_ERROR(eal.Int("memory_mb", &c.eal.memory_mb, 0, 1 << 20));
  FC_RETURN_IF_ERROR(eal.String("file_prefix", &c.eal.file_prefix));
  FC_RETURN_IF_ERROR(eal.Bool("pci", &c.eal.pci));
  FC_RETURN_IF_ERROR(eal.String("log_level", &c.eal.log_level));
  FC_RETURN_IF_ERROR(ValidateEalLogLevel(c.eal.log_level));
  FC_RETURN_IF_ERROR(eal.StringList("extra_args", &c.eal.extra_args));
  FC_RETURN_IF_ERROR(eal.CheckNoUnknownKeys());
  if (!c.eal.hugepages && c.eal.memory_mb == 0)
    return absl::InvalidArgumentError(
        "eal.memory_mb: required when eal.hugepages is false (e.g. 512)");
  if (c.eal.file_prefix.empty() ||
      c.eal.file_prefix.find_first_of("/ \t") != std::string::npos)
    return absl::InvalidArgumentError(
        "eal.file_prefix: must be a non-empty name without '/' or spaces");

  MapReader pmd(top.Get("pmd"), "pmd");
  FC_RETURN_IF_ERROR(pmd.CheckIsMap());
  FC_RETURN_IF_ERROR(pmd.IntList("lcores", &c.dataplane.pmd_lcores, 0, kMaxLcoreId));
  FC_RETURN_IF_ERROR(pmd.Int("burst", &c.dataplane.burst, 1, kMaxBurst));
  FC_RETURN_IF_ERROR(pmd.Int("tx_retries", &c.dataplane.tx_retries, 0, 1000000));
  FC_RETURN_IF_ERROR(pmd.Int("idle_sleep_us", &c.dataplane.idle_sleep_us, 0, 1000000));
  // ---- readiness and the publication deadline (server/readiness.h) ----
  FC_RETURN_IF_ERROR(pmd.Int("publish_timeout_ms", &c.dataplane.publish_timeout_ms, 1,
                             kMaxPublishTimeoutMs));
  FC_RETURN_IF_ERROR(pmd.Int("stall_timeout_ms", &c.pmd_stall_timeout_ms, 10, 600000));
  // ---- end readiness ----
  FC_RETURN_IF_ERROR(pmd.CheckNoUnknownKeys());
  if (c.dataplane.pmd_lcores.empty())
    return absl::InvalidArgumentError("pmd.lcores: required (at least one lcore)");
  if (static_cast<int>(c.dataplane.pmd_lcores.size()) > kMaxPmds)
    return absl::InvalidArgumentError(absl::StrCat("pmd.lcores: at most ", kMaxPmds));
  for (size_t i = 0; i < c.dataplane.pmd_lcores.size(); ++i) {
    const int l = c.dataplane.pmd_lcores[i];
    if (l == c.eal.main_lcore)
      return absl::InvalidArgumentError(absl::StrCat(
          "pmd.lcores[", i, "]: lcore ", l, " is eal.main_lcore (the control core)"));
    for (size_t j = 0; j < i; ++j)
      if (c.dataplane.pmd_lcores[j] == l)
        return absl::InvalidArgumentError(
            absl::StrCat("pmd.lcores[", i, "]: lcore ", l, " is listed twice"));
  }
  c.eal.pmd_lcores = c.dataplane.pmd_lcores;

  MapReader mp(top.Get("mempool"), "mempool");
  FC_RETURN_IF_ERROR(mp.CheckIsMap());
  FC_RETURN_IF_ERROR(mp.Int("mbufs", &c.dataplane.mbufs, 0, 1 << 30));
  FC_RETURN_IF_ERROR(mp.Int("cache", &c.dataplane.mbuf_cache, 0, 512));
  FC_RETURN_IF_ERROR(mp.Int("data_room", &c.dataplane.mbuf_data_room, 256, 65535));
  FC_RETURN_IF_ERROR(mp.CheckNoUnknownKeys());
  // DPDK refuses a pool whose per-lcore cache flush threshold (1.5x the
  // cache) exceeds the pool; say so here rather than at start-up.
  if (c.dataplane.mbufs != 0 &&
      uint64_t{c.dataplane.mbuf_cache} * 3 > uint64_t{c.dataplane.mbufs} * 2)
    return absl::InvalidArgumentError(absl::StrCat(
        "mempool.cache: a cache of ", c.dataplane.mbuf_cache, " mbufs needs a pool of at least ",
        (uint64_t{c.dataplane.mbuf_cache} * 3 + 1) / 2, " (mempool.mbufs is ",
        c.dataplane.mbufs, "): lower mempool.cache or raise mempool.mbufs"));

  YAML::Node ports = top.Get("ports");
  if (!ports || !ports.IsSequence() || ports.size() == 0)
    return absl::InvalidArgumentError("ports: required, a non-empty list");
  if (ports.size() > static_cast<size_t>(kMaxDataplanePorts))
    return absl::InvalidArgumentError(
        absl::StrCat("ports: ", ports.size(), " ports, at most ", kMaxDataplanePorts));
  for (size_t i = 0; i < ports.size(); ++i) {
    PortOptions p;
    FC_RETURN_IF_ERROR(ConvertPort(ports[i], i, &p));
    for (size_t j = 0; j < c.dataplane.ports.size(); ++j) {
      if (c.dataplane.ports[j].number == p.number)
        return absl::InvalidArgumentError(absl::StrCat(
            "ports[", i, "].number: duplicate port number ", p.number,
            " (also ports[", j, "])"));
      if (c.dataplane.ports[j].device == p.device)
        return absl::InvalidArgumentError(absl::StrCat(
            "ports[", i, "].device: duplicate device ", p.device, " (also ports[", j, "])"));
    }
    if (LooksLikePciAddress(p.device)) {
      if (!c.eal.pci)
        return absl::InvalidArgumentError(absl::StrCat(
            "ports[", i, "].device: PCI device ", p.device, " but eal.pci is false"));
      c.eal.pci_allow.push_back(p.devargs.empty() ? p.device
                                                  : p.device + "," + p.devargs);
    } else if (p.device.rfind("net_", 0) != 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "ports[", i, "].device: ", QuoteForMessage(p.device, '"'),
          " is neither a PCI address nor a vdev name (net_pcap0, net_ring0, ...)"));
    } else if (c.eal.pci) {
      // A vdev over PCI devices (net_bonding's slave=0000:3b:00.0,
      // net_failsafe's dev(...)): they are allow-listed so EAL probes them.
      for (absl::string_view token : absl::StrSplit(p.devargs, absl::ByAnyChar(",=()")))
        if (LooksLikePciAddress(std::string(token))) c.eal.pci_allow.emplace_back(token);
    }
    c.dataplane.ports.push_back(p);
  }
  bool any_poll = false;
  for (const PortOptions& p : c.dataplane.ports) any_poll |= p.poll;
  if (!any_poll)
    return absl::InvalidArgumentError("ports: no port has poll: true, nothing to receive");

  MapReader rules(top.Get("rules"), "rules");
  FC_RETURN_IF_ERROR(rules.CheckIsMap());
  FC_RETURN_IF_ERROR(rules.String("file", &c.rules_file));
  FC_RETURN_IF_ERROR(rules.String("format", &c.rules_format));
  // The rule table's caps (RuleTableLimits): a batch that would leave more
  // is refused whole (RESOURCE_EXHAUSTED naming the cap).
  FC_RETURN_IF_ERROR(rules.Int("max_rules", &c.dataplane.limits.max_rules, 1, kMaxRuleCap));
  FC_RETURN_IF_ERROR(
      rules.Int("max_entries", &c.dataplane.limits.max_entries, 1, kMaxRuleCap));
  FC_RETURN_IF_ERROR(rules.CheckNoUnknownKeys());
  if (c.rules_format != "auto" && c.rules_format != "native" &&
      c.rules_format != "classbench")
    return absl::InvalidArgumentError(absl::StrCat(
        "rules.format: ", QuoteForMessage(c.rules_format, '"'), " is not auto, native or classbench"));

  // ---- store: the durable rule store (server/rule_restore.h) ----
  MapReader store(top.Get("store"), "store");
  FC_RETURN_IF_ERROR(store.CheckIsMap());
  FC_RETURN_IF_ERROR(store.String("path", &c.store.path));
  FC_RETURN_IF_ERROR(store.Bool("recover_to_last_consistent", &c.store.recover_to_last_consistent));
  FC_RETURN_IF_ERROR(store.Int("checkpoint_idle_ms", &c.store.checkpoint_idle_ms, 0, 3600000));
  FC_RETURN_IF_ERROR(store.CheckNoUnknownKeys());
  if (YAML::Node p = top.Get("store"); p && p.IsMap() && p["path"] && c.store.path.empty())
    return absl::InvalidArgumentError(
        "store.path: empty; leave the key out for the in-memory mode (rules do not survive a "
        "restart)");
  if (!c.store.path.empty() && c.store.path.front() != '/')
    return absl::InvalidArgumentError(absl::StrCat(
        "store.path: ", QuoteForMessage(c.store.path, '"'), " is not an absolute path (a directory, e.g. "
        "/var/lib/flowclass)"));

  // The run-time pipeline settings' start values: the same dotted keys as
  // SetConfig / `flowclassctl config set` (docs/flowclassd.md).
  PipelineConfig& pc = c.dataplane.pipeline;
  MapReader pl(top.Get("pipeline"), "pipeline");
  FC_RETURN_IF_ERROR(pl.CheckIsMap());
  std::string kind(PipelineKindName(c.dataplane.kind));
  FC_RETURN_IF_ERROR(pl.String("kind", &kind));
  if (std::optional<PipelineKind> k = ParsePipelineKind(kind); !k) {
    return absl::InvalidArgumentError(
        absl::StrCat("pipeline.kind: ", QuoteForMessage(kind, '"'), " is not megaflow or acl"));
  } else {
    c.dataplane.kind = *k;
  }
  std::string acl_algorithm(AclAlgorithmName(c.dataplane.acl_algorithm));
  FC_RETURN_IF_ERROR(pl.String("acl_algorithm", &acl_algorithm));
  if (std::optional<AclAlgorithm> a = ParseAclAlgorithmName(acl_algorithm); !a) {
    return absl::InvalidArgumentError(absl::StrCat("pipeline.acl_algorithm: ",
                                                   QuoteForMessage(acl_algorithm, '"'),
                                                   " is not ", kAclAlgorithmNames));
  } else {
    c.dataplane.acl_algorithm = *a;
  }
  FC_RETURN_IF_ERROR(
      pl.Int("emc_insert_inv_prob", &pc.emc_config.insert_inv_prob, 0, kMaxEmcInsertInvProb));
  FC_RETURN_IF_ERROR(pl.Bool("emc_adaptive", &pc.emc_adaptive));
  // on / off / auto; the booleans it took before auto came stay good.
  std::string smc_mode(CacheModeName(pc.smc));
  FC_RETURN_IF_ERROR(pl.String("smc", &smc_mode));
  if (absl::AsciiStrToLower(smc_mode) == "auto") {
    pc.smc = CacheMode::kAuto;
  } else {
    bool on = pc.smc == CacheMode::kOn;
    if (!pl.Bool("smc", &on).ok())
      return absl::InvalidArgumentError(absl::StrCat("pipeline.smc: ",
                                                     QuoteForMessage(smc_mode, '"'),
                                                     " is not on, off or auto (or true/false)"));
    pc.smc = on ? CacheMode::kOn : CacheMode::kOff;
  }
  std::string cd_mode(CdModeName(pc.cd.mode));
  FC_RETURN_IF_ERROR(pl.String("cd", &cd_mode));
  if (absl::StatusOr<CdMode> m = ParseCdMode(cd_mode); m.ok()) {
    pc.cd.mode = *m;
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("pipeline.cd: ", QuoteForMessage(cd_mode, '"'), " is not on, off or auto"));
  }
  FC_RETURN_IF_ERROR(
      pl.Int("ranking_interval_ms", &pc.ranking_interval_ms, 0, kMaxRankingIntervalMs));
  FC_RETURN_IF_ERROR(
      pl.Int("megaflow_max_idle_ms", &pc.megaflow_max_idle_ms, 0, kMaxMegaflowMaxIdleMs));
  FC_RETURN_IF_ERROR(pl.Int("max_megaflows", &pc.max_megaflows, 1, kMaxMaxMegaflows));
  FC_RETURN_IF_ERROR(
      pl.Int("max_subtables_per_port", &pc.max_subtables_per_port, 1, kMaxMaxSubtablesPerPort));
  FC_RETURN_IF_ERROR(pl.Int("upcall_rate", &pc.upcall_rate, 0, kMaxUpcallRate));
  FC_RETURN_IF_ERROR(pl.Int("upcall_burst", &pc.upcall_burst, 1, kMaxUpcallBurst));
  std::string limit_action(UpcallLimitActionName(pc.upcall_limit_action));
  FC_RETURN_IF_ERROR(pl.String("upcall_limit_action", &limit_action));
  if (absl::StatusOr<UpcallLimitAction> a = ParseUpcallLimitAction(limit_action); a.ok()) {
    pc.upcall_limit_action = *a;
  } else {
    return absl::InvalidArgumentError(absl::StrCat(
        "pipeline.upcall_limit_action: ", QuoteForMessage(limit_action, '"'),
        " is not drop or classify"));
  }
  FC_RETURN_IF_ERROR(
      pl.Int("rare_mask_subtables", &pc.rare_mask_subtables, 0, kMaxMaxSubtablesPerPort));
  FC_RETURN_IF_ERROR(pl.CheckNoUnknownKeys());
  MapReader dl(top.Get("dpcls"), "dpcls");
  FC_RETURN_IF_ERROR(dl.CheckIsMap());
  FC_RETURN_IF_ERROR(dl.Bool("force_scalar", &pc.dpcls.lookup.force_scalar));
  if (YAML::Node prio = dl.Get("lookup_prio"); prio && !prio.IsNull()) {
    if (!prio.IsMap())
      return absl::InvalidArgumentError(
          "dpcls.lookup_prio: must be a mapping of implementation name to priority");
    for (const auto& kv : prio) {
      const std::string name = kv.first.Scalar();
      int v = 0;
      if (!kv.second.IsScalar() || !absl::SimpleAtoi(kv.second.Scalar(), &v))
        return absl::InvalidArgumentError(
            absl::StrCat("dpcls.lookup_prio.", ShownKey(name), ": ",
                         QuoteForMessage(Dump(kv.second), '"'),
                         " is not a whole-number priority in 0..", kMaxLookupPriority));
      if (absl::Status s = pc.dpcls.lookup.Set(name, v); !s.ok())
        return absl::InvalidArgumentError(
            absl::StrCat("dpcls.lookup_prio.", ShownKey(name), ": ", s.message()));
    }
  }
  FC_RETURN_IF_ERROR(dl.CheckNoUnknownKeys());

  MapReader st(top.Get("stats"), "stats");
  FC_RETURN_IF_ERROR(st.CheckIsMap());
  FC_RETURN_IF_ERROR(st.Int("interval_ms", &c.stats_interval_ms, 0, 3600000));
  FC_RETURN_IF_ERROR(st.Bool("final", &c.stats_final));
  FC_RETURN_IF_ERROR(st.CheckNoUnknownKeys());

  MapReader run(top.Get("run"), "run");
  FC_RETURN_IF_ERROR(run.CheckIsMap());
  FC_RETURN_IF_ERROR(run.Int("duration_s", &c.run_duration_s, 0, 1 << 30));
  FC_RETURN_IF_ERROR(run.CheckNoUnknownKeys());

  MapReader log(top.Get("log"), "log");
  FC_RETURN_IF_ERROR(log.CheckIsMap());
  std::string level(LogLevelName(c.log.level)), format(LogFormatName(c.log.format));
  FC_RETURN_IF_ERROR(log.String("level", &level));
  FC_RETURN_IF_ERROR(log.String("format", &format));
  FC_RETURN_IF_ERROR(log.CheckNoUnknownKeys());
  if (std::optional<LogLevel> l = ParseLogLevel(level); l) {
    c.log.level = *l;
  } else {
    return absl::InvalidArgumentError(absl::StrCat(
        "log.level: ", QuoteForMessage(level, '"'), " is not debug, info, warn or error"));
  }
  if (std::optional<LogFormat> f = ParseLogFormat(format); f) {
    c.log.format = *f;
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("log.format: ", QuoteForMessage(format, '"'), " is not text or json"));
  }

  // ---- metrics ----
  MapReader metrics(top.Get("metrics"), "metrics");
  FC_RETURN_IF_ERROR(metrics.CheckIsMap());
  FC_RETURN_IF_ERROR(metrics.Bool("enabled", &c.metrics.enabled));
  FC_RETURN_IF_ERROR(metrics.String("address", &c.metrics.address));
  FC_RETURN_IF_ERROR(metrics.Int("top_subtables", &c.metrics.top_subtables, 0, 1000));
  FC_RETURN_IF_ERROR(metrics.Int("threads", &c.metrics.threads, 1, 64));
  FC_RETURN_IF_ERROR(
      metrics.Int("request_timeout_ms", &c.metrics.request_timeout_ms, 100, 600000));
  FC_RETURN_IF_ERROR(metrics.CheckNoUnknownKeys());
  FC_RETURN_IF_ERROR(ValidateMetricsOptions(c.metrics));
  // ---- end metrics ----
  // ---- grpc ----
  {
    YAML::Node gnode = top.Get("grpc");
    MapReader g(gnode, "grpc");
    FC_RETURN_IF_ERROR(g.CheckIsMap());
    GrpcServerConfig& gc = c.grpc;
    gc.enabled = gnode && !gnode.IsNull();
    FC_RETURN_IF_ERROR(g.Bool("enabled", &gc.enabled));
    FC_RETURN_IF_ERROR(g.String("address", &gc.address));
    FC_RETURN_IF_ERROR(g.Int("port", &gc.port, 0, 65535));
    FC_RETURN_IF_ERROR(g.Bool("plaintext", &gc.plaintext));
    FC_RETURN_IF_ERROR(g.Bool("allow_plaintext_remote", &gc.allow_plaintext_remote));
    FC_RETURN_IF_ERROR(g.String("tls_cert_file", &gc.tls_cert_file));
    FC_RETURN_IF_ERROR(g.String("tls_key_file", &gc.tls_key_file));
    FC_RETURN_IF_ERROR(g.String("tls_ca_file", &gc.tls_ca_file));
    FC_RETURN_IF_ERROR(g.Bool("require_client_cert", &gc.require_client_cert));
    {
      YAML::Node rc = g.Get("require_client_cert");
      if (gc.plaintext && rc && !rc.IsNull() && gc.require_client_cert)
        return absl::InvalidArgumentError(
            "grpc.require_client_cert: needs TLS (plaintext is true)");
    }
    {
      MapReader a(g.Get("auth"), "grpc.auth");
      FC_RETURN_IF_ERROR(a.CheckIsMap());
      FC_RETURN_IF_ERROR(a.Bool("disabled", &gc.auth.disabled));
      FC_RETURN_IF_ERROR(a.StringList("admin", &gc.auth.admin));
      FC_RETURN_IF_ERROR(a.StringList("reader", &gc.auth.reader));
      FC_RETURN_IF_ERROR(a.String("token_file", &gc.auth.token_file));
      FC_RETURN_IF_ERROR(a.CheckNoUnknownKeys());
    }
    FC_RETURN_IF_ERROR(g.Int("max_message_bytes", &gc.max_message_bytes, 1024, 1 << 30));
    FC_RETURN_IF_ERROR(g.Int("max_batch_ops", &gc.max_batch_ops, 1, 1 << 24));
    FC_RETURN_IF_ERROR(g.Int("max_concurrent_streams", &gc.max_concurrent_streams, 1, 10000));
    FC_RETURN_IF_ERROR(
        g.Int("max_streams_per_identity", &gc.max_streams_per_identity, 0, 10000));
    FC_RETURN_IF_ERROR(
        g.Int("stream_idle_timeout_ms", &gc.stream_idle_timeout_ms, 0, 86400000));
    FC_RETURN_IF_ERROR(g.Int("handshake_timeout_ms", &gc.handshake_timeout_ms, 100, 600000));
    FC_RETURN_IF_ERROR(g.Int("keepalive_time_ms", &gc.keepalive_time_ms, 1000, 86400000));
    FC_RETURN_IF_ERROR(g.Int("keepalive_timeout_ms", &gc.keepalive_timeout_ms, 100, 3600000));
    FC_RETURN_IF_ERROR(g.Int("min_client_ping_interval_ms", &gc.min_client_ping_interval_ms, 0,
                             86400000));
    FC_RETURN_IF_ERROR(
        g.Int("max_connection_idle_ms", &gc.max_connection_idle_ms, 1000, 86400000));
    FC_RETURN_IF_ERROR(g.CheckNoUnknownKeys());
    if (gc.enabled) FC_RETURN_IF_ERROR(ValidateGrpcServerConfig(gc));
  }

  FC_RETURN_IF_ERROR(top.CheckNoUnknownKeys());
  return c;
}

}  // namespace

bool LooksLikePciAddress(const std::string& d) {
  // [dddd:]bb:dd.f with hex digits.
  std::vector<std::string> parts = absl::StrSplit(d, ':');
  if (parts.size() != 2 && parts.size() != 3) return false;
  const std::string& last = parts.back();
  const size_t dot = last.find('.');
  if (dot == std::string::npos) return false;
  auto hex = [](const std::string& s, size_t n) {
    if (s.size() != n) return false;
    for (char ch : s)
      if (!absl::ascii_isxdigit(static_cast<unsigned char>(ch))) return false;
    return true;
  };
  if (parts.size() == 3 && !hex(parts[0], 4)) return false;
  return hex(parts[parts.size() - 2], 2) && hex(last.substr(0, dot), 2) &&
         hex(last.substr(dot + 1), 1);
}

absl::StatusOr<DaemonConfig> ParseConfig(const std::string& yaml_text,
                                         const std::vector<std::string>& overrides,
                                         const std::string& origin) {
  YAML::Node root;
  try {
    root = YAML::Load(yaml_text);
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(
        origin, ":", e.mark.line + 1, ":", e.mark.column + 1, ": YAML syntax: ",
        absl::CHexEscape(e.msg.substr(0, 200))));
  }
  try {
    if (!root || root.IsNull()) root = YAML::Node(YAML::NodeType::Map);
    int64_t budget = kMaxConfigNodes;
    if (absl::Status dup = CheckDuplicateKeys(root, "", &budget); !dup.ok())
      return absl::Status(dup.code(), absl::StrCat(origin, ": ", dup.message()));
    for (const std::string& ov : overrides) FC_RETURN_IF_ERROR(ApplyOverride(root, ov));
    absl::StatusOr<DaemonConfig> c = Convert(root);
    if (!c.ok())
      return absl::Status(c.status().code(),
                          absl::StrCat(origin, ": ", c.status().message()));
    return c;
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(
        absl::StrCat(origin, ": ", absl::CHexEscape(std::string(e.what()).substr(0, 200))));
  }
}

absl::StatusOr<DaemonConfig> LoadConfig(const std::string& path,
                                        const std::vector<std::string>& overrides) {
  absl::StatusOr<std::string> text = ReadTextFile(path);
  if (!text.ok())
    return absl::Status(text.status().code(),
                        absl::StrCat("config file ", text.status().message()));
  return ParseConfig(*text, overrides, path);
}

std::string DescribeConfig(const DaemonConfig& c) {
  std::string s;
  absl::StrAppend(&s, "eal args: ", absl::StrJoin(BuildEalArgs(c.eal), " "), "\n");
  absl::StrAppend(&s, "pmd lcores: ", absl::StrJoin(c.dataplane.pmd_lcores, ","),
                  " burst ", c.dataplane.burst, " tx_retries ", c.dataplane.tx_retries,
                  " idle_sleep_us ", c.dataplane.idle_sleep_us, "\n");
  absl::StrAppend(&s, "mempool: mbufs ",
                  c.dataplane.mbufs ? absl::StrCat(c.dataplane.mbufs) : "auto",
                  " cache ", c.dataplane.mbuf_cache, " data_room ",
                  c.dataplane.mbuf_data_room, "\n");
  for (const PortOptions& p : c.dataplane.ports)
    absl::StrAppend(&s, "port ", p.number, ": ", p.device,
                    p.devargs.empty() ? "" : "," + p.devargs,
                    p.poll ? absl::StrCat(" rx_queues ", p.rx_queues) : " tx-only",
                    " rss ", p.rss ? "true" : "false", "\n");
  const PipelineConfig& pc = c.dataplane.pipeline;
  absl::StrAppend(&s, "pipeline.kind: ", PipelineKindName(c.dataplane.kind), "\n");
  if (c.dataplane.kind == PipelineKind::kAcl)
    absl::StrAppend(&s, "pipeline.acl_algorithm: ", AclAlgorithmName(c.dataplane.acl_algorithm),
                    " (checked against this CPU when flowclassd starts)\n");
  absl::StrAppend(&s, "pipeline: emc_insert_inv_prob ", pc.emc_config.insert_inv_prob,
                  " emc_adaptive ", pc.emc_adaptive ? "on" : "off", " smc ",
                  std::string(CacheModeName(pc.smc)), " cd ", std::string(CdModeName(pc.cd.mode)),
                  " ranking_interval_ms ", pc.ranking_interval_ms, "\n");
  absl::StrAppend(&s, "megaflows: max_megaflows ", pc.max_megaflows, " max_subtables_per_port ",
                  pc.max_subtables_per_port, " megaflow_max_idle_ms ", pc.megaflow_max_idle_ms,
                  "\n");
  absl::StrAppend(&s, "upcalls: upcall_rate ", pc.upcall_rate, " upcall_burst ", pc.upcall_burst,
                  " upcall_limit_action ", std::string(UpcallLimitActionName(pc.upcall_limit_action)),
                  " rare_mask_subtables ", pc.rare_mask_subtables, "\n");
  absl::StrAppend(&s, "dpcls: ", pc.dpcls.lookup.ToString(), "\n");
  absl::StrAppend(&s, "rules: ", c.rules_file.empty() ? "(none)" : c.rules_file,
                  " format ", c.rules_format, " max_rules ", c.dataplane.limits.max_rules,
                  " max_entries ", c.dataplane.limits.max_entries, "\n");
  absl::StrAppend(&s, "store: ",
                  c.store.path.empty() ? "(none: in memory, rules do not survive a restart)"
                                       : c.store.path + "/rules.db",
                  c.store.recover_to_last_consistent ? " recover_to_last_consistent" : "",
                  c.store.path.empty() ? ""
                                       : absl::StrCat(" checkpoint_idle_ms ",
                                                      c.store.checkpoint_idle_ms),
                  "\n");
  absl::StrAppend(&s, "log: level ", std::string(LogLevelName(c.log.level)), " format ",
                  std::string(LogFormatName(c.log.format)), "\n");
  absl::StrAppend(&s, "metrics: ",
                  c.metrics.enabled ? absl::StrCat("http://", c.metrics.address,
                                                   "/metrics top_subtables ",
                                                   c.metrics.top_subtables, " threads ",
                                                   c.metrics.threads, " request_timeout_ms ",
                                                   c.metrics.request_timeout_ms)
                                    : "off",
                  "\n");
  if (c.grpc.enabled)
    absl::StrAppend(&s, "grpc: ", GrpcListenAddress(c.grpc),
                    c.grpc.plaintext ? " plaintext" : " tls",
                    !c.grpc.plaintext && c.grpc.require_client_cert
                        ? " (client certificates required)"
                        : "",
                    "\n",
                    "grpc auth: ",
                    GrpcAuthEnabled(c.grpc)
                        ? absl::StrCat(c.grpc.auth.admin.size(), " admin and ",
                                       c.grpc.auth.reader.size(), " reader certificate names",
                                       c.grpc.auth.token_file.empty()
                                           ? ""
                                           : absl::StrCat(", tokens from ", c.grpc.auth.token_file))
                        : absl::StrCat("off (", GrpcAuthWarning(c.grpc), ")"),
                    "\n",
                    "grpc limits: max_concurrent_streams ", c.grpc.max_concurrent_streams,
                    " max_streams_per_identity ", StreamsPerIdentity(c.grpc),
                    " stream_idle_timeout_ms ", c.grpc.stream_idle_timeout_ms,
                    " handshake_timeout_ms ", c.grpc.handshake_timeout_ms,
                    " keepalive_time_ms ", c.grpc.keepalive_time_ms,
                    " keepalive_timeout_ms ", c.grpc.keepalive_timeout_ms,
                    " min_client_ping_interval_ms ", c.grpc.min_client_ping_interval_ms,
                    " max_connection_idle_ms ", c.grpc.max_connection_idle_ms, "\n");
  return s;
}

}  // namespace flowclass
