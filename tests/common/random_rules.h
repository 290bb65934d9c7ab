// random_rules.h — seeded generators of rules, keys and rule batches.
//
// Contract
// --------
// Every generator is deterministic given its seed and options (std::mt19937_64,
// no global state), so a failing test prints a seed that reproduces it.
// Shared by the RuleTable differential tests, the cache tests and benchmarks.
//
//   RandomRuleGen gen(seed);
//   std::vector<Rule> rules = gen.NextRules(100);     // ids 1..100, all valid
//   Flow k = gen.NextKeyNear(rules);                  // usually matches one
//   Flow k2 = gen.NextKeyAgreeing(k, wc);             // same bits under wc
//   auto ops = gen.NextBatch(10, &rules, &next_id);   // valid against `rules`
//
// Rules always pass ValidateRule.  They mix IPv4 / IPv6 / L2-only matches,
// prefixes of every length and arbitrary (non-contiguous) masks drawn from a
// small pool of base addresses (so rules overlap), exact / wildcard / masked
// ports and port ranges, protocols, in_port, VLAN and Ethernet fields, and
// priorities from a small range (so equal priorities are common).
// Not thread-safe: one generator per thread.
#ifndef FLOWCLASS_TESTS_COMMON_RANDOM_RULES_H_
#define FLOWCLASS_TESTS_COMMON_RANDOM_RULES_H_

#include <cstddef>
#include <cstdint>
#include <random>
#include <vector>

#include "dataplane/flow/flow.h"
#include "dataplane/rules/rule.h"
#include "dataplane/rules/rule_table.h"
#include "tests/common/sanitizer.h"

namespace flowclass {

// How many random rules a property test of the rule codecs draws: fewer under
// ASan, so that each binary stays quick.
inline constexpr int kRandomRuleCount = kSanitized ? 3000 : 20000;

struct RandomRuleOptions {
  double ipv6_fraction = 0.25;           // rules (and keys) that are IPv6
  double l2_only_fraction = 0.05;        // rules without L3 fields
  double range_fraction = 0.2;           // per port field: a port range
  double arbitrary_mask_fraction = 0.1;  // per address: non-prefix mask
  uint32_t max_priority = 16;            // priorities in [0, max_priority)
  int address_pool = 6;                  // distinct base networks (overlap)
  int in_ports = 4;                      // in_port values 1..in_ports
  uint64_t cookies = 4;                  // cookies in [0, cookies)
};

class RandomRuleGen {
 public:
  explicit RandomRuleGen(uint64_t seed, RandomRuleOptions options = {});

  // A valid rule with id `id` (non-zero).
  Rule NextRule(uint64_t id);
  // `n` rules with ids first_id, first_id+1, ...
  std::vector<Rule> NextRules(size_t n, uint64_t first_id = 1);

  // A packet-like key (eth_type, addresses, protocol and ports consistent)
  // drawn from the same pools as the rules.
  Flow NextKey();
  // Usually a key that matches a random rule of `rules` (its value on the
  // masked bits, ports inside/at the edge of its ranges), sometimes with one
  // matched bit flipped (prefix boundaries first) or just outside a range,
  // sometimes unrelated.  `rules` may be empty.
  Flow NextKeyNear(const std::vector<Rule>& rules);
  Flow NextKeyNear(const Rule& rule);
  // A key equal to `key` on the bits of `mask`, random elsewhere (half of
  // the time packet-like, half of the time any bits at all).
  Flow NextKeyAgreeing(const Flow& key, const Flow& mask);

  // `n` operations (insert / delete / replace / delete-by-cookie interleaved)
  // valid against `*live`; updates `*live` to the state after the batch and
  // takes new ids from `*next_id`.
  std::vector<RuleOp> NextBatch(int n, std::vector<Rule>* live,
                                uint64_t* next_id);

  uint64_t Uniform(uint64_t n);  // [0, n); n > 0
  bool Chance(double p);
  std::mt19937_64& rng() { return rng_; }
  const RandomRuleOptions& options() const { return options_; }

 private:
  enum class Family { kL2, kIpv4, kIpv6 };
  Family PickFamily();
  void FillKey(Family family, Flow* f);
  uint64_t PrefixMask(int len, int bits);
  void AddAddress(Match* m, Field f, int bits, uint64_t base);
  void AddPort(Match* m, Field f);
  uint16_t PoolPort();

  std::mt19937_64 rng_;
  RandomRuleOptions options_;
  std::vector<uint32_t> ipv4_pool_;
  std::vector<uint64_t> ipv6_pool_;
  std::vector<uint64_t> mac_pool_;
};

}  // namespace flowclass

#endif  // FLOWCLASS_TESTS_COMMON_RANDOM_RULES_H_
