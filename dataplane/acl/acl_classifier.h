// acl_classifier.h — a rule set compiled into DPDK rte_acl contexts.
//
// Contract
// --------
// AclClassifier::Build takes the same Rule model a RuleTable takes (every rule
// must pass ValidateRule) and compiles it, once, into up to three rte_acl
// contexts by the key's eth_type: one for IPv4 keys (0x0800), one for IPv6
// keys (0x86dd), one for every other key.  A rule goes into each context
// whose keys it can match; in the IPv4 and IPv6 contexts its eth_type test is
// implied by the choice of context and left out, so a ClassBench IPv4 set
// walks exactly the 5-tuple bytes dpdk-test-acl walks.  The result is
// immutable: a new rule set is a new AclClassifier (the daemon's operating /
// shadow design builds the next one off the PMDs, see docs/acl-pipeline.md).
//
// Input: the ACL reads a 72-byte buffer, the dense Flow (flow.h) with each
// 64-bit word stored big-endian (AclKeyImage), so every field of the Flow
// layout sits at a fixed byte offset in network order, as rte_acl wants:
// word w's bits [63:56] at byte 8w, ... bits [7:0] at byte 8w+7.  Every bit
// of every word is covered by a field definition (kAclFields), so every
// match field the rule model has is expressible: addresses and the other
// fields as bitmask fields (any mask, not only prefixes), ports natively as
// range fields (a prefix-shaped port mask becomes its range; any other port
// mask goes to a second, bitmask definition of the port bytes, which rte_acl
// drops from the trie when no rule uses it, as it drops every input group all
// of whose fields are wildcarded by every rule).
//
// Priorities: rte_acl picks the highest priority among matching rules and
// says nothing about ties.  The rule model's winner is the highest priority,
// then the lowest id (RuleBeats).  So rules are ranked once by RuleBeats and
// the ACL priority is the rank (distinct for every rule): the ACL's winner is
// RuleBeats' winner.  One category is used (category_mask 1); userdata is the
// rule's rank + 1 (0 is rte_acl's "no match").
//
// A rule the build cannot express is rejected, never classified differently:
// Build returns INVALID_ARGUMENT "rule <index> (id <id>): <field>: ..." with
// a RuleOpError payload (rule_error.h) naming the same index, id and field.
// With the field table above this happens only for a mask bit no field
// covers (none today: CheckAclExpressible guards the table) and for a set
// past `max_rules` (RESOURCE_EXHAUSTED, naming the first rule past it).
//
// Threads: Build needs DPDK's EAL initialised (rte_acl allocates from its
// heap; see InitOfflineEal) and runs on a control thread.  Classify and
// ClassifyBurst are const, allocate nothing, lock nothing and may run on
// any number of threads at once (rte_acl_classify_alg is read-only on the
// context); the algorithm and the autovalidator's mismatch counter are
// relaxed atomics.
#ifndef FLOWCLASS_DATAPLANE_ACL_ACL_CLASSIFIER_H_
#define FLOWCLASS_DATAPLANE_ACL_ACL_CLASSIFIER_H_

#include <array>
#include <bit>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "dataplane/acl_algorithm.h"
#include "dataplane/dpcls/megaflow.h"
#include "dataplane/flow/flow.h"
#include "dataplane/rules/rule.h"

struct rte_acl_ctx;

namespace flowclass {

// INVALID_ARGUMENT listing the accepted names (acl_algorithm.h).
absl::StatusOr<AclAlgorithm> ParseAclAlgorithm(std::string_view name);
// OK when this process can run `a` (kDefault and kAutovalidator always):
// rte_acl_set_ctx_classify accepts it here (CPU flags and EAL's max SIMD bit
// width, probed once; EAL must be initialised).  FAILED_PRECONDITION
// "<what>: NAME is not supported here (...; supported: ...)" otherwise.
absl::Status CheckAclAlgorithm(AclAlgorithm a, std::string_view what = "acl algorithm");
// kDefault: the widest implementation this process runs; others as they are.
AclAlgorithm ResolveAclAlgorithm(AclAlgorithm a);
// Test hook: while set to an implementation other than scalar, the
// autovalidator corrupts that implementation's answer for the first key of
// every context it runs (as a broken implementation would), so a test can see
// the disagreement counted.  kDefault: off.  Tests only.
void SetAclAutovalidatorFaultForTesting(AclAlgorithm a);

struct AclOptions {
  AclAlgorithm algorithm = AclAlgorithm::kDefault;
  // Bound on the rules of one build (RESOURCE_EXHAUSTED past it).
  size_t max_rules = 1u << 20;
  // rte_acl_config.max_size: bytes the run-time structures may take; 0: no
  // limit.  Past it rte_acl splits the rules over more tries.
  size_t max_size = 0;
  int socket_id = -1;  // SOCKET_ID_ANY
};

// One rte_acl field definition over the 72-byte AclKeyImage.
struct AclFieldDef {
  const char* name;  // the rule model's field (or "pad" for the filler byte)
  uint8_t type;      // RTE_ACL_FIELD_TYPE_*
  uint8_t size;      // bytes: 1, 2 or 4
  uint8_t offset;    // in the image
  uint8_t input_index;
};
inline constexpr int kAclNumFields = 28;
inline constexpr int kAclKeyBytes = kFlowWords * 8;
extern const std::array<AclFieldDef, kAclNumFields> kAclFields;

// The ACL's input for one key: the dense flow, each word big-endian.
struct alignas(8) AclKeyImage {
  uint8_t bytes[kAclKeyBytes];
};
// The image of a key whose map is the compile-time kMap, unrolled, no loop:
// each present word stored big-endian, each run of absent words zeroed by
// one memset (16- and 32-byte runs: one or two vector stores).
// MakeAclKeyImage's fast paths.
namespace acl_internal {
// Absent words from `w` on (0 when word w is present).
constexpr int AbsentRun(unsigned map, int w) {
  int n = 0;
  while (w + n < kFlowWords && ((map >> (w + n)) & 1u) == 0) ++n;
  return n;
}
}  // namespace acl_internal
template <unsigned kMap>
[[gnu::always_inline]] inline void WriteAclKeyImageOfMap(const uint64_t* words, uint8_t* out) {
  [&]<int... kWord>(std::integer_sequence<int, kWord...>) {
    (
        [&] {
          if constexpr (((kMap >> kWord) & 1u) != 0) {
            const uint64_t v =
                __builtin_bswap64(words[std::popcount(kMap & ((1u << kWord) - 1u))]);
            std::memcpy(out + 8 * kWord, &v, sizeof(v));
          } else if constexpr (kWord == 0 || ((kMap >> (kWord - 1)) & 1u) != 0) {
            std::memset(out + 8 * kWord, 0, 8 * acl_internal::AbsentRun(kMap, kWord));
          }
        }(),
        ...);
  }(std::make_integer_sequence<int, kFlowWords>{});
}

// The maps of the common keys: ClassBench's IPv4 5-tuple (eth_type, the
// addresses, the L4 word) and a parsed IPv4 frame (the same plus eth_dst and
// eth_src); their IPv6 counterparts.
inline constexpr unsigned kAclMapIpv4Tuple =
    1u << kWordMeta | 1u << kWordIpv4 | 1u << kWordL4;
inline constexpr unsigned kAclMapIpv4Frame = kAclMapIpv4Tuple | 1u << kWordEthDst |
                                             1u << kWordEthSrc;
inline constexpr unsigned kAclMapIpv6Tuple = 1u << kWordMeta | 1u << kWordIpv6SrcHi |
                                             1u << kWordIpv6SrcLo | 1u << kWordIpv6DstHi |
                                             1u << kWordIpv6DstLo | 1u << kWordL4;
inline constexpr unsigned kAclMapIpv6Frame = kAclMapIpv6Tuple | 1u << kWordEthDst |
                                             1u << kWordEthSrc;

// Any map: zeroed, then each stored word put in its place (a loop over the
// map).  MakeAclKeyImage's other keys.
void MakeAclKeyImageAnyMap(const FlowKey& key, AclKeyImage* out);

// Inlined: called once per key of every ACL burst.  Written in place: the
// four common maps by the unrolled writer above (9 words, 3 loads + 3
// byte swaps + 6 stores for kAclMapIpv4Tuple), any other by
// MakeAclKeyImageAnyMap.  (Building it in a zeroed temporary and copying
// that made wide loads of narrow stores just made, which the CPU cannot
// forward: a stall per key.)
[[gnu::always_inline]] inline void MakeAclKeyImage(const FlowKey& key, AclKeyImage* out) {
  // Tested in this order, the two IPv4 maps first (a switch became a
  // binary search that tested an IPv6 map first: 2-3 more instructions).
  const unsigned map = key.map;
  if (map == kAclMapIpv4Tuple) {
    WriteAclKeyImageOfMap<kAclMapIpv4Tuple>(key.words.data(), out->bytes);
  } else if (map == kAclMapIpv4Frame) {
    WriteAclKeyImageOfMap<kAclMapIpv4Frame>(key.words.data(), out->bytes);
  } else if (map == kAclMapIpv6Frame) {
    WriteAclKeyImageOfMap<kAclMapIpv6Frame>(key.words.data(), out->bytes);
  } else if (map == kAclMapIpv6Tuple) {
    WriteAclKeyImageOfMap<kAclMapIpv6Tuple>(key.words.data(), out->bytes);
  } else {
    MakeAclKeyImageAnyMap(key, out);
  }
}

// OK when every bit the rule matches on lies in some kAclFields definition;
// otherwise INVALID_ARGUMENT "rule <index> (id <id>): <field>: ...".
absl::Status CheckAclExpressible(const Rule& rule, size_t index);

struct AclBuildStats {
  size_t rules = 0;             // distinct rules given
  size_t acl_rules[3] = {};     // rte_acl rules per context (ipv4, ipv6, other)
  double build_seconds = 0;     // rte_acl_add_rules + rte_acl_build
  // Bytes of DPDK's malloc heap the contexts hold (their rule space and
  // run-time tries): the heap's growth (rte_malloc_get_socket_stats, every
  // socket) across each context's rte_acl_create + add_rules + build.  Other
  // rte_malloc users running at that moment would be counted too (none in
  // flowclassd at run time: one builder thread, pools made at start-up).
  size_t context_bytes = 0;
};

class AclClassifier {
 public:
  // EAL must be initialised.  `rules` need not be sorted; ids must be
  // unique (INVALID_ARGUMENT naming the second one otherwise).
  static absl::StatusOr<std::unique_ptr<AclClassifier>> Build(
      absl::Span<const Rule> rules, const AclOptions& options = {});
  ~AclClassifier();
  AclClassifier(const AclClassifier&) = delete;
  AclClassifier& operator=(const AclClassifier&) = delete;

  // out[i]: the winning rule for keys[i] (nullptr: none), n <= kMaxBurst.
  // The rules live as long as the classifier.
  void ClassifyBurst(const FlowKey* keys, int n, const Rule** out) const;
  // The same on prepared images (each image's eth_type picks the context).
  void ClassifyImages(const AclKeyImage* images, int n, const Rule** out) const;
  // The same as results: results[i] is 0 (no rule) or the winner's rank + 1
  // (RuleOfResult, verdict_table).  What AclPipeline runs.
  void ClassifyImagesToResults(const AclKeyImage* images, int n, uint32_t* results) const;
  // The same from keys, in one pass: each key's image, its data pointer and
  // whether the burst is of one eth_type (then one context, no split).
  // Key j is keys[index[j]], or keys[j] when index is nullptr.  What
  // AclPipeline runs.
  void ClassifyKeysToResults(const FlowKey* keys, const int* index, int n,
                             uint32_t* results) const;
  const Rule* RuleOfResult(uint32_t r) const { return r == 0 ? nullptr : &ranked_[r - 1]; }
  // verdict_table()[r] is result r's verdict ([0]: Verdict{}, no rule): 16
  // bytes a rule, so the verdicts of a burst read a small table instead of
  // the rules themselves (2 MB of them at 10K rules, past the caches).
  const Verdict* verdict_table() const { return verdicts_.data(); }
  // verdict_class()[r]: a number per kind of verdict, equal for results r
  // and s exactly when their verdicts have the same action and both or
  // neither matched a rule (ProcessBurst's "alike"); [0] (no rule) is 0.  A
  // burst's alike test is then one 4-byte compare a packet.
  const uint32_t* verdict_class() const { return verdict_class_.data(); }
  const Rule* Classify(const FlowKey& key) const;

  // What ClassifyBurst runs (kDefault resolved; kAutovalidator stays).
  AclAlgorithm algorithm() const { return algorithm_.load(std::memory_order_relaxed); }
  // Switches the implementation at run time, on any thread, while others
  // classify (each burst reads it once: rte_acl_classify_alg is called with
  // it, the context is not changed).  FAILED_PRECONDITION for one this CPU
  // lacks (the message lists those it has).
  absl::Status SetAlgorithm(AclAlgorithm a);
  // The implementations this CPU runs (scalar first).
  const std::vector<AclAlgorithm>& supported() const { return supported_; }
  // Keys on which some implementation disagreed with scalar (autovalidator).
  uint64_t autovalidator_mismatches() const {
    return mismatches_.load(std::memory_order_relaxed);
  }
  const AclBuildStats& stats() const { return stats_; }
  // Rules in (priority desc, id asc) order: rank r is rules()[r].
  const std::vector<Rule>& rules() const { return ranked_; }

 private:
  AclClassifier() = default;
  void RunContext(int c, const uint8_t** data, uint32_t* results, int n) const;

  std::vector<Rule> ranked_;
  std::vector<Verdict> verdicts_;  // [0] = {}, [r + 1] = ranked_[r]'s
  std::vector<uint32_t> verdict_class_;  // the same indexes
  rte_acl_ctx* ctx_[3] = {nullptr, nullptr, nullptr};
  std::atomic<AclAlgorithm> algorithm_{AclAlgorithm::kScalar};
  std::vector<AclAlgorithm> supported_;
  mutable std::atomic<uint64_t> mismatches_{0};
  AclBuildStats stats_;
};

// Initialises DPDK's EAL for offline use (flowclassctl replay, tests):
// "--no-huge -m <memory_mb> --no-pci --no-shconf --file-prefix=<program>_<pid>"
// and one lcore, lcore 0, on the CPUs the process may run on
// (OfflineEalLcores: EAL then leaves the thread's affinity as it was, so
// `taskset -c 1` keeps it on CPU 1), unless EAL is already up in this
// process (then OK).  --no-shconf: no shared runtime files.  Not for
// flowclassd, which initialises EAL itself (dataplane/dpdk).
absl::Status InitOfflineEal(std::string_view program, int memory_mb = 512);
// "--lcores" for InitOfflineEal: "0@(C1,C2,...)", the CPUs of this thread's
// affinity ("0" if it cannot be read).
std::string OfflineEalLcores();

}  // namespace flowclass

#endif  // FLOWCLASS_DATAPLANE_ACL_ACL_CLASSIFIER_H_
