// packet_parser.h — raw Ethernet frame bytes -> FlowKey (the first step of
// every packet's path; see ARCHITECTURE.md "The path of a packet").
//
// Contract
// --------
// Threads: every function here is a pure function of its arguments.  Any
// thread may call any of them at any time; there is no state, so nothing to
// reclaim.
//
// Hot path: ParsePacket / ParseBurst run once per packet on the PMD thread.
// They allocate nothing, take no lock, log nothing and throw nothing, and they
// never read a byte at or past `len` (frames may end exactly at the end of a
// mapping; the prefix test runs under ASan and tests/fuzz runs libFuzzer).
//
// What is parsed (field encodings: flow.h):
//   Ethernet   eth_dst, eth_src, then up to two tags (TPID 0x8100 or 0x88a8,
//              in either position): vlan0_tci = outer, vlan1_tci = inner, both
//              stored with kVlanPresent set (the wire DEI bit is folded into
//              it).  eth_type = the type after the tags.  A third tag is left
//              unparsed: eth_type = its TPID and parsing stops.
//   IPv4       (eth_type 0x0800) src, dst, proto, tos, ttl, nw_frag from the
//              MF flag and offset (first fragment kFragAny, later ones
//              kFragAny|kFragLater); options skipped using IHL; L4 is parsed
//              only when the datagram is not a later fragment.
//   IPv6       (eth_type 0x86dd) src, dst, traffic class -> nw_tos, hop limit
//              -> nw_ttl.  Extension headers hop-by-hop (0), routing (43),
//              destination options (60) [(len+1)*8 bytes], AH (51)
//              [(len+2)*4 bytes] and fragment (44) [8 bytes] are skipped;
//              nw_proto = the next-header value where the walk stopped (the
//              upper-layer protocol).  Fragments as in OVS: a fragment header
//              with offset 0 and M=0 (atomic, RFC 6946) is no fragment; M=1
//              at offset 0 sets kFragAny and the walk goes on; a non-zero
//              offset sets kFragAny|kFragLater, stops the walk and reports
//              nw_proto 44 (the payload is no header of this fragment).
//   L4         TCP (ports, tcp_flags = low 12 bits of the offset/flags word),
//              UDP, SCTP (ports), ICMP under IPv4 and ICMPv6 under IPv6
//              (type -> tp_src, code -> tp_dst).  Nothing else.
//   ARP        eth fields and eth_type only.
//
// Header units and minimum sizes (what "parsed so far" means): Ethernet
// addresses 12 bytes, each type field 2, each tag 4 (TPID+TCI), IPv4 20,
// IPv6 40, each IPv6 extension header its full length (fragment 8), TCP 20,
// UDP 8, SCTP 12, ICMP 8, ICMPv6 4.  A unit contributes its fields only when
// all of its bytes are present and valid.  eth_type always holds the last
// type/TPID value read, so a frame cut inside the tags has eth_type = TPID.
//
// Frame length: no minimum.  A frame under Ethernet's 60 bytes (a runt on a
// wire, which a physical NIC drops before any PMD sees it; but what net_tap
// and virtio ports deliver for an unpadded ARP or small datagram) is parsed
// like any other: its complete headers are classified, and one cut short is
// flagged kKeyTruncated as below.
//
// The end of an IP datagram is its IPv4 total length / IPv6 40 + payload
// length: Ethernet padding after it is never parsed as a header.  A datagram
// (or an IPv4 header, by IHL) that claims more bytes than the frame holds
// contributes no L3 field at all and is flagged truncated, as OVS's sanity
// checks do: fields a forged length vouches for are not matched.  An IPv6
// payload length of 0 (jumbogram) leaves no room for extension or L4 headers.
//
// Outcome flags (FlowKey::flags):
//   kKeyTruncated  the frame or datagram ended inside a header; the key has
//                  every unit completed before it, except that the IP layer
//                  is all or nothing (above).  Within a whole datagram, IPv6
//                  extension headers cut short keep only the addresses (no
//                  class, hop limit or protocol), and a TCP header whose data
//                  offset runs past the datagram gives no ports or flags (as
//                  OVS).
//   kKeyMalformed  IPv4 version != 4, IHL < 5 or total length < header
//                  length; IPv6 version != 6; TCP data offset < 5.  The bad
//                  unit contributes nothing; everything before it is kept.
//
// Every key returned is finalized (hash valid, absent words are zero), so a
// parsed key equals FlowKey::FromFlow(ParsePacketToFlow(...), flags) bit for
// bit.  ParsePacket and ParseBurst first try a straight-line path for the
// common frame (untagged IPv4 without options, not a fragment, complete TCP
// or UDP header, non-zero MAC and IP words) and fall back to the general
// parser for anything else; ParsePacketToFlow always takes the general one,
// which is how the tests hold the two paths to the same answer.
// packet_parser_benchmark: ~7 ns per TCP/UDP IPv4 frame, ~14-17 ns for IPv6
// and tagged mixes (tests/bench/README.md).
#ifndef FLOWCLASS_DATAPLANE_FLOW_PACKET_PARSER_H_
#define FLOWCLASS_DATAPLANE_FLOW_PACKET_PARSER_H_

#include <cstddef>
#include <cstdint>

#include "dataplane/flow/flow.h"

namespace flowclass {

// Parses one frame of `len` bytes received on `in_port`.
FlowKey ParsePacket(const uint8_t* frame, size_t len, uint32_t in_port);

// Parses frames[i] (lens[i] bytes) into keys[i] for i in [0, n), 0 <= n <=
// kMaxBurst; all frames arrived on `in_port`.  keys[n..] are not written.
// Same result as n ParsePacket calls; prefetches the next frames while
// parsing the current one.  Returns how many keys carry flags (truncated or
// malformed frames): the PMD counts them as parse errors.
int ParseBurst(const uint8_t* const* frames, const uint16_t* lens, int n,
               uint32_t in_port, FlowKey* keys, HashPrefetch prefetch = {});

// The dense form of ParsePacket, for tests and control-plane tools.  Stores
// the outcome flags in *flags when `flags` is non-null.
Flow ParsePacketToFlow(const uint8_t* frame, size_t len, uint32_t in_port,
                       uint8_t* flags = nullptr);

}  // namespace flowclass

#endif  // FLOWCLASS_DATAPLANE_FLOW_PACKET_PARSER_H_
