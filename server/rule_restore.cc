#include "server/rule_restore.h"

#include <chrono>
#include <random>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"

namespace flowclass {

uint64_t NewBootId() {
  std::random_device rd;
  uint64_t id = 0;
  while (id == 0) id = (static_cast<uint64_t>(rd()) << 32) ^ rd();
  return id;
}

absl::StatusOr<StartupStore> OpenRuleStore(const StoreConfig& config, spdlog::logger& log) {
  StartupStore out;
  if (config.path.empty()) {
    log.warn(
        "warning: no store.path: rules are kept in memory only and do not survive a restart "
        "(set store.path, e.g. /var/lib/flowclass)");
    return out;
  }
  RuleStoreOptions opts;
  opts.recover_to_last_consistent = config.recover_to_last_consistent;
  const auto t0 = std::chrono::steady_clock::now();
  absl::StatusOr<std::unique_ptr<RuleStore>> store = RuleStore::Open(config.path, opts);
  if (!store.ok()) return store.status();
  absl::StatusOr<RuleStoreState> state = (*store)->Load();
  if (!state.ok()) {
    if (state.status().code() == absl::StatusCode::kDataLoss &&
        !config.recover_to_last_consistent)
      return absl::DataLossError(absl::StrCat(
          state.status().message(),
          " (the store was left as it is; start with store.recover_to_last_consistent: true "
          "or --recover-to-last-consistent to start from its last consistent state)"));
    return state.status();
  }
  out.load_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  out.store = *std::move(store);
  out.state = *std::move(state);
  const RuleStoreInfo& info = out.state.info;
  if (info.recovered) {
    log.warn("warning: rule store {} was damaged; recovered:", info.path);
    for (const std::string& d : info.dropped) log.warn("  {}", d);
    log.warn("  the damaged file was kept as {}", info.damaged_file);
  }
  if (info.migrated_from_version != 0)
    log.info(
        "rule store {}: rewritten from schema version {} to {}; the old file was kept as {} (an "
        "older flowclassd can still read it)",
        info.path, info.migrated_from_version, info.schema_version, info.migrated_file);
  log.info(
      "rule store {}: generation {}, {} rules ({} batch rows after the snapshot of generation "
      "{}), {} bytes, loaded in {:.2f} s",
      info.path, out.state.generation, out.state.rules.size(), info.batches,
      info.snapshot_generation, info.file_bytes, out.load_seconds);
  return out;
}

absl::Status RestoreRules(StartupStore* s, absl::Span<const RuleOp> seed,
                          const RestoreFn& restore, Dataplane* durable, spdlog::logger& log) {
  ServerInstanceInfo& in = s->instance;
  in.boot_id = NewBootId();
  in.durable = s->store != nullptr;
  in.store_path = s->store ? s->store->path() : "";
  if (s->store != nullptr && s->state.generation > 0) {
    if (!seed.empty())
      log.info("rules.file ignored: the store holds generation {} (it seeds only an empty store)",
               s->state.generation);
    if (absl::Status st = restore(s->state.rules, s->state.generation); !st.ok())
      return absl::Status(st.code(), absl::StrCat("rule store ", s->store->path(),
                                                  ": cannot restore generation ",
                                                  s->state.generation, ": ", st.message()));
    in.restored_generation = s->state.generation;
    in.restored_rules = s->state.rules.size();
  } else if (!seed.empty()) {
    absl::StatusOr<BatchResult> r = durable->ApplyBatch(seed);
    if (!r.ok()) return r.status();
    in.restored_generation = 0;  // started empty, then seeded
    in.restored_rules = 0;
  }
  std::vector<Rule>().swap(s->state.rules);
  log.info("boot id {:016x}, {}, started at generation {} ({} rules)", in.boot_id,
           in.durable ? absl::StrCat("rule store ", in.store_path) : "in memory",
           in.restored_generation, in.restored_rules);
  return absl::OkStatus();
}

}  // namespace flowclass
