#include "server/testing/fake_dataplane.h"

#include <cstdio>
#include <cstdlib>

#include "absl/strings/str_cat.h"

namespace flowclass {

FakeDataplane::FakeDataplane(RuleTableLimits limits)
    : limits_(limits),
      table_(std::make_unique<RuleTable>(limits)),
      listed_settings_{kConfigTxRetries, kConfigIdleSleepUs},
      start_up_only_{{"pmd.burst", "32"}, {"pmd.lcores", "1"}} {}

absl::StatusOr<BatchResult> FakeDataplane::ApplyBatch(absl::Span<const RuleOp> ops) {
  absl::MutexLock lock(&mu_);
  if (!fail_next_.ok()) {
    absl::Status s = fail_next_;
    fail_next_ = absl::OkStatus();
    return s;
  }
  if (ops.empty()) return table_->ApplyBatch(ops);  // the state as it is
  auto next = std::make_unique<RuleTable>(*table_);
  absl::StatusOr<BatchResult> r = next->ApplyBatch(ops);
  if (!r.ok()) return r.status();
  table_ = std::move(next);
  batches_.emplace_back(ops.begin(), ops.end());
  return r;
}

absl::Status FakeDataplane::Restore(absl::Span<const Rule> rules, uint64_t generation) {
  absl::MutexLock lock(&mu_);
  auto next = std::make_unique<RuleTable>(limits_);
  if (absl::Status s = RestoreRuleTable(rules, generation, table_->generation(), next.get());
      !s.ok())
    return s;
  table_ = std::move(next);
  return absl::OkStatus();
}

absl::StatusOr<BatchResult> FakeDataplane::DeleteAll() {
  {
    absl::MutexLock lock(&mu_);
    ++delete_all_calls_;
  }
  return DeleteAllByListing(*this);
}

int FakeDataplane::delete_all_calls() const {
  absl::MutexLock lock(&mu_);
  return delete_all_calls_;
}

uint64_t FakeDataplane::generation() const {
  absl::MutexLock lock(&mu_);
  return table_->generation();
}

std::vector<Rule> FakeDataplane::ListRules() const {
  absl::MutexLock lock(&mu_);
  std::vector<Rule> out;
  for (const Rule* r : table_->Rules()) out.push_back(*r);
  return out;
}

DataplaneStats FakeDataplane::Stats() const {
  absl::MutexLock lock(&mu_);
  DataplaneStats s = stats_;
  s.generation = table_->generation();
  s.rules = table_->Stats();
  return s;
}

std::map<std::string, std::string> FakeDataplane::ConfigLocked() const {
  std::map<std::string, std::string> m = start_up_only_;
  for (auto& [k, v] : FormatRuntimeSettings(RuntimeSettingsUpdate::All(settings_)))
    if (listed_settings_.contains(k)) m[std::move(k)] = std::move(v);
  return m;
}

std::map<std::string, std::string> FakeDataplane::GetConfig() const {
  absl::MutexLock lock(&mu_);
  return ConfigLocked();
}

absl::StatusOr<std::string> FakeDataplane::GetConfig(absl::string_view key) const {
  absl::MutexLock lock(&mu_);
  const std::map<std::string, std::string> m = ConfigLocked();
  auto it = m.find(std::string(key));
  if (it == m.end()) return UnknownConfigKeyError(key);
  return it->second;
}

absl::Status FakeDataplane::ApplySettings(absl::Span<const ConfigValue> values) {
  absl::MutexLock lock(&mu_);
  absl::StatusOr<RuntimeSettingsUpdate> u = ParseRuntimeSettingsRequest(values, ConfigLocked());
  if (!u.ok()) return u.status();
  u->ApplyTo(&settings_);
  return absl::OkStatus();
}

absl::StatusOr<Rule> FakeDataplane::GetRule(uint64_t id) const {
  absl::MutexLock lock(&mu_);
  const Rule* r = table_->Find(id);
  if (!r) return absl::NotFoundError(absl::StrCat("rule id ", id, ": no such rule"));
  return *r;
}

absl::StatusOr<TraceResult> FakeDataplane::Trace(const FlowKey& key) const {
  absl::MutexLock lock(&mu_);
  TraceResult t;
  t.generation = table_->generation();
  const Rule* r = table_->Lookup(key, &t.megaflow_mask, &t.rule_subtables_visited);
  if (r) {
    t.matched = true;
    t.rule = *r;
  }
  return t;
}

absl::StatusOr<std::vector<RuleHit>> FakeDataplane::RuleHits() const {
  absl::MutexLock lock(&mu_);
  return rule_hits_;
}

void FakeDataplane::SetRuleHits(std::vector<RuleHit> hits) {
  absl::MutexLock lock(&mu_);
  rule_hits_ = std::move(hits);
}

void FakeDataplane::FailNextApply(absl::Status status) {
  absl::MutexLock lock(&mu_);
  fail_next_ = std::move(status);
}

void FakeDataplane::SetStats(DataplaneStats stats) {
  absl::MutexLock lock(&mu_);
  stats_ = std::move(stats);
}

void FakeDataplane::DefineConfig(std::string key, std::string value,
                                 bool mutable_at_runtime) {
  absl::MutexLock lock(&mu_);
  if (!mutable_at_runtime) {
    listed_settings_.erase(key);
    start_up_only_[std::move(key)] = std::move(value);
    return;
  }
  RuntimeSettingsUpdate u;
  if (absl::Status s = ParseRuntimeSetting(key, value, &u); !s.ok()) {
    std::fprintf(stderr, "FakeDataplane::DefineConfig: %s\n", std::string(s.message()).c_str());
    std::abort();
  }
  u.ApplyTo(&settings_);
  start_up_only_.erase(key);
  listed_settings_.insert(std::move(key));
}

std::vector<std::vector<RuleOp>> FakeDataplane::applied_batches() const {
  absl::MutexLock lock(&mu_);
  return batches_;
}

std::optional<Rule> FakeDataplane::Classify(const FlowKey& key) const {
  absl::MutexLock lock(&mu_);
  Flow wc;
  const Rule* r = table_->Lookup(key, &wc);
  if (!r) return std::nullopt;
  return *r;
}

}  // namespace flowclass
