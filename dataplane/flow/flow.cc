#include "dataplane/flow/flow.h"

namespace flowclass {

FlowKey MakeFiveTupleKey(uint32_t ipv4_src, uint32_t ipv4_dst, uint16_t tp_src,
                         uint16_t tp_dst, uint8_t nw_proto, uint32_t in_port) {
  Flow f;
  f.Set(Field::kInPort, in_port);
  f.Set(Field::kEthType, kEthTypeIpv4);
  f.Set(Field::kIpv4Src, ipv4_src);
  f.Set(Field::kIpv4Dst, ipv4_dst);
  f.Set(Field::kNwProto, nw_proto);
  f.Set(Field::kTpSrc, tp_src);
  f.Set(Field::kTpDst, tp_dst);
  return FlowKey::FromFlow(f);
}

}  // namespace flowclass
