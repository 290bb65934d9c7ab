// acl_classifier.cc — rules to rte_acl contexts, and the burst classify.
#include "dataplane/acl/acl_classifier.h"

#include <rte_acl.h>
#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_lcore.h>
#include <rte_malloc.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string>
#include <mutex>
#include <tuple>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/quote.h"
#include "dataplane/rules/rule_error.h"

namespace flowclass {
namespace {

constexpr uint8_t kBitmask = RTE_ACL_FIELD_TYPE_BITMASK;
constexpr uint8_t kRange = RTE_ACL_FIELD_TYPE_RANGE;

// Context index by key eth_type.
constexpr int kCtxIpv4 = 0;
constexpr int kCtxIpv6 = 1;
constexpr int kCtxOther = 2;
constexpr const char* kCtxName[3] = {"ipv4", "ipv6", "other"};

// Field indexes with a special role.
constexpr int kFieldTpSrcRange = 3;
constexpr int kFieldTpDstRange = 4;
constexpr int kFieldPad = 13;
constexpr int kFieldEthType = 19;
constexpr int kFieldTpSrcMask = 26;
constexpr int kFieldTpDstMask = 27;

RTE_ACL_RULE_DEF(AclRule, kAclNumFields);

int ContextOfEthType(uint16_t eth_type) {
  return eth_type == kEthTypeIpv4 ? kCtxIpv4 : eth_type == kEthTypeIpv6 ? kCtxIpv6 : kCtxOther;
}

// Bits of the field definition `d` within its word, as a mask over the word.
uint64_t DefWordMask(const AclFieldDef& d) {
  const int shift = (8 - d.offset % 8 - d.size) * 8;
  const uint64_t ones = d.size == 8 ? ~uint64_t{0} : ((uint64_t{1} << (8 * d.size)) - 1);
  return ones << shift;
}
uint64_t DefBits(const AclFieldDef& d, const Flow& f) {
  const int shift = (8 - d.offset % 8 - d.size) * 8;
  return (f.w[d.offset / 8] & DefWordMask(d)) >> shift;
}

void SetU(rte_acl_field_types* u, int size, uint64_t v) {
  switch (size) {
    case 1: u->u8 = static_cast<uint8_t>(v); break;
    case 2: u->u16 = static_cast<uint16_t>(v); break;
    default: u->u32 = static_cast<uint32_t>(v); break;
  }
}

// A 16-bit mask of the shape 1..10..0 (0 included).
bool IsPrefixMask16(uint16_t m) {
  const uint16_t inv = static_cast<uint16_t>(~m);
  return (inv & (inv + 1)) == 0;
}

enum rte_acl_classify_alg ToRte(AclAlgorithm a) {
  switch (a) {
    case AclAlgorithm::kScalar: return RTE_ACL_CLASSIFY_SCALAR;
    case AclAlgorithm::kSse: return RTE_ACL_CLASSIFY_SSE;
    case AclAlgorithm::kAvx2: return RTE_ACL_CLASSIFY_AVX2;
    case AclAlgorithm::kAvx512x16: return RTE_ACL_CLASSIFY_AVX512X16;
    case AclAlgorithm::kAvx512x32: return RTE_ACL_CLASSIFY_AVX512X32;
    default: return RTE_ACL_CLASSIFY_DEFAULT;
  }
}

constexpr AclAlgorithm kConcrete[] = {AclAlgorithm::kScalar, AclAlgorithm::kSse,
                                      AclAlgorithm::kAvx2, AclAlgorithm::kAvx512x16,
                                      AclAlgorithm::kAvx512x32};

std::atomic<uint32_t> g_ctx_serial{0};

std::string NextCtxName(const char* what) {
  return absl::StrFormat("fcacl%u_%s", g_ctx_serial.fetch_add(1), what);
}

// The implementations rte_acl_set_ctx_classify accepts here (CPU flags and
// EAL's max SIMD bit width), probed once on an empty context.
const std::vector<AclAlgorithm>& SupportedAlgorithms() {
  static std::once_flag once;
  static std::vector<AclAlgorithm> supported;
  std::call_once(once, [] {
    const std::string name = NextCtxName("probe");
    rte_acl_param p{};
    p.name = name.c_str();
    p.socket_id = SOCKET_ID_ANY;
    p.rule_size = RTE_ACL_RULE_SZ(kAclNumFields);
    p.max_rule_num = 1;
    rte_acl_ctx* ctx = rte_acl_create(&p);
    if (ctx == nullptr) {
      supported.push_back(AclAlgorithm::kScalar);
      return;
    }
    for (AclAlgorithm a : kConcrete)
      if (rte_acl_set_ctx_classify(ctx, ToRte(a)) == 0) supported.push_back(a);
    rte_acl_free(ctx);
    if (supported.empty()) supported.push_back(AclAlgorithm::kScalar);
  });
  return supported;
}

// SetAclAutovalidatorFaultForTesting's implementation (kDefault: none).
std::atomic<AclAlgorithm> g_autovalidator_fault{AclAlgorithm::kDefault};

// Bytes allocated from DPDK's malloc heaps, over every socket.
size_t HeapAllocatedBytes() {
  size_t total = 0;
  for (unsigned i = 0; i < rte_socket_count(); ++i) {
    rte_malloc_socket_stats st{};
    if (rte_malloc_get_socket_stats(rte_socket_id_by_idx(i), &st) == 0)
      total += st.heap_allocsz_bytes;
  }
  return total;
}

absl::Status RuleStatus(absl::StatusCode code, RuleErrorKind kind, size_t index,
                        uint64_t id, RuleField field, absl::string_view name,
                        absl::string_view problem) {
  absl::Status s(code, absl::StrFormat("rule %d (id %d): %s: %s", index, id, name, problem));
  RuleOpError e;
  e.kind = kind;
  e.field = field;
  e.has_op = true;
  e.index = static_cast<uint32_t>(index);
  e.rule_id = id;
  SetRuleOpError(&s, e);
  return s;
}

RuleField RuleFieldOfName(absl::string_view name) {
  for (int f = 0; f < kFieldCount; ++f)
    if (name == kFieldInfo[f].name) return RuleFieldOf(static_cast<Field>(f));
  return RuleField::kMatch;
}

// The rte_acl rule of `r` (rank `rank` of `n`) for context `c`.
void ToAclRule(const Rule& r, size_t rank, size_t n, int c, AclRule* out) {
  *out = AclRule{};
  out->data.category_mask = 1;
  out->data.priority = static_cast<int32_t>(n - rank);  // [1, n]: rank 0 highest
  out->data.userdata = static_cast<uint32_t>(rank + 1);
  const Match& m = r.match;
  for (int i = 0; i < kAclNumFields; ++i) {
    const AclFieldDef& d = kAclFields[i];
    rte_acl_field* f = &out->field[i];
    if (d.type == kRange) continue;  // below
    if (i == kFieldPad || i == kFieldTpSrcMask || i == kFieldTpDstMask) continue;
    if (i == kFieldEthType && c != kCtxOther) continue;  // implied by the context
    SetU(&f->value, d.size, DefBits(d, m.value));
    SetU(&f->mask_range, d.size, DefBits(d, m.mask));
  }
  struct Port {
    Field field;
    const PortRange* range;
    int range_index, mask_index;
  };
  const Port ports[2] = {{Field::kTpSrc, &m.tp_src, kFieldTpSrcRange, kFieldTpSrcMask},
                         {Field::kTpDst, &m.tp_dst, kFieldTpDstRange, kFieldTpDstMask}};
  for (const Port& p : ports) {
    const uint16_t v = static_cast<uint16_t>(m.value.Get(p.field));
    const uint16_t mask = static_cast<uint16_t>(m.mask.Get(p.field));
    uint16_t lo = p.range->lo, hi = p.range->hi;
    if (mask != 0) {
      if (IsPrefixMask16(mask)) {
        lo = v;
        hi = static_cast<uint16_t>(v | static_cast<uint16_t>(~mask));
      } else {
        lo = 0;
        hi = 0xffff;
        out->field[p.mask_index].value.u16 = v;
        out->field[p.mask_index].mask_range.u16 = mask;
      }
    }
    out->field[p.range_index].value.u16 = lo;
    out->field[p.range_index].mask_range.u16 = hi;
  }
}

// Contexts a rule belongs in: the key eth_types it can match.
uint32_t ContextsOf(const Rule& r) {
  const uint16_t m = static_cast<uint16_t>(r.match.mask.Get(Field::kEthType));
  const uint16_t v = static_cast<uint16_t>(r.match.value.Get(Field::kEthType));
  const bool v4 = (kEthTypeIpv4 & m) == v;
  const bool v6 = (kEthTypeIpv6 & m) == v;
  const uint32_t matching = 1u << (16 - std::popcount(m));  // eth_types it matches
  const bool other = matching > static_cast<uint32_t>(v4) + static_cast<uint32_t>(v6);
  return (v4 ? 1u << kCtxIpv4 : 0) | (v6 ? 1u << kCtxIpv6 : 0) |
         (other ? 1u << kCtxOther : 0);
}

}  // namespace

// Word w of the image is big-endian at bytes 8w..8w+7; see the header.
// Input groups are 4 bytes, as rte_acl reads them; field 0 is the one byte
// rte_acl requires first.  Order: the 5-tuple first (dpdk-test-acl's order),
// IPv6, then the rest.
const std::array<AclFieldDef, kAclNumFields> kAclFields = {{
    {"nw_proto", kBitmask, 1, 64, 0},
    {"ipv4_src", kBitmask, 4, 24, 1},
    {"ipv4_dst", kBitmask, 4, 28, 2},
    {"tp_src", kRange, 2, 68, 3},
    {"tp_dst", kRange, 2, 70, 3},
    {"ipv6_src_hi", kBitmask, 4, 32, 4},
    {"ipv6_src_hi", kBitmask, 4, 36, 5},
    {"ipv6_src_lo", kBitmask, 4, 40, 6},
    {"ipv6_src_lo", kBitmask, 4, 44, 7},
    {"ipv6_dst_hi", kBitmask, 4, 48, 8},
    {"ipv6_dst_hi", kBitmask, 4, 52, 9},
    {"ipv6_dst_lo", kBitmask, 4, 56, 10},
    {"ipv6_dst_lo", kBitmask, 4, 60, 11},
    {"pad", kBitmask, 1, 64, 12},
    {"nw_tos", kBitmask, 1, 65, 12},
    {"nw_ttl", kBitmask, 1, 66, 12},
    {"nw_frag", kBitmask, 1, 67, 12},
    {"in_port", kBitmask, 4, 4, 13},
    {"tcp_flags", kBitmask, 2, 0, 14},
    {"eth_type", kBitmask, 2, 2, 14},
    {"vlan0_tci", kBitmask, 2, 8, 15},
    {"eth_dst", kBitmask, 2, 10, 15},
    {"eth_dst", kBitmask, 4, 12, 16},
    {"vlan1_tci", kBitmask, 2, 16, 17},
    {"eth_src", kBitmask, 2, 18, 17},
    {"eth_src", kBitmask, 4, 20, 18},
    {"tp_src", kBitmask, 2, 68, 19},
    {"tp_dst", kBitmask, 2, 70, 19},
}};

absl::StatusOr<AclAlgorithm> ParseAclAlgorithm(std::string_view name) {
  if (std::optional<AclAlgorithm> a = ParseAclAlgorithmName(name)) return *a;
  return absl::InvalidArgumentError(absl::StrCat(
      "acl algorithm: ", QuoteForMessage(absl::string_view(name.data(), name.size()), '"'),
      " is not ", kAclAlgorithmNames));
}

absl::Status CheckAclAlgorithm(AclAlgorithm a, std::string_view what) {
  if (a == AclAlgorithm::kDefault || a == AclAlgorithm::kAutovalidator) return absl::OkStatus();
  const std::vector<AclAlgorithm>& supported = SupportedAlgorithms();
  if (std::find(supported.begin(), supported.end(), a) != supported.end())
    return absl::OkStatus();
  std::vector<std::string> names;
  for (AclAlgorithm s : supported) names.push_back(AclAlgorithmName(s));
  return absl::FailedPreconditionError(absl::StrCat(
      absl::string_view(what.data(), what.size()), ": ", AclAlgorithmName(a),
      " is not supported here (CPU flags or EAL's max SIMD bit width; supported: ",
      absl::StrJoin(names, ", "), ")"));
}

AclAlgorithm ResolveAclAlgorithm(AclAlgorithm a) {
  // kConcrete's order: the widest last.
  return a == AclAlgorithm::kDefault ? SupportedAlgorithms().back() : a;
}

void SetAclAutovalidatorFaultForTesting(AclAlgorithm a) {
  g_autovalidator_fault.store(a, std::memory_order_relaxed);
}

absl::Status CheckAclExpressible(const Rule& rule, size_t index) {
  // Bits the definitions cover, per word (ports: the range and bitmask
  // definitions cover the same bytes).
  static const Flow covered = [] {
    Flow f;
    for (const AclFieldDef& d : kAclFields) f.w[d.offset / 8] |= DefWordMask(d);
    return f;
  }();
  for (int i = 0; i < kFlowWords; ++i) {
    const uint64_t outside = rule.match.mask.w[i] & ~covered.w[i];
    if (outside == 0) continue;
    const char* name = "match";
    for (const FieldInfo& fi : kFieldInfo)
      if (fi.word == i && (fi.Mask() & outside) != 0) name = fi.name;
    return RuleStatus(absl::StatusCode::kInvalidArgument, RuleErrorKind::kInvalid, index,
                      rule.id, RuleFieldOfName(name), name,
                      absl::StrFormat("mask bits 0x%016x of word %d are outside every ACL "
                                      "field definition",
                                      outside, i));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<AclClassifier>> AclClassifier::Build(
    absl::Span<const Rule> rules, const AclOptions& options) {
  if (rte_lcore_count() == 0) {
    return absl::FailedPreconditionError("acl: DPDK EAL is not initialised");
  }
  std::unique_ptr<AclClassifier> c(new AclClassifier());
  const std::vector<AclAlgorithm>& supported = SupportedAlgorithms();
  c->supported_ = supported;
  {
    absl::Status s = c->SetAlgorithm(options.algorithm);
    if (!s.ok()) return s;
  }

  // Checks, with the rule's position in the caller's span.
  absl::flat_hash_set<uint64_t> ids;
  ids.reserve(rules.size());
  for (size_t i = 0; i < rules.size(); ++i) {
    const Rule& r = rules[i];
    if (i >= options.max_rules) {
      return RuleStatus(absl::StatusCode::kResourceExhausted, RuleErrorKind::kLimit, i, r.id,
                        RuleField::kMaxRules, "max_rules",
                        absl::StrFormat("the ACL build takes at most %d rules",
                                        options.max_rules));
    }
    if (!ids.insert(r.id).second) {
      return RuleStatus(absl::StatusCode::kInvalidArgument, RuleErrorKind::kAlreadyExists, i,
                        r.id, RuleField::kId, "id", "duplicate rule id");
    }
    absl::Status s = ValidateRule(r);
    if (!s.ok()) {
      absl::Status e(s.code(), absl::StrCat("rule ", i, " (id ", r.id, "): ", s.message()));
      RuleOpError payload = GetRuleOpError(s).value_or(RuleOpError{});
      payload.has_op = true;
      payload.index = static_cast<uint32_t>(i);
      payload.rule_id = r.id;
      SetRuleOpError(&e, payload);
      return e;
    }
    absl::Status x = CheckAclExpressible(r, i);
    if (!x.ok()) return x;
  }
  if (rules.size() >= static_cast<size_t>(RTE_ACL_MAX_PRIORITY)) {
    return absl::ResourceExhaustedError("acl: more rules than rte_acl priorities");
  }

  c->ranked_.assign(rules.begin(), rules.end());
  std::sort(c->ranked_.begin(), c->ranked_.end(), RuleBeats);
  c->stats_.rules = c->ranked_.size();
  c->verdicts_.assign(1, Verdict{});
  c->verdicts_.reserve(c->ranked_.size() + 1);
  for (const Rule& r : c->ranked_) c->verdicts_.push_back(Verdict{r.id, r.action});
  {
    // One class per distinct (matched, action kind, port), as ProcessBurst's
    // alike compares them; the no-rule verdict's is 0.
    absl::flat_hash_map<std::tuple<bool, uint8_t, uint32_t>, uint32_t> classes;
    c->verdict_class_.reserve(c->verdicts_.size());
    for (const Verdict& v : c->verdicts_) {
      const auto k = std::make_tuple(v.rule_id != 0, static_cast<uint8_t>(v.action.kind),
                                     v.action.port);
      c->verdict_class_.push_back(
          classes.emplace(k, static_cast<uint32_t>(classes.size())).first->second);
    }
  }
  const size_t n = c->ranked_.size();

  std::vector<AclRule> acl[3];
  for (size_t rank = 0; rank < n; ++rank) {
    const uint32_t ctxs = ContextsOf(c->ranked_[rank]);
    for (int k = 0; k < 3; ++k) {
      if (!(ctxs & (1u << k))) continue;
      acl[k].emplace_back();
      ToAclRule(c->ranked_[rank], rank, n, k, &acl[k].back());
    }
  }

  rte_acl_config cfg{};
  cfg.num_categories = 1;
  cfg.num_fields = kAclNumFields;
  cfg.max_size = options.max_size;
  for (int i = 0; i < kAclNumFields; ++i) {
    cfg.defs[i].type = kAclFields[i].type;
    cfg.defs[i].size = kAclFields[i].size;
    cfg.defs[i].field_index = static_cast<uint8_t>(i);
    cfg.defs[i].input_index = kAclFields[i].input_index;
    cfg.defs[i].offset = kAclFields[i].offset;
  }

  const auto t0 = std::chrono::steady_clock::now();
  for (int k = 0; k < 3; ++k) {
    c->stats_.acl_rules[k] = acl[k].size();
    if (acl[k].empty()) continue;  // no context: every key of this kind misses
    const std::string name = NextCtxName(kCtxName[k]);
    const size_t heap_before = HeapAllocatedBytes();
    rte_acl_param p{};
    p.name = name.c_str();
    p.socket_id = options.socket_id < 0 ? SOCKET_ID_ANY : options.socket_id;
    p.rule_size = RTE_ACL_RULE_SZ(kAclNumFields);
    p.max_rule_num = static_cast<uint32_t>(acl[k].size());
    rte_acl_ctx* ctx = rte_acl_create(&p);
    if (ctx == nullptr) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "acl: rte_acl_create (", kCtxName[k], " context): ", rte_strerror(rte_errno)));
    }
    c->ctx_[k] = ctx;  // freed by the destructor from here on
    int rc = rte_acl_add_rules(ctx, reinterpret_cast<const rte_acl_rule*>(acl[k].data()),
                               static_cast<uint32_t>(acl[k].size()));
    if (rc != 0) {
      return absl::InternalError(absl::StrCat("acl: rte_acl_add_rules (", kCtxName[k],
                                              " context): ", rte_strerror(-rc)));
    }
    rte_acl_config built = cfg;  // rte_acl_build may edit its copy only
    rc = rte_acl_build(ctx, &built);
    if (rc != 0) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "acl: rte_acl_build (", kCtxName[k], " context, ", acl[k].size(),
          " rules): ", rte_strerror(-rc),
          rc == -ENOMEM ? " (EAL memory, or acl max_size, too small)" : ""));
    }
    const size_t heap_after = HeapAllocatedBytes();
    if (heap_after > heap_before) c->stats_.context_bytes += heap_after - heap_before;
  }
  c->stats_.build_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return c;
}

absl::Status AclClassifier::SetAlgorithm(AclAlgorithm a) {
  if (absl::Status s = CheckAclAlgorithm(a); !s.ok()) return s;
  algorithm_.store(ResolveAclAlgorithm(a), std::memory_order_relaxed);
  return absl::OkStatus();
}

AclClassifier::~AclClassifier() {
  for (rte_acl_ctx* ctx : ctx_)
    if (ctx != nullptr) rte_acl_free(ctx);
}

void AclClassifier::RunContext(int c, const uint8_t** data, uint32_t* results, int n) const {
  rte_acl_ctx* ctx = ctx_[c];
  if (ctx == nullptr) {
    for (int i = 0; i < n; ++i) results[i] = 0;
    return;
  }
  const AclAlgorithm alg = algorithm_.load(std::memory_order_relaxed);
  if (alg != AclAlgorithm::kAutovalidator) {
    rte_acl_classify_alg(ctx, data, results, static_cast<uint32_t>(n), 1, ToRte(alg));
    return;
  }
  rte_acl_classify_alg(ctx, data, results, static_cast<uint32_t>(n), 1,
                       RTE_ACL_CLASSIFY_SCALAR);
  uint32_t other[kMaxBurst];
  uint64_t bad = 0;
  const AclAlgorithm fault = g_autovalidator_fault.load(std::memory_order_relaxed);
  for (AclAlgorithm a : supported_) {
    if (a == AclAlgorithm::kScalar) continue;
    rte_acl_classify_alg(ctx, data, other, static_cast<uint32_t>(n), 1, ToRte(a));
    if (a == fault) other[0] = ~other[0];  // a broken implementation (tests)
    for (int i = 0; i < n; ++i) bad += other[i] != results[i];
  }
  if (bad != 0) mismatches_.fetch_add(bad, std::memory_order_relaxed);
}

void AclClassifier::ClassifyImagesToResults(const AclKeyImage* images, int n,
                                            uint32_t* results) const {
  if (n <= 0) return;
  const auto ctx_of = [&](int i) {
    return ContextOfEthType(static_cast<uint16_t>(images[i].bytes[2] << 8 | images[i].bytes[3]));
  };
  // The common burst: every key of one context (IPv4 traffic), classified
  // in place, no split.
  const int c0 = ctx_of(0);
  int same = 1;
  while (same < n && ctx_of(same) == c0) ++same;
  if (same == n) {
    const uint8_t* data[kMaxBurst];
    for (int i = 0; i < n; ++i) data[i] = images[i].bytes;
    RunContext(c0, data, results, n);
    return;
  }
  const uint8_t* data[3][kMaxBurst];
  uint8_t slot[3][kMaxBurst];
  int count[3] = {0, 0, 0};
  for (int i = 0; i < n; ++i) {
    const int c = ctx_of(i);
    data[c][count[c]] = images[i].bytes;
    slot[c][count[c]++] = static_cast<uint8_t>(i);
  }
  uint32_t part[kMaxBurst];
  for (int c = 0; c < 3; ++c) {
    if (count[c] == 0) continue;
    RunContext(c, data[c], part, count[c]);
    for (int j = 0; j < count[c]; ++j) results[slot[c][j]] = part[j];
  }
}

void MakeAclKeyImageAnyMap(const FlowKey& key, AclKeyImage* out) {
  std::memset(out->bytes, 0, sizeof(out->bytes));
  uint32_t m = key.map;
  for (size_t j = 0; m != 0; ++j, m &= m - 1) {
    const uint64_t v = __builtin_bswap64(key.words[j]);
    std::memcpy(out->bytes + 8 * std::countr_zero(m), &v, sizeof(v));
  }
}

void AclClassifier::ClassifyKeysToResults(const FlowKey* keys, const int* index, int n,
                                          uint32_t* results) const {
  if (n <= 0) return;
  // One pass over the burst: image, data pointer, and the eth_type bytes
  // (2..3 of the image, just stored) compared with the first key's.
  AclKeyImage images[kMaxBurst];
  const uint8_t* data[kMaxBurst];
  const auto eth_type = [&](int j) {
    uint16_t e;
    std::memcpy(&e, images[j].bytes + 2, sizeof(e));
    return e;
  };
  uint32_t diff = 0;
  if (index == nullptr) {
    MakeAclKeyImage(keys[0], &images[0]);
    const uint16_t e0 = eth_type(0);
    data[0] = images[0].bytes;
    for (int j = 1; j < n; ++j) {
      MakeAclKeyImage(keys[j], &images[j]);
      data[j] = images[j].bytes;
      diff |= static_cast<uint32_t>(eth_type(j) ^ e0);
    }
  } else {
    MakeAclKeyImage(keys[index[0]], &images[0]);
    const uint16_t e0 = eth_type(0);
    data[0] = images[0].bytes;
    for (int j = 1; j < n; ++j) {
      MakeAclKeyImage(keys[index[j]], &images[j]);
      data[j] = images[j].bytes;
      diff |= static_cast<uint32_t>(eth_type(j) ^ e0);
    }
  }
  if (diff == 0) {
    // The common burst: one eth_type, one context, classified in place.
    RunContext(ContextOfEthType(static_cast<uint16_t>(images[0].bytes[2] << 8 |
                                                      images[0].bytes[3])),
               data, results, n);
    return;
  }
  ClassifyImagesToResults(images, n, results);  // split by context
}

void AclClassifier::ClassifyImages(const AclKeyImage* images, int n, const Rule** out) const {
  if (n <= 0) return;
  uint32_t results[kMaxBurst];
  ClassifyImagesToResults(images, n, results);
  for (int i = 0; i < n; ++i) out[i] = RuleOfResult(results[i]);
}

void AclClassifier::ClassifyBurst(const FlowKey* keys, int n, const Rule** out) const {
  AclKeyImage images[kMaxBurst];
  for (int i = 0; i < n; ++i) MakeAclKeyImage(keys[i], &images[i]);
  ClassifyImages(images, n, out);
}

const Rule* AclClassifier::Classify(const FlowKey& key) const {
  const Rule* r = nullptr;
  ClassifyBurst(&key, 1, &r);
  return r;
}

std::string OfflineEalLcores() {
  // "-l 0" would make EAL pin the calling thread to CPU 0 whatever CPUs the
  // process was given: `taskset -c 1 flowclassctl replay --pipeline acl`
  // then ran on CPU 0 while bench_acl.sh ran dpdk-test-acl on CPU 1.  Lcore
  // 0 on the process's own CPU set leaves its affinity as it was.
  cpu_set_t set;
  CPU_ZERO(&set);
  std::string cpus;
  if (sched_getaffinity(0, sizeof(set), &set) == 0) {
    for (int c = 0; c < CPU_SETSIZE; ++c) {
      if (!CPU_ISSET(c, &set)) continue;
      absl::StrAppend(&cpus, cpus.empty() ? "" : ",", c);
    }
  }
  if (cpus.empty()) return "0";
  return absl::StrCat("0@(", cpus, ")");
}

absl::Status InitOfflineEal(std::string_view program, int memory_mb) {
  static std::mutex mu;
  static bool done = false;
  std::lock_guard<std::mutex> lock(mu);
  if (done) return absl::OkStatus();
  std::vector<std::string> args = {
      std::string(program), "--lcores", OfflineEalLcores(), "--no-huge", "-m",
      absl::StrCat(memory_mb),
      "--no-pci", "--no-telemetry", "--no-shconf",
      absl::StrCat("--file-prefix=", std::string(program), "_", getpid()), "--log-level=lib.eal:error"};
  std::vector<char*> argv;
  for (std::string& s : args) argv.push_back(s.data());
  argv.push_back(nullptr);
  const int rc = rte_eal_init(static_cast<int>(args.size()), argv.data());
  if (rc < 0 && rte_errno != EALREADY) {
    return absl::InternalError(absl::StrCat("eal: rte_eal_init failed: ",
                                            rte_strerror(rte_errno), " (args: ",
                                            absl::StrJoin(args, " "), ")"));
  }
  done = true;
  // EAL made /var/run/dpdk/<prefix> (empty with --no-shconf) and never
  // removes it: one left behind per offline run, unless removed at exit.
  static std::string runtime_dir;
  runtime_dir = rte_eal_get_runtime_dir();
  std::atexit([] { rmdir(runtime_dir.c_str()); });
  return absl::OkStatus();
}

}  // namespace flowclass
