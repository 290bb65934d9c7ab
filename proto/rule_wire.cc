// rule_wire.cc — a v1.ApplyRulesRequest written and read straight from its wire
// form (rule_wire.h).
#include "proto/rule_wire.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "dataplane/flow/addr_text.h"
#include "dataplane/flow/flow.h"
#include "dataplane/rules/rule.h"
#include "flowclass/v1/flowclass.pb.h"
#include "proto/rule_convert.h"
#include "proto/rule_convert_internal.h"

namespace flowclass {

using internal::SetRaw;
using internal::Structurable;
using internal::WidthMask;

// ---------------------------------------------------------------------------
// The wire form of an ApplyRulesRequest, written directly.

namespace {

// Protocol buffers' wire format, just what an ApplyRulesRequest needs.
class Wire {
 public:
  explicit Wire(char* p) : start_(p), p_(p) {}
  void Varint(uint64_t v) {
    while (v >= 0x80) {
      *p_++ = static_cast<char>(v | 0x80);
      v >>= 7;
    }
    *p_++ = static_cast<char>(v);
  }
  void Tag(int field, int wire_type) { Varint(static_cast<uint64_t>(field) << 3 | wire_type); }
  void VarintField(int field, uint64_t v) {
    Tag(field, 0);
    Varint(v);
  }
  void Bytes(int field, const char* data, size_t n) {
    Tag(field, 2);
    Varint(n);
    std::memcpy(p_, data, n);
    p_ += n;
  }
  void Nested(int field, const Wire& inner) { Bytes(field, inner.start_, inner.size()); }
  size_t size() const { return static_cast<size_t>(p_ - start_); }
  const char* data() const { return start_; }

 private:
  char* start_;
  char* p_;
};

// v1.MaskedValue as MaskedToProto fills it (value without presence: absent
// when 0; mask only when not the whole field).
void WireMasked(const Match& m, Field f, int field, Wire* out) {
  char buf[32];
  Wire w(buf);
  if (const uint64_t v = m.value.Get(f); v != 0) w.VarintField(1, v);
  if (const uint64_t mk = m.mask.Get(f); mk != WidthMask(InfoOf(f).bits)) w.VarintField(2, mk);
  out->Nested(field, w);
}

// v1.PortMatch as PortToProto fills it (a oneof: its member is written even
// when 0).
void WirePort(const Match& m, Field f, const PortRange& r, int field, Wire* out) {
  char buf[48];
  Wire w(buf);
  if (!r.IsFull()) {
    char rb[16];
    Wire range(rb);
    if (r.lo != 0) range.VarintField(1, r.lo);
    if (r.hi != 0) range.VarintField(2, r.hi);
    w.Nested(3, range);
  } else if (m.mask.Get(f) == 0xffff) {
    w.VarintField(1, m.value.Get(f));
  } else {
    WireMasked(m, f, 2, &w);
  }
  out->Nested(field, w);
}

// The v1.Rule RuleToProto makes, when the direct encoder knows every field
// it would set: false (nothing written) otherwise.
bool WireRule(const Rule& r, Wire* out) {
  const Match& m = r.match;
  if (!Structurable(m) ||
      (r.action.kind != Action::Kind::kDrop && r.action.kind != Action::Kind::kOutput))
    return false;
  // Left to RuleToProto: Ethernet addresses, VLANs, IPv6, fragments.
  if (m.mask.Get(Field::kEthSrc) || m.mask.Get(Field::kEthDst) || m.mask.Get(Field::kVlan0Tci) ||
      m.mask.Get(Field::kVlan1Tci) || m.mask.Ipv6Src() != 0 || m.mask.Ipv6Dst() != 0 ||
      m.mask.Get(Field::kNwFrag))
    return false;
  char mb[256];
  Wire match(mb);
  if (m.mask.Get(Field::kInPort)) match.VarintField(1, m.value.Get(Field::kInPort));
  if (m.mask.Get(Field::kEthType)) match.VarintField(4, m.value.Get(Field::kEthType));
  char text[kMaxIpv4MaskedText];
  if (m.mask.Get(Field::kIpv4Src))
    match.Bytes(7, text,
                FormatIpv4MaskedTo(static_cast<uint32_t>(m.value.Get(Field::kIpv4Src)),
                                   static_cast<uint32_t>(m.mask.Get(Field::kIpv4Src)), text));
  if (m.mask.Get(Field::kIpv4Dst))
    match.Bytes(8, text,
                FormatIpv4MaskedTo(static_cast<uint32_t>(m.value.Get(Field::kIpv4Dst)),
                                   static_cast<uint32_t>(m.mask.Get(Field::kIpv4Dst)), text));
  if (m.mask.Get(Field::kNwProto)) WireMasked(m, Field::kNwProto, 11, &match);
  if (m.mask.Get(Field::kNwTos)) WireMasked(m, Field::kNwTos, 12, &match);
  if (m.mask.Get(Field::kNwTtl)) WireMasked(m, Field::kNwTtl, 13, &match);
  if (m.mask.Get(Field::kTpSrc) || !m.tp_src.IsFull())
    WirePort(m, Field::kTpSrc, m.tp_src, 15, &match);
  if (m.mask.Get(Field::kTpDst) || !m.tp_dst.IsFull())
    WirePort(m, Field::kTpDst, m.tp_dst, 16, &match);
  if (m.mask.Get(Field::kTcpFlags)) WireMasked(m, Field::kTcpFlags, 17, &match);
  if (r.id != 0) out->VarintField(1, r.id);
  if (r.priority != 0) out->VarintField(2, r.priority);
  if (r.cookie != 0) out->VarintField(3, r.cookie);
  out->Nested(4, match);
  char ab[16];
  Wire action(ab);
  if (r.action.kind == Action::Kind::kOutput) {
    action.VarintField(2, r.action.port);
  } else {
    action.Bytes(1, "", 0);  // Drop {}
  }
  out->Nested(5, action);
  return true;
}

}  // namespace

size_t AppendRuleBatchWire(uint64_t batch_id, absl::Span<const RuleOp> ops, std::string* out) {
  char head[16];
  Wire w(head);
  if (batch_id != 0) w.VarintField(1, batch_id);
  out->append(w.data(), w.size());
  std::string slow;  // an op the direct encoder leaves to RuleOpToProto
  size_t n_direct = 0;
  for (const RuleOp& op : ops) {
    char ob[512];
    Wire o(ob);
    bool direct = true;
    switch (op.kind) {
      case RuleOp::Kind::kInsert:
      case RuleOp::Kind::kReplace: {
        char rb[448];
        Wire rule(rb);
        direct = WireRule(op.rule, &rule);
        if (direct) o.Nested(op.kind == RuleOp::Kind::kInsert ? 1 : 2, rule);
        break;
      }
      case RuleOp::Kind::kDelete:
        o.VarintField(3, op.id);
        break;
      case RuleOp::Kind::kDeleteByCookie:
        o.VarintField(4, op.cookie);
        break;
    }
    char tag[16];
    Wire t(tag);
    if (direct) {
      t.Tag(2, 2);
      t.Varint(o.size());
      out->append(t.data(), t.size());
      out->append(o.data(), o.size());
      ++n_direct;
      continue;
    }
    v1::RuleOp p;
    RuleOpToProto(op, &p);
    slow.clear();
    p.SerializeToString(&slow);
    t.Tag(2, 2);
    t.Varint(slow.size());
    out->append(t.data(), t.size());
    out->append(slow);
  }
  return n_direct;
}

// ---------------------------------------------------------------------------
// The wire form of an ApplyRulesRequest, read directly.

namespace {

// A cursor over protocol buffers' wire format; any malformed input fails.
class WireReader {
 public:
  explicit WireReader(absl::string_view b) : p_(b.data()), end_(b.data() + b.size()) {}
  bool done() const { return p_ == end_; }
  bool Varint(uint64_t* v) {
    uint64_t r = 0;
    for (int shift = 0; shift < 64 && p_ < end_; shift += 7) {
      const auto c = static_cast<uint8_t>(*p_++);
      r |= uint64_t{c & 0x7fu} << shift;
      if (c < 0x80) {
        if (shift == 63 && c > 1) return false;  // more than 64 bits
        *v = r;
        return true;
      }
    }
    return false;
  }
  // The next field: its number, wire type, and (varint) value or
  // (length-delimited) bytes.  Other wire types fail.
  bool Field(int* field, int* type, uint64_t* v, absl::string_view* bytes) {
    uint64_t tag = 0;
    // Tags and lengths in at most 5 bytes, lengths below 2^31: protobuf's
    // parser refuses longer ones.
    const char* start = p_;
    if (!Varint(&tag) || p_ - start > 5 || (tag >> 3) == 0 || (tag >> 3) >= (1u << 29))
      return false;
    *field = static_cast<int>(tag >> 3);
    *type = static_cast<int>(tag & 7);
    if (*type == 0) return Varint(v);
    if (*type != 2) return false;
    uint64_t n = 0;
    start = p_;
    if (!Varint(&n) || p_ - start > 5 || n >= (uint64_t{1} << 31) ||
        n > static_cast<uint64_t>(end_ - p_))
      return false;
    *bytes = absl::string_view(p_, n);
    p_ += n;
    return true;
  }

 private:
  const char* p_;
  const char* end_;
};

// A v1.MaskedValue as MaskedFromProto reads it; false where that would
// fail (or the wire holds anything else).
bool ReadMasked(absl::string_view b, Field f, Match* m) {
  WireReader r(b);
  uint64_t value = 0, mask = WidthMask(InfoOf(f).bits);
  unsigned seen = 0;
  while (!r.done()) {
    int field = 0, type = 0;
    uint64_t v = 0;
    absl::string_view bytes;
    if (!r.Field(&field, &type, &v, &bytes) || type != 0 || field < 1 || field > 2 ||
        (seen & (1u << field)))
      return false;
    seen |= 1u << field;
    (field == 1 ? value : mask) = v;
  }
  const uint64_t full = WidthMask(InfoOf(f).bits);
  if (value > full || mask > full) return false;
  SetRaw(m, f, value, mask);
  return true;
}

// A v1.PortMatch as PortFromProto reads it.
bool ReadPort(absl::string_view b, Field f, PortRange* range, Match* m) {
  WireReader r(b);
  int field = 0, type = 0;
  uint64_t v = 0;
  absl::string_view bytes;
  if (!r.Field(&field, &type, &v, &bytes) || !r.done()) return false;  // exactly one member
  if (field == 1 && type == 0) {
    if (v > 0xffff) return false;
    SetRaw(m, f, v, 0xffff);
    return true;
  }
  if (field == 2 && type == 2) return ReadMasked(bytes, f, m);
  if (field != 3 || type != 2) return false;
  WireReader rr(bytes);
  uint64_t lo = 0, hi = 0;
  unsigned seen = 0;
  while (!rr.done()) {
    int rf = 0, rt = 0;
    uint64_t rv = 0;
    absl::string_view rb;
    if (!rr.Field(&rf, &rt, &rv, &rb) || rt != 0 || rf < 1 || rf > 2 || (seen & (1u << rf)))
      return false;
    seen |= 1u << rf;
    (rf == 1 ? lo : hi) = rv;
  }
  if (lo > 0xffff || hi > 0xffff || lo > hi) return false;
  range->lo = static_cast<uint16_t>(lo);
  range->hi = static_cast<uint16_t>(hi);
  return true;
}

// A v1.Match as MatchFromProto reads it, for the fields the encoder writes
// directly (in_port, eth_type, ipv4_src/dst, ip_proto/tos/ttl, tp_src/dst,
// tcp_flags); false for any other field, a repeated one, or an error.
bool ReadMatch(absl::string_view b, Match* m) {
  WireReader r(b);
  absl::string_view sub[18];
  uint64_t num[18] = {};
  uint32_t seen = 0;
  while (!r.done()) {
    int field = 0, type = 0;
    uint64_t v = 0;
    absl::string_view bytes;
    if (!r.Field(&field, &type, &v, &bytes) || field >= 18 || (seen & (1u << field))) return false;
    seen |= 1u << field;
    const bool varint_field = field == 1 || field == 4;
    const bool bytes_field = field == 7 || field == 8 || field == 11 || field == 12 ||
                             field == 13 || field == 15 || field == 16 || field == 17;
    if (!(varint_field && type == 0) && !(bytes_field && type == 2)) return false;
    num[field] = v;
    sub[field] = bytes;
  }
  auto has = [&](int field) { return (seen & (1u << field)) != 0; };
  // In MatchFromProto's order (a later field may overwrite an earlier one).
  if (has(1)) {
    if (num[1] > 0xffffffffu) return false;
    SetRaw(m, Field::kInPort, num[1], 0xffffffffu);
  }
  if (has(4)) {
    if (num[4] > 0xffff) return false;
    SetRaw(m, Field::kEthType, num[4], 0xffff);
  }
  uint32_t a = 0, mk = 0;
  if (has(7)) {
    if (!ParseIpv4Masked(std::string_view(sub[7].data(), sub[7].size()), &a, &mk).ok())
      return false;
    SetRaw(m, Field::kIpv4Src, a, mk);
  }
  if (has(8)) {
    if (!ParseIpv4Masked(std::string_view(sub[8].data(), sub[8].size()), &a, &mk).ok())
      return false;
    SetRaw(m, Field::kIpv4Dst, a, mk);
  }
  if (!has(4) && (has(7) || has(8))) SetRaw(m, Field::kEthType, kEthTypeIpv4, 0xffff);
  if (has(11) && !ReadMasked(sub[11], Field::kNwProto, m)) return false;
  if (has(12) && !ReadMasked(sub[12], Field::kNwTos, m)) return false;
  if (has(13) && !ReadMasked(sub[13], Field::kNwTtl, m)) return false;
  if (has(15) && !ReadPort(sub[15], Field::kTpSrc, &m->tp_src, m)) return false;
  if (has(16) && !ReadPort(sub[16], Field::kTpDst, &m->tp_dst, m)) return false;
  if (has(17) && !ReadMasked(sub[17], Field::kTcpFlags, m)) return false;
  return true;
}

// A v1.Rule as RuleFromProto reads it (structured form only).
bool ReadRule(absl::string_view b, Rule* out) {
  WireReader r(b);
  Rule rule;
  absl::string_view match, action;
  uint32_t seen = 0;
  while (!r.done()) {
    int field = 0, type = 0;
    uint64_t v = 0;
    absl::string_view bytes;
    if (!r.Field(&field, &type, &v, &bytes) || field > 5 || (seen & (1u << field))) return false;
    seen |= 1u << field;
    if (field <= 3) {
      if (type != 0) return false;
      if (field == 1) rule.id = v;
      if (field == 2) {
        if (v > 0xffffffffu) return false;
        rule.priority = static_cast<uint32_t>(v);
      }
      if (field == 3) rule.cookie = v;
    } else {
      if (type != 2) return false;
      (field == 4 ? match : action) = bytes;
    }
  }
  if (!ReadMatch(match, &rule.match)) return false;
  WireReader ar(action);  // absent or empty: no member, false (action is required)
  int field = 0, type = 0;
  uint64_t v = 0;
  absl::string_view bytes;
  if (!ar.Field(&field, &type, &v, &bytes) || !ar.done()) return false;
  if (field == 1 && type == 2 && bytes.empty()) {
    rule.action = Action::Drop();
  } else if (field == 2 && type == 0 && v <= kMaxPortNumber) {
    rule.action = Action::Output(static_cast<uint32_t>(v));
  } else {
    return false;
  }
  *out = std::move(rule);
  return true;
}

}  // namespace

bool ReadRuleBatchWire(absl::string_view wire, uint64_t* batch_id, std::vector<RuleOp>* ops) {
  WireReader r(wire);
  uint64_t id = 0;
  bool seen_id = false;
  ops->clear();
  // A structured five-tuple rule is ≈ 50–60 bytes; capped, as the bytes
  // are not checked yet.
  ops->reserve(std::min<size_t>(wire.size() / 48, size_t{1} << 14));
  while (!r.done()) {
    int field = 0, type = 0;
    uint64_t v = 0;
    absl::string_view bytes;
    if (!r.Field(&field, &type, &v, &bytes)) return false;
    if (field == 1 && type == 0 && !seen_id) {
      id = v;
      seen_id = true;
      continue;
    }
    if (field != 2 || type != 2) return false;
    WireReader o(bytes);
    int of = 0, ot = 0;
    uint64_t ov = 0;
    absl::string_view ob;
    if (!o.Field(&of, &ot, &ov, &ob) || !o.done()) return false;  // exactly one member
    RuleOp& op = ops->emplace_back();
    if ((of == 1 || of == 2) && ot == 2) {
      op.kind = of == 1 ? RuleOp::Kind::kInsert : RuleOp::Kind::kReplace;
      if (!ReadRule(ob, &op.rule)) return false;
    } else if (of == 3 && ot == 0 && ov != 0) {
      op.kind = RuleOp::Kind::kDelete;
      op.id = ov;
    } else if (of == 4 && ot == 0) {
      op.kind = RuleOp::Kind::kDeleteByCookie;
      op.cookie = ov;
    } else {
      return false;
    }
  }
  *batch_id = id;
  return true;
}

}  // namespace flowclass
