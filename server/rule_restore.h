// rule_restore.h — flowclassd's rule store at start-up: open, load, restore
// into the dataplane (or seed it from rules.file), and who this start is.
//
// Contract
// --------
// OpenRuleStore(config, log) runs before EAL: with store.path it opens
// DIR/rules.db (creating an empty store when there is none) and Loads it,
// every byte checked (docs/store.md).  A damaged store is an error naming
// the file, the record and what was wrong (DATA_LOSS), unless
// store.recover_to_last_consistent: then it starts from the last consistent
// state and logs what was dropped and where the damaged file was kept.
// Another process holding the store: FAILED_PRECONDITION.  Without
// store.path it logs a warning that rules will not survive a restart and
// returns an in-memory StartupStore (store null).
//
// RestoreRules(store, seed, restore, durable, log) runs after the dataplane
// exists and before the API serves (the gRPC server is open meanwhile,
// its calls UNAVAILABLE and health NOT_SERVING: GrpcServerConfig::restoring):
//   * the store holds a generation (> 0): restore(rules, generation) puts
//     exactly that rule set at exactly that generation into the dataplane;
//     `seed` (rules.file) is ignored, with a log line saying so;
//   * the store is empty (generation 0) or in memory: `seed` is applied
//     through `durable` (so it is stored as generation 1, like any batch).
// It fills StartupStore::instance (a random boot id, the generation and
// rule count the rule set started at, durable or not) and frees the loaded
// rules.
//
// `log` gets what they have to say (server/log.h; warnings at level warn).
// Threads: the daemon's main thread, before the gRPC server serves.
#ifndef FLOWCLASS_SERVER_RULE_RESTORE_H_
#define FLOWCLASS_SERVER_RULE_RESTORE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "dataplane/dataplane.h"
#include "server/api/grpc_config.h"
#include "server/config.h"
#include "server/store/rule_store.h"
#include "spdlog/logger.h"

namespace flowclass {

struct StartupStore {
  std::unique_ptr<RuleStore> store;  // null: in memory
  RuleStoreState state;              // what Load found (rules freed by RestoreRules)
  double load_seconds = 0;
  ServerInstanceInfo instance;       // filled by RestoreRules
};

absl::StatusOr<StartupStore> OpenRuleStore(const StoreConfig& config, spdlog::logger& log);

using RestoreFn = std::function<absl::Status(absl::Span<const Rule>, uint64_t generation)>;

absl::Status RestoreRules(StartupStore* store, absl::Span<const RuleOp> seed,
                          const RestoreFn& restore, Dataplane* durable, spdlog::logger& log);

// A random 64-bit id, never 0.
uint64_t NewBootId();

}  // namespace flowclass

#endif  // FLOWCLASS_SERVER_RULE_RESTORE_H_
