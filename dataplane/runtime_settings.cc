#include "dataplane/runtime_settings.h"

#include <string_view>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "common/quote.h"

namespace flowclass {
namespace {

// The spellings of the two-valued settings.
constexpr std::pair<absl::string_view, absl::string_view> kTrueFalse = {"true", "false"};

std::string BoolText(bool v, std::pair<absl::string_view, absl::string_view> names) {
  return std::string(v ? names.first : names.second);
}

// The implementation NAME of "<prefix>NAME", or nullopt when `key` does not
// start with `prefix`.
std::optional<absl::string_view> Suffix(absl::string_view key, absl::string_view prefix) {
  if (!absl::ConsumePrefix(&key, prefix)) return std::nullopt;
  return key;
}

// The implementation `name` stands for; nullopt when it is none.
std::optional<int> ImplIndex(absl::string_view name) {
  absl::StatusOr<LookupImplId> id = ParseLookupImpl(std::string_view(name.data(), name.size()));
  if (!id.ok()) return std::nullopt;
  return static_cast<int>(*id);
}

absl::Status StartUpOnlyError(absl::string_view key) {
  return absl::FailedPreconditionError(
      absl::StrCat(key, ": can only be set at start-up (config file)"));
}

absl::Status ReadOnlyError(absl::string_view key) {
  return absl::FailedPreconditionError(
      absl::StrCat(key, ": read-only (whether this CPU can run the implementation)"));
}

}  // namespace

absl::Status UnknownConfigKeyError(absl::string_view key) {
  return absl::NotFoundError(absl::StrCat(
      "config key ", QuoteForMessage(key, '"'),
      ": unknown (config get lists the keys of the running daemon)"));
}

RuntimeSettingsUpdate RuntimeSettingsUpdate::All(const RuntimeSettings& s) {
  RuntimeSettingsUpdate u;
  u.tx_retries = s.tx_retries;
  u.idle_sleep_us = s.idle_sleep_us;
  u.emc_insert_inv_prob = s.emc_insert_inv_prob;
  u.smc = s.smc;
  u.cd = s.cd;
  u.ranking_interval_ms = s.ranking_interval_ms;
  u.megaflow_max_idle_ms = s.megaflow_max_idle_ms;
  u.max_megaflows = s.max_megaflows;
  u.max_subtables_per_port = s.max_subtables_per_port;
  u.upcall_rate = s.upcall_rate;
  u.upcall_burst = s.upcall_burst;
  u.upcall_limit_action = s.upcall_limit_action;
  u.rare_mask_subtables = s.rare_mask_subtables;
  u.force_scalar = s.lookup.force_scalar;
  for (int i = 0; i < kLookupImplCount; ++i) {
    u.lookup_prio[i] = s.lookup.priority[i];
    u.lookup_available[i] = LookupImplAvailable(static_cast<LookupImplId>(i));
  }
  return u;
}

bool RuntimeSettingsUpdate::ChangesPipeline() const {
  bool any = emc_insert_inv_prob || smc || cd || ranking_interval_ms || force_scalar ||
             megaflow_max_idle_ms || max_megaflows || max_subtables_per_port || upcall_rate ||
             upcall_burst || upcall_limit_action || rare_mask_subtables;
  for (const std::optional<int>& p : lookup_prio) any = any || p.has_value();
  return any;
}

void RuntimeSettingsUpdate::ApplyTo(RuntimeSettings* s) const {
  if (tx_retries) s->tx_retries = *tx_retries;
  if (idle_sleep_us) s->idle_sleep_us = *idle_sleep_us;
  if (emc_insert_inv_prob) s->emc_insert_inv_prob = *emc_insert_inv_prob;
  if (smc) s->smc = *smc;
  if (cd) s->cd = *cd;
  if (ranking_interval_ms) s->ranking_interval_ms = *ranking_interval_ms;
  if (megaflow_max_idle_ms) s->megaflow_max_idle_ms = *megaflow_max_idle_ms;
  if (max_megaflows) s->max_megaflows = *max_megaflows;
  if (max_subtables_per_port) s->max_subtables_per_port = *max_subtables_per_port;
  if (upcall_rate) s->upcall_rate = *upcall_rate;
  if (upcall_burst) s->upcall_burst = *upcall_burst;
  if (upcall_limit_action) s->upcall_limit_action = *upcall_limit_action;
  if (rare_mask_subtables) s->rare_mask_subtables = *rare_mask_subtables;
  if (acl_algorithm) s->acl_algorithm = *acl_algorithm;
  if (force_scalar) s->lookup.force_scalar = *force_scalar;
  for (int i = 0; i < kLookupImplCount; ++i)
    if (lookup_prio[i]) s->lookup.priority[i] = *lookup_prio[i];
}

absl::Status ParseRuntimeSetting(absl::string_view key, absl::string_view value,
                                 RuntimeSettingsUpdate* out) {
  auto bad = [&](absl::string_view want) {
    return absl::InvalidArgumentError(
        absl::StrCat(key, ": ", QuoteForMessage(value, '"'), " is not ", want));
  };
  auto whole = [&](uint32_t max, absl::string_view want, std::optional<uint32_t>* field,
                   uint32_t min = 0) {
    uint32_t n = 0;
    if (!absl::SimpleAtoi(value, &n) || n < min || n > max) return bad(want);
    *field = n;
    return absl::OkStatus();
  };
  auto two = [&](std::pair<absl::string_view, absl::string_view> names,
                 std::optional<bool>* field) {
    if (value != names.first && value != names.second)
      return bad(absl::StrCat(names.first, " or ", names.second));
    *field = value == names.first;
    return absl::OkStatus();
  };
  if (key == kConfigTxRetries || key == kConfigIdleSleepUs) {
    return whole(kMaxPmdLoopSetting, absl::StrCat("an integer in 0..", kMaxPmdLoopSetting),
                 key == kConfigTxRetries ? &out->tx_retries : &out->idle_sleep_us);
  }
  if (key == kConfigEmcInsertInvProb) {
    return whole(kMaxEmcInsertInvProb,
                 absl::StrCat("a whole number in 0..", kMaxEmcInsertInvProb, " (0 disables)"),
                 &out->emc_insert_inv_prob);
  }
  if (key == kConfigSmc || key == kConfigCd) {
    absl::StatusOr<CacheMode> mode =
        ParseCacheMode(std::string_view(value.data(), value.size()),
                       std::string_view(key.data(), key.size()));
    if (!mode.ok()) return bad("on, off or auto");
    (key == kConfigSmc ? out->smc : out->cd) = *mode;
    return absl::OkStatus();
  }
  if (key == kConfigRankingIntervalMs) {
    return whole(kMaxRankingIntervalMs,
                 absl::StrCat("a whole number of milliseconds in 0..", kMaxRankingIntervalMs),
                 &out->ranking_interval_ms);
  }
  if (key == kConfigMegaflowMaxIdleMs) {
    return whole(kMaxMegaflowMaxIdleMs,
                 absl::StrCat("a whole number of milliseconds in 0..", kMaxMegaflowMaxIdleMs,
                              " (0: megaflows never expire)"),
                 &out->megaflow_max_idle_ms);
  }
  if (key == kConfigMaxMegaflows) {
    return whole(kMaxMaxMegaflows, absl::StrCat("a whole number in 1..", kMaxMaxMegaflows),
                 &out->max_megaflows, 1);
  }
  if (key == kConfigMaxSubtablesPerPort) {
    return whole(kMaxMaxSubtablesPerPort,
                 absl::StrCat("a whole number in 1..", kMaxMaxSubtablesPerPort),
                 &out->max_subtables_per_port, 1);
  }
  if (key == kConfigUpcallRate) {
    return whole(kMaxUpcallRate,
                 absl::StrCat("a whole number of upcalls per second in 0..", kMaxUpcallRate,
                              " (0: unlimited)"),
                 &out->upcall_rate);
  }
  if (key == kConfigUpcallBurst) {
    return whole(kMaxUpcallBurst, absl::StrCat("a whole number in 1..", kMaxUpcallBurst),
                 &out->upcall_burst, 1);
  }
  if (key == kConfigUpcallLimitAction) {
    absl::StatusOr<UpcallLimitAction> a =
        ParseUpcallLimitAction(std::string_view(value.data(), value.size()));
    if (!a.ok()) return bad("drop or classify");
    out->upcall_limit_action = *a;
    return absl::OkStatus();
  }
  if (key == kConfigRareMaskSubtables) {
    return whole(kMaxMaxSubtablesPerPort,
                 absl::StrCat("a whole number in 0..", kMaxMaxSubtablesPerPort, " (0: off)"),
                 &out->rare_mask_subtables);
  }
  if (key == kConfigAclAlgorithm) {
    std::optional<AclAlgorithm> a =
        ParseAclAlgorithmName(std::string_view(value.data(), value.size()));
    if (!a) return bad(kAclAlgorithmNames);
    out->acl_algorithm = *a;
    return absl::OkStatus();
  }
  if (key == kConfigForceScalar) return two(kTrueFalse, &out->force_scalar);
  if (std::optional<absl::string_view> name = Suffix(key, kConfigLookupPrioPrefix)) {
    int prio = 0;
    if (!absl::SimpleAtoi(value, &prio))
      return bad(absl::StrCat("a whole-number priority in 0..", kMaxLookupPriority));
    // LookupPriorities says what is wrong with the name or the priority.
    LookupPriorities check;
    if (absl::Status s = check.Set(std::string_view(name->data(), name->size()), prio); !s.ok())
      return absl::InvalidArgumentError(absl::StrCat(key, ": ", s.message()));
    out->lookup_prio[*ImplIndex(*name)] = prio;
    return absl::OkStatus();
  }
  if (std::optional<absl::string_view> name = Suffix(key, kConfigLookupAvailablePrefix)) {
    if (std::optional<int> i = ImplIndex(*name)) {
      std::optional<bool> available;
      if (absl::Status s = two(kTrueFalse, &available); !s.ok()) return s;
      out->lookup_available[*i] = available;
      return absl::OkStatus();
    }
  }
  return UnknownConfigKeyError(key);
}

absl::StatusOr<RuntimeSettingsUpdate> ParseRuntimeSettingsRequest(
    absl::Span<const ConfigValue> values, const std::map<std::string, std::string>& listed) {
  RuntimeSettingsUpdate u;
  for (const auto& [key, value] : values) {
    const bool is_listed = listed.contains(key);
    if (is_listed && absl::StartsWith(key, kConfigLookupAvailablePrefix)) return ReadOnlyError(key);
    absl::Status s = ParseRuntimeSetting(key, value, &u);
    if (absl::IsNotFound(s)) return is_listed ? StartUpOnlyError(key) : s;
    if (!s.ok()) return s;
    if (!is_listed) return UnknownConfigKeyError(key);  // a setting this dataplane lacks
  }
  return u;
}

std::vector<ConfigValue> FormatRuntimeSettings(const RuntimeSettingsUpdate& u) {
  std::vector<ConfigValue> out;
  auto add = [&out](absl::string_view key, std::string value) {
    out.emplace_back(std::string(key), std::move(value));
  };
  if (u.tx_retries) add(kConfigTxRetries, absl::StrCat(*u.tx_retries));
  if (u.idle_sleep_us) add(kConfigIdleSleepUs, absl::StrCat(*u.idle_sleep_us));
  if (u.emc_insert_inv_prob) add(kConfigEmcInsertInvProb, absl::StrCat(*u.emc_insert_inv_prob));
  if (u.smc) add(kConfigSmc, std::string(CacheModeName(*u.smc)));
  if (u.cd) add(kConfigCd, std::string(CdModeName(*u.cd)));
  if (u.ranking_interval_ms) add(kConfigRankingIntervalMs, absl::StrCat(*u.ranking_interval_ms));
  if (u.megaflow_max_idle_ms)
    add(kConfigMegaflowMaxIdleMs, absl::StrCat(*u.megaflow_max_idle_ms));
  if (u.max_megaflows) add(kConfigMaxMegaflows, absl::StrCat(*u.max_megaflows));
  if (u.max_subtables_per_port)
    add(kConfigMaxSubtablesPerPort, absl::StrCat(*u.max_subtables_per_port));
  if (u.upcall_rate) add(kConfigUpcallRate, absl::StrCat(*u.upcall_rate));
  if (u.upcall_burst) add(kConfigUpcallBurst, absl::StrCat(*u.upcall_burst));
  if (u.upcall_limit_action)
    add(kConfigUpcallLimitAction, std::string(UpcallLimitActionName(*u.upcall_limit_action)));
  if (u.rare_mask_subtables) add(kConfigRareMaskSubtables, absl::StrCat(*u.rare_mask_subtables));
  if (u.acl_algorithm) add(kConfigAclAlgorithm, AclAlgorithmName(*u.acl_algorithm));
  if (u.force_scalar) add(kConfigForceScalar, BoolText(*u.force_scalar, kTrueFalse));
  auto name = [](int i) { return LookupImplName(static_cast<LookupImplId>(i)); };
  for (int i = 0; i < kLookupImplCount; ++i)
    if (u.lookup_prio[i])
      add(absl::StrCat(kConfigLookupPrioPrefix, name(i)), absl::StrCat(*u.lookup_prio[i]));
  for (int i = 0; i < kLookupImplCount; ++i)
    if (u.lookup_available[i])
      add(absl::StrCat(kConfigLookupAvailablePrefix, name(i)),
          BoolText(*u.lookup_available[i], kTrueFalse));
  return out;
}

}  // namespace flowclass
