// ack_reader.h — test helpers for ApplyRules streams: read the next
// ApplyRulesResponse and give its BatchAck.
#ifndef FLOWCLASS_TESTS_COMMON_ACK_READER_H_
#define FLOWCLASS_TESTS_COMMON_ACK_READER_H_

#include <utility>

#include "flowclass/v1/flowclass.pb.h"

namespace flowclass {

// stream->Read of one ApplyRulesResponse into *ack; false when the stream
// has no more.
template <typename Stream>
bool ReadAck(Stream* stream, v1::BatchAck* ack) {
  v1::ApplyRulesResponse resp;
  if (!stream->Read(&resp)) return false;
  *ack = std::move(*resp.mutable_ack());
  return true;
}

}  // namespace flowclass

#endif  // FLOWCLASS_TESTS_COMMON_ACK_READER_H_
