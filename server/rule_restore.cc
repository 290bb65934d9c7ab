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

absl::StatusOr<StartupStore> OpenRuleStore(const StoreConfig& config, std::FILE* log) {
  StartupStore out;
  if (config.path.empty()) {
    std::fprintf(log,
                 "flowclassd: warning: no store.path: rules are kept in memory only and do "
                 "not survive a restart (set store.path, e.g. /var/lib/flowclass)\n");
    std::fflush(log);
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
    std::fprintf(log, "flowclassd: warning: rule store %s was damaged; recovered:\n",
                 info.path.c_str());
    for (const std::string& d : info.dropped) std::fprintf(log, "flowclassd:   %s\n", d.c_str());
    std::fprintf(log, "flowclassd:   the damaged file was kept as %s\n",
                 info.damaged_file.c_str());
  }
  if (info.migrated_from_version != 0)
    std::fprintf(log,
                 "flowclassd: rule store %s: rewritten from schema version %d to %d; the old "
                 "file was kept as %s (an older flowclassd can still read it)\n",
                 info.path.c_str(), info.migrated_from_version, info.schema_version,
                 info.migrated_file.c_str());
  std::fprintf(log,
               "flowclassd: rule store %s: generation %llu, %zu rules (%llu batch rows after "
               "the snapshot of generation %llu), %llu bytes, loaded in %.2f s\n",
               info.path.c_str(), static_cast<unsigned long long>(out.state.generation),
               out.state.rules.size(), static_cast<unsigned long long>(info.batches),
               static_cast<unsigned long long>(info.snapshot_generation),
               static_cast<unsigned long long>(info.file_bytes), out.load_seconds);
  std::fflush(log);
  return out;
}

absl::Status RestoreRules(StartupStore* s, absl::Span<const RuleOp> seed,
                          const RestoreFn& restore, Dataplane* durable, std::FILE* log) {
  ServerInstanceInfo& in = s->instance;
  in.boot_id = NewBootId();
  in.durable = s->store != nullptr;
  in.store_path = s->store ? s->store->path() : "";
  if (s->store != nullptr && s->state.generation > 0) {
    if (!seed.empty())
      std::fprintf(log,
                   "flowclassd: rules.file ignored: the store holds generation %llu (it seeds "
                   "only an empty store)\n",
                   static_cast<unsigned long long>(s->state.generation));
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
  std::fprintf(log, "flowclassd: boot id %016llx, %s, started at generation %llu (%llu rules)\n",
               static_cast<unsigned long long>(in.boot_id),
               in.durable ? absl::StrCat("rule store ", in.store_path).c_str() : "in memory",
               static_cast<unsigned long long>(in.restored_generation),
               static_cast<unsigned long long>(in.restored_rules));
  std::fflush(log);
  return absl::OkStatus();
}

}  // namespace flowclass
