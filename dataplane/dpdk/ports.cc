// ports.cc — setting the dataplane up and tearing it down: Create (options,
// lcores, ports found or probed, the mbuf pool, port and queue configuration,
// the PMDs and their rx queues), Start / Stop, ~Impl, and the port
// accessors.  Control thread only; Create runs before any PMD exists, Stop
// waits for the PMDs before it stops the ports.
#include <rte_dev.h>
#include <rte_errno.h>
#include <rte_ethdev.h>
#include <rte_launch.h>
#include <rte_lcore.h>
#include <rte_mbuf.h>
#include <rte_mempool.h>

#include <algorithm>
#include <atomic>
#include <cstring>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/quote.h"
#include "dataplane/dpdk/acl_builder.h"
#include "dataplane/dpdk/dpdk_dataplane.h"
#include "dataplane/dpdk/internal/dpdk_dataplane_impl.h"
#include "dataplane/dpdk/rule_publisher.h"

namespace flowclass {

using dpdk_internal::CounterLine;
using dpdk_internal::DpdkError;
using dpdk_internal::KnobsMailbox;
using dpdk_internal::PmdCounterBlock;
using dpdk_internal::PortState;
using dpdk_internal::RxQueue;
using dpdk_internal::SnapshotMailbox;

DpdkDataplane::Impl::~Impl() {
  acl_builder.reset();  // joins the builder thread, which reads what follows
  for (PortState& p : ports) {
    if (p.started) rte_eth_dev_stop(p.eth_port);
    // Devices that existed before Create (EAL-probed PCI devices, ethdevs a
    // test made) belong to whoever made them: left stopped, not closed.  What
    // we probed is closed and detached, so the name can be probed again
    // (tests create several dataplanes in one EAL).
    if (!p.probed_by_us) continue;
    rte_eth_dev_info info;
    rte_device* dev = nullptr;
    if (rte_eth_dev_info_get(p.eth_port, &info) == 0) dev = info.device;
    rte_eth_dev_close(p.eth_port);
    if (dev) rte_dev_remove(dev);
  }
  // Pipelines may hold pointers into the published table: drop them first.
  pmds.clear();
  publisher.reset();
  if (pool) rte_mempool_free(pool);
}

DpdkDataplane::DpdkDataplane(std::unique_ptr<Impl> impl)
    : impl_(std::move(impl)) {}

DpdkDataplane::~DpdkDataplane() { Stop(); }

absl::StatusOr<std::unique_ptr<DpdkDataplane>> DpdkDataplane::Create(
    const DpdkDataplaneOptions& options, SetupStage* failed) {
  SetupStage dummy;
  SetupStage& stage = failed ? *failed : dummy;
  stage = SetupStage::kOptions;
  if (!EalInitialized())
    return absl::FailedPreconditionError("eal: not initialised (call InitEal)");
  const DpdkDataplaneOptions& o = options;
  if (o.ports.empty())
    return absl::InvalidArgumentError("ports: at least one port is required");
  if (static_cast<int>(o.ports.size()) > kMaxDataplanePorts)
    return absl::InvalidArgumentError(absl::StrCat(
        "ports: ", o.ports.size(), " ports, at most ", kMaxDataplanePorts));
  if (o.pmd_lcores.empty())
    return absl::InvalidArgumentError("pmd.lcores: at least one PMD lcore is required");
  if (static_cast<int>(o.pmd_lcores.size()) > kMaxPmds)
    return absl::InvalidArgumentError(absl::StrCat("pmd.lcores: at most ", kMaxPmds));
  if (o.burst < 1 || o.burst > kMaxBurst)
    return absl::InvalidArgumentError(absl::StrCat(
        "pmd.burst: ", o.burst, " is outside 1..", kMaxBurst));
  if (o.tx_retries < 0)
    return absl::InvalidArgumentError("pmd.tx_retries: must be >= 0");
  if (o.publish_timeout_ms < 1 || o.publish_timeout_ms > kMaxPublishTimeoutMs)
    return absl::InvalidArgumentError(absl::StrCat("pmd.publish_timeout_ms: ",
                                                   o.publish_timeout_ms, " is outside 1..",
                                                   kMaxPublishTimeoutMs));

  if (o.kind == PipelineKind::kAcl) {
    if (absl::Status s = CheckAclAlgorithm(o.acl_algorithm, kConfigAclAlgorithm); !s.ok())
      return s;
  }

  auto impl = std::make_unique<Impl>();
  impl->opts = o;
  impl->publish_timeout = std::chrono::milliseconds(o.publish_timeout_ms);
  RuntimeSettings& rs = impl->settings;
  rs.tx_retries = static_cast<uint32_t>(o.tx_retries);
  rs.idle_sleep_us = o.idle_sleep_us;
  rs.emc_insert_inv_prob = o.pipeline.emc_config.insert_inv_prob;
  rs.smc = o.pipeline.smc;
  rs.cd = o.pipeline.cd.mode;
  rs.ranking_interval_ms = o.pipeline.ranking_interval_ms;
  rs.megaflow_max_idle_ms = o.pipeline.megaflow_max_idle_ms;
  rs.max_megaflows = o.pipeline.max_megaflows;
  rs.max_subtables_per_port = o.pipeline.max_subtables_per_port;
  rs.upcall_rate = o.pipeline.upcall_rate;
  rs.upcall_burst = o.pipeline.upcall_burst;
  rs.upcall_limit_action = o.pipeline.upcall_limit_action;
  rs.rare_mask_subtables = o.pipeline.rare_mask_subtables;
  rs.acl_algorithm = o.acl_algorithm;
  rs.lookup = o.pipeline.dpcls.lookup;
  impl->knobs = rs;
  impl->tx_retries.store(o.tx_retries);
  impl->idle_sleep_us.store(o.idle_sleep_us);
  impl->port_index_by_number.assign(kMaxPortNumber + 1, -1);

  // Lcores: enabled EAL workers, distinct, not the main lcore, not busy.
  stage = SetupStage::kLcore;
  for (size_t i = 0; i < o.pmd_lcores.size(); ++i) {
    const int l = o.pmd_lcores[i];
    if (l < 0 || l >= RTE_MAX_LCORE || !rte_lcore_is_enabled(static_cast<unsigned>(l)))
      return absl::InvalidArgumentError(absl::StrCat(
          "pmd.lcores: lcore ", l, " is not enabled in EAL (add it to the EAL lcore list)"));
    if (static_cast<unsigned>(l) == rte_get_main_lcore())
      return absl::InvalidArgumentError(absl::StrCat(
          "pmd.lcores: lcore ", l, " is the main (control) lcore"));
    for (size_t j = 0; j < i; ++j)
      if (o.pmd_lcores[j] == l)
        return absl::InvalidArgumentError(
            absl::StrCat("pmd.lcores: lcore ", l, " listed twice"));
    if (rte_eal_get_lcore_state(static_cast<unsigned>(l)) != WAIT)
      return absl::FailedPreconditionError(
          absl::StrCat("pmd.lcores: lcore ", l, " is already in use"));
  }

  // Ports: find or probe.
  stage = SetupStage::kPort;
  const uint16_t n_pmds = static_cast<uint16_t>(o.pmd_lcores.size());
  for (size_t i = 0; i < o.ports.size(); ++i) {
    const PortOptions& po = o.ports[i];
    const std::string where =
        absl::StrCat("ports[", i, "] (number ", po.number, ", device ", po.device, ")");
    if (po.number > kMaxPortNumber)
      return absl::InvalidArgumentError(absl::StrCat(where, ": number above ", kMaxPortNumber));
    if (impl->port_index_by_number[po.number] >= 0)
      return absl::InvalidArgumentError(absl::StrCat(where, ": duplicate port number"));
    if (po.device.empty())
      return absl::InvalidArgumentError(absl::StrCat(where, ": device is empty"));
    if (po.poll && (po.rx_queues < 1 || po.rx_queues > 64))
      return absl::InvalidArgumentError(absl::StrCat(where, ": rx_queues must be 1..64"));
    PortState ps;
    ps.opts = po;
    uint16_t pid = 0;
    if (rte_eth_dev_get_port_by_name(po.device.c_str(), &pid) != 0) {
      const std::string spec =
          po.devargs.empty() ? po.device : po.device + "," + po.devargs;
      int rc = rte_dev_probe(spec.c_str());
      if (rc != 0)
        return absl::NotFoundError(absl::StrCat(
            where, ": cannot probe device ", QuoteForMessage(spec, '"', kQuotePathMaxBytes),
            ": ", rte_strerror(-rc)));
      if (rte_eth_dev_get_port_by_name(po.device.c_str(), &pid) != 0)
        return absl::NotFoundError(absl::StrCat(
            where, ": probed but no ethdev named ",
            QuoteForMessage(po.device, '"', kQuotePathMaxBytes)));
      ps.probed_by_us = true;
    }
    for (const PortState& other : impl->ports)
      if (other.eth_port == pid)
        return absl::InvalidArgumentError(absl::StrCat(where, ": same device as another port"));
    ps.eth_port = pid;
    impl->ports.push_back(std::move(ps));
    impl->port_index_by_number[po.number] = static_cast<int8_t>(i);
  }

  // Mbuf pool.
  stage = SetupStage::kMempool;
  uint64_t need = 0;
  for (const PortOptions& po : o.ports) {
    if (po.poll) need += uint64_t(po.rx_queues) * po.rx_descriptors;
    need += uint64_t(n_pmds) * po.tx_descriptors;
  }
  need += uint64_t(n_pmds + 1) * (o.mbuf_cache + 2 * kMaxBurst) + 1024;
  const uint32_t n_mbufs = o.mbufs ? o.mbufs : static_cast<uint32_t>(need);
  static std::atomic<int> pool_seq{0};
  const std::string pool_name = absl::StrCat("fc_mbuf_", pool_seq.fetch_add(1));
  impl->pool = rte_pktmbuf_pool_create(pool_name.c_str(), n_mbufs,
                                       std::min<uint32_t>(o.mbuf_cache, 512), 0,
                                       o.mbuf_data_room,
                                       static_cast<int>(rte_socket_id()));
  if (!impl->pool)
    return absl::ResourceExhaustedError(absl::StrCat(
        "mempool.mbufs: cannot create a pool of ", n_mbufs, " mbufs of ",
        o.mbuf_data_room, " bytes: ", rte_strerror(rte_errno),
        rte_errno == EINVAL
            ? " (mempool.cache must be at most 512 and at most mempool.mbufs / 1.5)"
            : " (raise eal.memory_mb or lower mempool.mbufs)"));

  // Configure every port.
  stage = SetupStage::kPort;
  for (size_t i = 0; i < impl->ports.size(); ++i) {
    PortState& ps = impl->ports[i];
    const PortOptions& po = ps.opts;
    const std::string where =
        absl::StrCat("ports[", i, "] (number ", po.number, ", device ", po.device, ")");
    rte_eth_dev_info info;
    int rc = rte_eth_dev_info_get(ps.eth_port, &info);
    if (rc != 0) return DpdkError(where + ": rte_eth_dev_info_get", rc);
    const uint16_t nrx = po.OpenedRxQueues();
    if (nrx > info.max_rx_queues)
      return absl::InvalidArgumentError(absl::StrCat(
          where, ": rx_queues ", nrx, " but the device has at most ",
          info.max_rx_queues));
    // net_pcap makes one rx queue per rx_pcap= / rx_iface= / iface= input:
    // an input past rx_queues would never be read, silently.
    if (po.poll && info.driver_name != nullptr &&
        std::strcmp(info.driver_name, "net_pcap") == 0 && nrx < info.max_rx_queues)
      return absl::InvalidArgumentError(absl::StrCat(
          where, ": the device has ", info.max_rx_queues,
          " rx inputs (rx_pcap=/rx_iface=/iface=) but rx_queues is ", nrx,
          ": the inputs past it would never be read; set rx_queues: ", info.max_rx_queues));
    if (n_pmds > info.max_tx_queues)
      return absl::InvalidArgumentError(absl::StrCat(
          where, ": the device has ", info.max_tx_queues,
          " tx queues, one per PMD is needed (", n_pmds,
          "); for net_pcap repeat tx_pcap= once per PMD"));
    rte_eth_conf conf;
    std::memset(&conf, 0, sizeof(conf));
    if (po.rss && nrx > 1 && info.flow_type_rss_offloads != 0) {
      conf.rxmode.mq_mode = RTE_ETH_MQ_RX_RSS;
      conf.rx_adv_conf.rss_conf.rss_hf =
          (RTE_ETH_RSS_IP | RTE_ETH_RSS_TCP | RTE_ETH_RSS_UDP) &
          info.flow_type_rss_offloads;
    }
    ps.rss_hf = conf.rx_adv_conf.rss_conf.rss_hf;
    rc = rte_eth_dev_configure(ps.eth_port, nrx, n_pmds, &conf);
    if (rc != 0) return DpdkError(where + ": rte_eth_dev_configure", rc);
    uint16_t rxd = static_cast<uint16_t>(po.rx_descriptors);
    uint16_t txd = static_cast<uint16_t>(po.tx_descriptors);
    rc = rte_eth_dev_adjust_nb_rx_tx_desc(ps.eth_port, &rxd, &txd);
    if (rc != 0) return DpdkError(where + ": rte_eth_dev_adjust_nb_rx_tx_desc", rc);
    const int socket = rte_eth_dev_socket_id(ps.eth_port);
    for (uint16_t q = 0; q < nrx; ++q) {
      rc = rte_eth_rx_queue_setup(ps.eth_port, q, rxd,
                                  static_cast<unsigned>(socket < 0 ? SOCKET_ID_ANY : socket),
                                  nullptr, impl->pool);
      // net_pcap's infinite_rx copies the whole pcap into mbufs of the pool
      // here, and refuses (EINVAL) when the pool cannot hold it.
      if (rc == -EINVAL && info.driver_name != nullptr &&
          std::strcmp(info.driver_name, "net_pcap") == 0 &&
          absl::StrContains(po.devargs, "infinite_rx=1")) {
        stage = SetupStage::kMempool;
        return absl::ResourceExhaustedError(absl::StrCat(
            "mempool.mbufs: ", where, ": rx queue ", q,
            " (net_pcap, infinite_rx=1) keeps the whole pcap in the pool, which has ",
            rte_mempool_avail_count(impl->pool), " free mbufs of ", impl->pool->size,
            ": set mempool.mbufs to at least the pcap's packet count plus ", need,
            " (what the ports and PMDs need besides); or a frame of the pcap is larger than "
            "mempool.data_room - ", RTE_PKTMBUF_HEADROOM, " (",
            o.mbuf_data_room - RTE_PKTMBUF_HEADROOM, " bytes)"));
      }
      if (rc != 0) return DpdkError(absl::StrCat(where, ": rx queue ", q, " setup"), rc);
    }
    for (uint16_t q = 0; q < n_pmds; ++q) {
      rc = rte_eth_tx_queue_setup(ps.eth_port, q, txd,
                                  static_cast<unsigned>(socket < 0 ? SOCKET_ID_ANY : socket),
                                  nullptr);
      if (rc != 0) return DpdkError(absl::StrCat(where, ": tx queue ", q, " setup"), rc);
    }
  }

  // PMDs and their rx queues (round-robin in port, queue order).
  impl->table = std::make_unique<RuleTable>(o.limits, /*concurrent_readers=*/true);
  impl->publisher = std::make_unique<RulePublisher>(
      n_pmds, std::make_unique<PublishedTable>(impl->table.get(), 0));
  impl->pmds.resize(n_pmds);
  for (int i = 0; i < n_pmds; ++i) {
    auto& pmd = impl->pmds[i];
    pmd.index = i;
    pmd.lcore = o.pmd_lcores[i];
    if (o.kind == PipelineKind::kAcl) {
      AclPipelineConfig ac;
      ac.emc = o.pipeline.emc;
      ac.emc_entries = o.pipeline.emc_config.entries;
      ac.emc_insert_inv_prob = o.pipeline.emc_config.insert_inv_prob;
      ac.emc_adaptive = o.pipeline.emc_adaptive;
      absl::StatusOr<std::unique_ptr<AclPipeline>> acl = AclPipeline::Create(ac);
      if (!acl.ok()) {
        stage = SetupStage::kOptions;
        return absl::InvalidArgumentError(
            absl::StrCat("pipeline (kind acl): ", acl.status().message()));
      }
      pmd.acl_pipeline = std::move(*acl);
    } else {
      absl::StatusOr<std::unique_ptr<Pipeline>> pipeline = Pipeline::Create(o.pipeline);
      if (!pipeline.ok()) {
        stage = SetupStage::kOptions;
        return pipeline.status();
      }
      pmd.pipeline = std::move(*pipeline);
    }
    pmd.counters = std::make_unique<PmdCounterBlock>();
    pmd.mailbox = std::make_unique<SnapshotMailbox>();
    pmd.knobs_box = std::make_unique<KnobsMailbox>();
    pmd.dp = impl.get();
  }
  int next = 0;
  for (const PortState& ps : impl->ports) {
    if (!ps.opts.poll) continue;
    for (int q = 0; q < ps.opts.rx_queues; ++q) {
      impl->pmds[next % n_pmds].rxq.push_back(
          RxQueue{ps.eth_port, static_cast<uint16_t>(q), ps.opts.number});
      ++next;
    }
  }
  for (auto& pmd : impl->pmds)  // metrics: per-rxq counters
    pmd.rxq_counters = std::make_unique<CounterLine[]>(pmd.rxq.size() / 8 + 1);
  if (o.kind == PipelineKind::kAcl)
    impl->acl_builder = std::make_unique<dpdk_internal::AclBuilder>(impl.get());
  stage = SetupStage::kNone;
  return std::unique_ptr<DpdkDataplane>(new DpdkDataplane(std::move(impl)));
}

absl::Status DpdkDataplane::Start() {
  Impl& d = *impl_;
  if (d.started) return absl::FailedPreconditionError("dataplane: already started");
  for (PortState& ps : d.ports) {
    int rc = rte_eth_dev_start(ps.eth_port);
    if (rc != 0)
      return DpdkError(absl::StrCat("ports (number ", ps.opts.number, ", device ",
                                    ps.opts.device, "): rte_eth_dev_start"),
                       rc);
    ps.started = true;
    if (ps.opts.promiscuous) rte_eth_promiscuous_enable(ps.eth_port);  // best effort
  }
  d.stop.store(false);
  for (auto& pmd : d.pmds) {
    int rc = rte_eal_remote_launch(&Impl::PmdMain, &pmd,
                                   static_cast<unsigned>(pmd.lcore));
    if (rc != 0) {
      Stop();
      return DpdkError(absl::StrCat("pmd.lcores: launch on lcore ", pmd.lcore), rc);
    }
    pmd.launched = true;
  }
  d.started = true;
  running_.store(true, std::memory_order_release);
  return absl::OkStatus();
}

void DpdkDataplane::Stop() {
  Impl& d = *impl_;
  if (d.stopped) return;
  d.stop.store(true);
  for (auto& pmd : d.pmds) {
    if (pmd.launched) rte_eal_wait_lcore(static_cast<unsigned>(pmd.lcore));
    pmd.launched = false;
  }
  for (PortState& ps : d.ports) {
    if (ps.started) rte_eth_dev_stop(ps.eth_port);
    ps.started = false;
  }
  if (d.started) d.stopped = true;
  running_.store(false, std::memory_order_release);
}

std::vector<std::pair<uint32_t, int>> DpdkDataplane::RxQueuesOf(int pmd) const {
  std::vector<std::pair<uint32_t, int>> r;
  for (const RxQueue& q : impl_->pmds.at(pmd).rxq) r.emplace_back(q.number, q.queue);
  return r;
}

std::vector<DpdkPortInfo> DpdkDataplane::Ports() const {
  std::vector<DpdkPortInfo> r;
  for (const PortState& ps : impl_->ports)
    r.push_back(DpdkPortInfo{ps.opts.number, ps.opts.device,
                             ps.opts.OpenedRxQueues(),
                             ps.rss_hf});
  return r;
}

int DpdkDataplane::EthPortOf(uint32_t number) const {
  if (number > kMaxPortNumber) return -1;
  const int i = impl_->port_index_by_number[number];
  return i < 0 ? -1 : impl_->ports[i].eth_port;
}

}  // namespace flowclass
