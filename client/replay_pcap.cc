// replay_pcap.cc — the input of `flowclassctl replay RULES --pcap FILE`:
// every frame of a capture (libpcap's reader; Ethernet link type only),
// parsed by the PMD's own parser, with the rule table's own lookup as the
// verdict each must get.
#include <pcap/pcap.h>

#include <memory>

#include "absl/strings/str_format.h"
#include "client/replay.h"
#include "dataplane/flow/packet_parser.h"
#include "dataplane/rules/rule_table.h"

namespace flowclass {

absl::StatusOr<ReplayInput> LoadPcapReplayInput(const ReplayOptions& options,
                                                absl::Span<const Rule> rules,
                                                PcapReplayCounts* counts) {
  char err[PCAP_ERRBUF_SIZE] = {};
  std::unique_ptr<pcap_t, void (*)(pcap_t*)> p(
      pcap_open_offline(options.pcap_path.c_str(), err), pcap_close);
  if (p == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrFormat("--pcap %s: %s", options.pcap_path, err));
  }
  if (const int link = pcap_datalink(p.get()); link != DLT_EN10MB) {
    const char* name = pcap_datalink_val_to_name(link);
    return absl::InvalidArgumentError(absl::StrFormat(
        "--pcap %s: link type %d (%s), not Ethernet (DLT_EN10MB): the PMD parses "
        "Ethernet frames only",
        options.pcap_path, link, name != nullptr ? name : "unknown"));
  }

  // The reference: the slow path's own rule table, without any cache.
  RuleTable table;
  {
    std::vector<RuleOp> ops;
    ops.reserve(rules.size());
    for (const Rule& r : rules) ops.push_back(RuleOp::Insert(r));
    absl::StatusOr<BatchResult> applied = table.ApplyBatch(ops);
    if (!applied.ok()) {
      return absl::Status(applied.status().code(),
                          absl::StrFormat("%s: %s", options.rules_path,
                                          applied.status().message()));
    }
  }

  *counts = PcapReplayCounts{};
  ReplayInput in;
  pcap_pkthdr* hdr = nullptr;
  const u_char* data = nullptr;
  int rc;
  while ((rc = pcap_next_ex(p.get(), &hdr, &data)) == 1) {
    ++counts->frames;
    // What the capture kept of the frame is what the parser sees; a frame
    // cut by the snap length parses as truncated where its headers end.
    if (hdr->caplen < hdr->len) ++counts->snapped;
    const FlowKey key = ParsePacket(data, hdr->caplen, options.pcap_in_port);
    if (key.flags != 0) ++counts->parse_flagged;
    Flow wc;
    const Rule* r = table.Lookup(key, &wc);
    in.keys.push_back(key);
    in.expected.push_back(r != nullptr ? r->id : 0);
    in.trace_expected.push_back(static_cast<uint32_t>(in.expected.back()));
  }
  if (rc != PCAP_ERROR_BREAK) {
    return absl::DataLossError(absl::StrFormat("--pcap %s: frame %d: %s", options.pcap_path,
                                               counts->frames + 1, pcap_geterr(p.get())));
  }
  if (in.keys.empty()) {
    return absl::InvalidArgumentError(
        absl::StrFormat("--pcap %s: the capture holds no frame", options.pcap_path));
  }
  return in;
}

}  // namespace flowclass
