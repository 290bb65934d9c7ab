// pipeline_benchmark — what a PMD spends per packet on its own work (parse,
// then classify through the cache hierarchy), without the port I/O that
// scripts/bench_daemon.sh measures around it.
//
//   ninja -C build pipeline_benchmark &&
//   build/bench/pipeline_benchmark
//
// BM_ParseAndClassify/<flows>/<rules>: frames of `flows` distinct UDP/TCP
// 5-tuples on in_port 1 (flow i is frame i mod flows), in a pool of 64
// bursts walked round-robin; rules 0 = one catch-all (one megaflow: every
// packet an EMC hit on it), 1 = 30 subtables of /8../24 destination prefixes
// above the catch-all (the bench_daemon set: a megaflow per few flows).
// Counters: ns per packet, and the share of EMC hits once warm.
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_format.h"
#include "benchmark/benchmark.h"
#include "dataplane/flow/packet_parser.h"
#include "dataplane/pipeline.h"
#include "dataplane/rules/rule_format.h"
#include "dataplane/rules/rule_table.h"
#include "tests/common/packet_builder.h"

namespace flowclass {
namespace {

constexpr int kBursts = 64;

std::string Prefix(uint32_t addr, int len) {
  addr &= len == 0 ? 0 : ~uint32_t{0} << (32 - len);
  return absl::StrFormat("%d.%d.%d.%d/%d", addr >> 24, addr >> 16 & 0xff, addr >> 8 & 0xff,
                         addr & 0xff, len);
}

// shape 1: 29 (nw_src, nw_dst) prefix-length pairs, 4 rules each, above the
// catch-all: 30 subtables, as scripts/bench_daemon.sh's 30-subtable set.
std::string RuleText(int shape) {
  std::string text;
  int prio = 1000;
  uint32_t made = 0;
  for (int src_len : {0, 8, 12, 16, 20, 24}) {
    for (int dst_len : {8, 10, 12, 14, 16, 18, 20, 24}) {
      if (shape != 1 || made == 29) break;
      ++made;
      for (uint32_t k = 0; k < 4; ++k) {
        const std::string src =
            src_len ? "nw_src=" + Prefix(0xc0a80000u | k << 12, src_len) + "," : "";
        text += absl::StrFormat("priority=%d,in_port=1,ip,%snw_dst=%s,actions=output:2\n",
                                prio--, src, Prefix(0x0a000000u | (k * 37 + made) << 14, dst_len));
      }
    }
  }
  text += "priority=1,in_port=1,ip,actions=output:2\n";
  return text;
}

void BM_ParseAndClassify(benchmark::State& state) {
  const int flows = static_cast<int>(state.range(0));
  RuleTable table;
  absl::StatusOr<std::vector<Rule>> rules =
      ParseNativeRules(RuleText(static_cast<int>(state.range(1))));
  if (!rules.ok()) {
    state.SkipWithError(std::string(rules.status().message()).c_str());
    return;
  }
  std::vector<RuleOp> ops;
  for (const Rule& r : *rules) ops.push_back(RuleOp::Insert(r));
  if (!table.ApplyBatch(ops).ok()) {
    state.SkipWithError("rules refused");
    return;
  }
  absl::StatusOr<std::unique_ptr<Pipeline>> p = Pipeline::Create();
  if (!p.ok()) {
    state.SkipWithError("pipeline");
    return;
  }
  Pipeline& pipeline = **p;
  pipeline.SetRuleTable(&table);

  std::vector<std::vector<uint8_t>> frames;
  for (int i = 0; i < kBursts * kMaxBurst; ++i) {
    const uint32_t f = static_cast<uint32_t>(i % flows);
    PacketBuilder b;
    b.Eth(0x020000000002, 0x020000000001)
        .Ipv4(0xc0a80000u + f, 0x0a000000u + (f * 2654435761u >> 8));
    if (f % 2) {
      b.Udp(static_cast<uint16_t>(1024 + f), 53);
    } else {
      b.Tcp(static_cast<uint16_t>(1024 + f), 80, kTcpAck);
    }
    frames.push_back(b.Payload(18).Build());
  }
  const FrameArrays arrays(std::move(frames));
  const std::vector<const uint8_t*>& ptrs = arrays.ptrs;
  const std::vector<uint16_t>& lens = arrays.lens;
  FlowKey keys[kMaxBurst];
  Verdict verdicts[kMaxBurst];
  // Warm the caches: every flow seen once, so the loop measures hits.
  for (int b = 0; b < kBursts; ++b) {
    const size_t base = static_cast<size_t>(b) * kMaxBurst;
    ParseBurst(&ptrs[base], &lens[base], kMaxBurst, /*in_port=*/1, keys);
    pipeline.ProcessBurst(keys, kMaxBurst, verdicts);
  }
  const PmdStats before = pipeline.stats();
  int burst = 0;
  uint64_t forwarded = 0;
  for (auto _ : state) {
    const size_t base = static_cast<size_t>(burst) * kMaxBurst;
    ParseBurst(&ptrs[base], &lens[base], kMaxBurst, /*in_port=*/1, keys,
               pipeline.parse_prefetch());
    pipeline.ProcessBurst(keys, kMaxBurst, verdicts, /*emc_prefetched=*/true);
    forwarded += verdicts[kMaxBurst - 1].rule_id != 0;
    burst = (burst + 1) % kBursts;
  }
  benchmark::DoNotOptimize(forwarded);
  const PmdStats& after = pipeline.stats();
  const double packets = static_cast<double>(after.packets - before.packets);
  state.SetItemsProcessed(state.iterations() * kMaxBurst);
  state.counters["ns/pkt"] = benchmark::Counter(
      static_cast<double>(state.iterations() * kMaxBurst),
      benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
  state.counters["emc_hit_share"] =
      packets > 0 ? static_cast<double>(after.emc_hits - before.emc_hits) / packets : 0;
  pipeline.SetRuleTable(nullptr);  // `table` dies before the pipeline
}
BENCHMARK(BM_ParseAndClassify)
    ->Args({100, 0})
    ->Args({100, 1})
    ->Args({2048, 1})
    ->ArgNames({"flows", "rules"});

}  // namespace
}  // namespace flowclass

BENCHMARK_MAIN();
