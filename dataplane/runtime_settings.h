// runtime_settings.h — the settings a dataplane can change while it runs
// (Dataplane::ApplySettings, the gRPC SetConfig, `flowclassctl config set`),
// typed, and their one text form.
//
// Contract
// --------
// Every run-time setting has a dotted key (the YAML config's, see
// docs/flowclassd.md) and a text value:
//   pmd.tx_retries                0..1000000
//   pmd.idle_sleep_us             0..1000000
//   pipeline.emc_insert_inv_prob  0..2^30 (0: never insert)
//   pipeline.smc                  on / off / auto
//   pipeline.cd                   on / off / auto
//   pipeline.ranking_interval_ms  0..3600000
//   pipeline.megaflow_max_idle_ms 0..86400000 (0: megaflows never expire)
//   pipeline.max_megaflows        1..16777216 (a dataplane may refuse more
//                                 than it allocated at start-up)
//   pipeline.max_subtables_per_port 1..65535
//   pipeline.upcall_rate          0..10000000 upcalls/s per PMD and in_port
//                                 (0: unlimited)
//   pipeline.upcall_burst         1..10000000 upcalls
//   pipeline.upcall_limit_action  drop / classify
//   pipeline.rare_mask_subtables  0..65535 (0: the mask-explosion defence off;
//                                 default kDefaultRareMaskSubtables)
//   pipeline.acl_algorithm        default / scalar / sse / avx2 / avx512x16 /
//                                 avx512x32 / autovalidator (acl_algorithm.h;
//                                 listed by acl dataplanes only, which also
//                                 refuse one the CPU lacks)
//   dpcls.force_scalar            true / false
//   dpcls.lookup_prio.NAME        0..255, NAME a lookup implementation
//   dpcls.lookup_available.NAME   true / false, read-only (whether this CPU
//                                 can run NAME)
// ParseRuntimeSetting() reads one key=value into a RuntimeSettingsUpdate,
// FormatRuntimeSettings() writes an update back as key=value pairs, and
// Format(Parse(pairs)) == pairs for every pair the formatter writes.
//
// Errors name the key, as users see them (SetConfig answers them as they
// are): NOT_FOUND (UnknownConfigKeyError) for a key that is not a setting,
// INVALID_ARGUMENT "KEY: \"VALUE\" is not ..." for a bad value,
// FAILED_PRECONDITION "KEY: read-only (...)" / "KEY: can only be set at
// start-up (config file)" where a request may not change the key.
//
// Plain values and functions: no DPDK, no protobuf, no shared state; control
// path only (they allocate).
#ifndef FLOWCLASS_DATAPLANE_RUNTIME_SETTINGS_H_
#define FLOWCLASS_DATAPLANE_RUNTIME_SETTINGS_H_

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "dataplane/acl_algorithm.h"
#include "dataplane/cache/cuckoo_distributor.h"
#include "dataplane/dpcls/subtable_lookup.h"
#include "dataplane/pipeline.h"

namespace flowclass {

// The keys (GetConfig / SetConfig), shared by the dataplanes that implement
// them and the API that names them.
inline constexpr char kConfigTxRetries[] = "pmd.tx_retries";
inline constexpr char kConfigIdleSleepUs[] = "pmd.idle_sleep_us";
inline constexpr char kConfigEmcInsertInvProb[] = "pipeline.emc_insert_inv_prob";
inline constexpr char kConfigSmc[] = "pipeline.smc";
inline constexpr char kConfigCd[] = "pipeline.cd";
inline constexpr char kConfigRankingIntervalMs[] = "pipeline.ranking_interval_ms";
inline constexpr char kConfigMegaflowMaxIdleMs[] = "pipeline.megaflow_max_idle_ms";
inline constexpr char kConfigMaxMegaflows[] = "pipeline.max_megaflows";
inline constexpr char kConfigMaxSubtablesPerPort[] = "pipeline.max_subtables_per_port";
inline constexpr char kConfigUpcallRate[] = "pipeline.upcall_rate";
inline constexpr char kConfigUpcallBurst[] = "pipeline.upcall_burst";
inline constexpr char kConfigUpcallLimitAction[] = "pipeline.upcall_limit_action";
inline constexpr char kConfigRareMaskSubtables[] = "pipeline.rare_mask_subtables";
inline constexpr char kConfigAclAlgorithm[] = "pipeline.acl_algorithm";
inline constexpr char kConfigForceScalar[] = "dpcls.force_scalar";
inline constexpr char kConfigLookupPrioPrefix[] = "dpcls.lookup_prio.";
inline constexpr char kConfigLookupAvailablePrefix[] = "dpcls.lookup_available.";
// Their ranges, the same in the config file and over SetConfig.
inline constexpr uint32_t kMaxPmdLoopSetting = 1000000;  // tx_retries, idle_sleep_us
inline constexpr uint32_t kMaxEmcInsertInvProb = uint32_t{1} << 30;
inline constexpr uint32_t kMaxRankingIntervalMs = 3600000;
inline constexpr uint32_t kMaxMegaflowMaxIdleMs = 86400000;
inline constexpr uint32_t kMaxMaxMegaflows = uint32_t{1} << 24;
inline constexpr uint32_t kMaxMaxSubtablesPerPort = 65535;

// NOT_FOUND for a key the dataplane has no setting for (GetConfig /
// SetConfig of every Dataplane say it the same way).
absl::Status UnknownConfigKeyError(absl::string_view key);

// One key=value, as GetConfig lists them and SetConfig takes them.
using ConfigValue = std::pair<std::string, std::string>;

// Every run-time setting of a dataplane (the defaults are the config file's).
struct RuntimeSettings {
  uint32_t tx_retries = 4;
  uint32_t idle_sleep_us = 0;
  uint32_t emc_insert_inv_prob = 100;
  CacheMode smc = CacheMode::kAuto;
  CdMode cd = CdMode::kAuto;
  uint32_t ranking_interval_ms = 1000;
  // Megaflow expiry and caps (PipelineConfig's fields of these names).
  uint32_t megaflow_max_idle_ms = 10000;
  uint32_t max_megaflows = 200000;
  uint32_t max_subtables_per_port = 1024;
  // Upcall rate limit and mask-explosion defence (PipelineConfig's fields).
  uint32_t upcall_rate = 0;
  uint32_t upcall_burst = 1000;
  UpcallLimitAction upcall_limit_action = UpcallLimitAction::kDrop;
  uint32_t rare_mask_subtables = kDefaultRareMaskSubtables;
  AclAlgorithm acl_algorithm = AclAlgorithm::kDefault;  // pipeline.kind acl only
  LookupPriorities lookup;  // dpcls.lookup_prio.* and dpcls.force_scalar

  friend bool operator==(const RuntimeSettings&, const RuntimeSettings&) = default;
};

// Some of the settings: what one request changes, or what a dataplane
// reported (only the keys it listed).  A field is set when its key was given.
struct RuntimeSettingsUpdate {
  std::optional<uint32_t> tx_retries;
  std::optional<uint32_t> idle_sleep_us;
  std::optional<uint32_t> emc_insert_inv_prob;
  std::optional<CacheMode> smc;
  std::optional<CdMode> cd;
  std::optional<uint32_t> ranking_interval_ms;
  std::optional<uint32_t> megaflow_max_idle_ms;
  std::optional<uint32_t> max_megaflows;
  std::optional<uint32_t> max_subtables_per_port;
  std::optional<uint32_t> upcall_rate;
  std::optional<uint32_t> upcall_burst;
  std::optional<UpcallLimitAction> upcall_limit_action;
  std::optional<uint32_t> rare_mask_subtables;
  std::optional<AclAlgorithm> acl_algorithm;
  std::optional<bool> force_scalar;
  std::array<std::optional<int>, kLookupImplCount> lookup_prio;  // by LookupImplId
  // Read-only: reported by GetConfig, never applied (ApplyTo ignores it).
  std::array<std::optional<bool>, kLookupImplCount> lookup_available;

  // Every field of `s` but acl_algorithm (an acl dataplane adds it);
  // lookup_available from LookupImplAvailable().
  static RuntimeSettingsUpdate All(const RuntimeSettings& s);
  // Whether it sets a setting the PMDs' pipelines read (anything but
  // pmd.tx_retries, pmd.idle_sleep_us, pipeline.acl_algorithm, which the
  // acl classifiers read, and the read-only keys).
  bool ChangesPipeline() const;
  // Writes the fields that are set into `s`.
  void ApplyTo(RuntimeSettings* s) const;

  friend bool operator==(const RuntimeSettingsUpdate&, const RuntimeSettingsUpdate&) = default;
};

// Parses one key=value into `out` (the field of that key is overwritten; a
// read-only key fills lookup_available).  NOT_FOUND for a key that is not a
// setting, INVALID_ARGUMENT naming the key for a bad value (or an unknown
// implementation NAME in dpcls.lookup_prio.NAME).  `out` is unchanged on
// error.
absl::Status ParseRuntimeSetting(absl::string_view key, absl::string_view value,
                                 RuntimeSettingsUpdate* out);

// A request to change settings, checked as a whole before anything may be
// applied: the pairs in order (a key given twice: the last value wins).
// `listed` is what the dataplane's GetConfig lists; a key it does not list
// answers NOT_FOUND (an unknown dpcls.lookup_prio.NAME: INVALID_ARGUMENT, as
// above), a listed key that is no setting FAILED_PRECONDITION "KEY: can only
// be set at start-up (config file)", a dpcls.lookup_available.NAME
// FAILED_PRECONDITION "KEY: read-only (...)".  The first bad pair's error is
// returned.
absl::StatusOr<RuntimeSettingsUpdate> ParseRuntimeSettingsRequest(
    absl::Span<const ConfigValue> values, const std::map<std::string, std::string>& listed);

// The fields `u` sets as key=value pairs, in the order of the key list
// above (lookup implementations in LookupImplId order).
std::vector<ConfigValue> FormatRuntimeSettings(const RuntimeSettingsUpdate& u);

}  // namespace flowclass

#endif  // FLOWCLASS_DATAPLANE_RUNTIME_SETTINGS_H_
