// What /metrics costs the PMDs: forwarding throughput of a real
// DpdkDataplane (one PMD, net_ring port, EMC-resident flows) with no
// scraper, and with a scraper that GETs /metrics from the real exporter
// every second (each scrape asks the PMD for a pipeline snapshot).
//
//   metrics_scrape_benchmark [--benchmark_repetitions=3]
//
// The benchmark thread (EAL main lcore) keeps a fixed population of mbufs
// cycling: it moves whatever the PMD transmitted back into the rx ring.
// "Mpps" is the PMD's rx counter delta over the run; "scrape_ms" the mean
// wall time of one scrape.  lcores 0@0,1@1: needs two CPUs to be meaningful.
#include <rte_eal.h>
#include <rte_eth_ring.h>
#include <rte_ethdev.h>
#include <rte_lcore.h>
#include <rte_mbuf.h>
#include <rte_ring.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "benchmark/benchmark.h"
#include "dataplane/dpdk/dpdk_dataplane.h"
#include "server/metrics/metrics_exporter.h"
#include "server/metrics/test_http.h"
#include "tests/common/packet_builder.h"

namespace flowclass {
namespace {

constexpr int kPackets = 1024;  // mbufs in flight
constexpr int kFlows = 64;
constexpr auto kRun = std::chrono::seconds(5);

struct Env {
  rte_mempool* pool = nullptr;
  rte_ring* rx = nullptr;
  rte_ring* tx = nullptr;
  std::unique_ptr<DpdkDataplane> dp;
};

Env* SetUp() {
  static Env* env = [] {
    auto* e = new Env;
    EalOptions o;
    o.program = "metrics_scrape_benchmark";
    o.lcore_map = "0@0,1@1";
    o.hugepages = false;
    o.memory_mb = 256;
    o.pci = false;
    o.file_prefix = absl::StrCat("fc_msb_", getpid());
    o.log_level = "error";
    if (absl::Status st = InitEal(o); !st.ok()) {
      fprintf(stderr, "%s\n", std::string(st.message()).c_str());
      exit(1);
    }
    e->pool = rte_pktmbuf_pool_create("bench_inject", 4095, 256, 0,
                                      RTE_MBUF_DEFAULT_BUF_SIZE,
                                      static_cast<int>(rte_socket_id()));
    e->rx = rte_ring_create("bench_rx", 4096, static_cast<int>(rte_socket_id()), 0);
    e->tx = rte_ring_create("bench_tx", 4096, static_cast<int>(rte_socket_id()), 0);
    if (rte_eth_from_rings("bench", &e->rx, 1, &e->tx, 1, rte_socket_id()) < 0) exit(1);
    DpdkDataplaneOptions d;
    PortOptions p;
    p.number = 1;
    p.device = "net_ring_bench";
    d.ports.push_back(p);
    d.pmd_lcores = {1};
    d.mbufs = 2047;
    auto dp = DpdkDataplane::Create(d);
    if (!dp.ok()) {
      fprintf(stderr, "%s\n", std::string(dp.status().message()).c_str());
      exit(1);
    }
    e->dp = std::move(*dp);
    Rule r;
    r.id = 1;
    r.priority = 1;
    r.match.SetExact(Field::kInPort, 1);
    r.action = Action::Output(1);
    if (!e->dp->ApplyBatch({RuleOp::Insert(r)}).ok() || !e->dp->Start().ok()) exit(1);
    for (int i = 0; i < kPackets; ++i) {
      Flow f;
      f.Set(Field::kEthType, kEthTypeIpv4);
      f.Set(Field::kIpv4Src, 0x0a000000 + static_cast<uint32_t>(i % kFlows));
      f.Set(Field::kIpv4Dst, 0x0b000001);
      f.Set(Field::kNwProto, kIpProtoUdp);
      f.Set(Field::kNwTtl, 64);
      f.Set(Field::kTpSrc, 1000);
      f.Set(Field::kTpDst, 53);
      std::vector<uint8_t> frame = BuildFrameFromFlow(f, 64);
      rte_mbuf* m = rte_pktmbuf_alloc(e->pool);
      std::memcpy(rte_pktmbuf_append(m, static_cast<uint16_t>(frame.size())), frame.data(),
                  frame.size());
      rte_ring_enqueue(e->rx, m);
    }
    return e;
  }();
  return env;
}

uint64_t RxPackets(const Dataplane& dp) { return dp.Stats().Total().rx_packets; }

// Arg 0: no scraper; arg 1: GET /metrics every second.
void BM_ForwardWithScrapes(benchmark::State& state) {
  Env* e = SetUp();
  std::unique_ptr<MetricsExporter> exporter;
  if (state.range(0)) {
    MetricsOptions o;
    o.address = "127.0.0.1:0";
    exporter = std::move(*MetricsExporter::Start(o, e->dp.get(), nullptr));
  }
  for (auto _ : state) {
    std::atomic<bool> stop{false};
    std::atomic<uint64_t> scrapes{0}, scrape_ns{0};
    std::thread scraper;
    if (exporter) {
      const int port = exporter->port();
      scraper = std::thread([&, port] {
        while (!stop.load()) {
          const auto t0 = std::chrono::steady_clock::now();
          HttpResponse r = HttpGet("127.0.0.1", port, "/metrics");
          const auto dt = std::chrono::steady_clock::now() - t0;
          if (r.status == 200) {
            scrapes.fetch_add(1);
            scrape_ns.fetch_add(static_cast<uint64_t>(
                std::chrono::duration_cast<std::chrono::nanoseconds>(dt).count()));
          }
          for (int i = 0; i < 100 && !stop.load(); ++i)
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
        }
      });
    }
    const uint64_t rx0 = RxPackets(*e->dp);
    const auto t0 = std::chrono::steady_clock::now();
    void* objs[64];
    while (std::chrono::steady_clock::now() - t0 < kRun) {
      const unsigned n = rte_ring_dequeue_burst(e->tx, objs, 64, nullptr);
      if (n) rte_ring_enqueue_bulk(e->rx, objs, n, nullptr);
    }
    const double secs =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const uint64_t rx1 = RxPackets(*e->dp);
    stop.store(true);
    if (scraper.joinable()) scraper.join();
    state.counters["Mpps"] = static_cast<double>(rx1 - rx0) / secs / 1e6;
    state.counters["scrapes"] = static_cast<double>(scrapes.load());
    state.counters["scrape_ms"] =
        scrapes.load() ? static_cast<double>(scrape_ns.load()) / scrapes.load() / 1e6 : 0;
  }
}
// What one scrape stalls the PMD for: Pipeline::Snapshot() with the default
// configuration (EMC 8192, SMC and CD tables of 1M entries walked for their
// occupancy), with `range(0)` megaflows installed.  The PMD pays this once
// per scrape; stall / scrape interval is the throughput it can cost.
void BM_PipelineSnapshot(benchmark::State& state) {
  auto pipeline = std::move(*Pipeline::Create({}));
  const int n = static_cast<int>(state.range(0));
  // One /32 rule per flow: one megaflow per flow, all in one subtable.
  RuleTable table;
  std::vector<RuleOp> ops;
  for (int i = 0; i < std::max(n, 1); ++i) {
    Rule r;
    r.id = static_cast<uint64_t>(i) + 1;
    r.priority = 1;
    r.match.SetExact(Field::kInPort, 1);
    r.match.SetExact(Field::kEthType, kEthTypeIpv4);
    r.match.SetExact(Field::kIpv4Dst, static_cast<uint64_t>(i) << 8);
    r.action = Action::Output(2);
    ops.push_back(RuleOp::Insert(r));
  }
  (void)table.ApplyBatch(ops);
  pipeline->SetRuleTable(&table);
  std::vector<FlowKey> keys(kMaxBurst);
  Verdict v[kMaxBurst];
  for (int i = 0; i < n; i += kMaxBurst) {
    for (int j = 0; j < kMaxBurst; ++j) {
      Flow f;
      f.Set(Field::kInPort, 1);
      f.Set(Field::kEthType, kEthTypeIpv4);
      f.Set(Field::kIpv4Dst, static_cast<uint32_t>(i + j) << 8);
      keys[j] = FlowKey::FromFlow(f);
    }
    pipeline->ProcessBurst(keys.data(), kMaxBurst, v);
  }
  size_t megaflows = 0;
  for (auto _ : state) {
    PipelineSnapshot s = pipeline->Snapshot();
    megaflows = s.megaflows;
    benchmark::DoNotOptimize(s);
  }
  state.counters["megaflows"] = static_cast<double>(megaflows);
}
BENCHMARK(BM_PipelineSnapshot)->Arg(0)->Arg(10000)->Unit(benchmark::kMicrosecond);

BENCHMARK(BM_ForwardWithScrapes)->Arg(0)->Arg(1)->Iterations(1)->UseRealTime()
    ->Unit(benchmark::kSecond);

}  // namespace
}  // namespace flowclass

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  // Leave no EAL runtime directory behind for our unique --file-prefix.
  const std::string prefix = absl::StrCat("fc_msb_", getpid());
  std::error_code ec;
  const char* xdg = getenv("XDG_RUNTIME_DIR");
  for (const std::string& base :
       {std::string("/var/run/dpdk"), std::string(xdg ? xdg : "/tmp") + "/dpdk"})
    std::filesystem::remove_all(base + "/" + prefix, ec);
  return 0;
}
