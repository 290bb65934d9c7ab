// A foreign client: tests/node/client.js (Node, @grpc/grpc-js +
// @grpc/proto-loader loading the .proto at run time) against a real gRPC
// server on 127.0.0.1 over a FakeDataplane.  Needs node and the packages
// tests/node/setup.sh installs into the build dir; skipped (with the command
// to run) when they are missing.
#include <filesystem>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/api/grpc_server.h"
#include "server/testing/fake_dataplane.h"
#include "tests/common/e2e_util.h"

namespace flowclass {
namespace {

using ::testing::HasSubstr;

TEST(GrpcNodeTest, NodeClientStreamsBatchesAndReadsStats) {
  const std::string modules = std::string(FLOWCLASS_BINARY_DIR) + "/node-client/node_modules";
  if (RunCommand("node --version").code != 0)
    GTEST_FAIL() << "node is not installed (make test installs it)";
  if (!std::filesystem::exists(modules + "/@grpc/grpc-js"))
    GTEST_FAIL() << "run tests/node/setup.sh " << FLOWCLASS_BINARY_DIR << " first";

  FakeDataplane fake;
  DataplaneStats s;
  PmdCounters p;
  p.rx_packets = 42;
  s.pmds.push_back(p);
  fake.SetStats(s);
  GrpcServerConfig cfg;
  cfg.plaintext = true;
  cfg.port = 0;
  auto server = StartGrpcServer(&fake, cfg);
  ASSERT_TRUE(server.ok()) << server.status();

  const std::string src = FLOWCLASS_SOURCE_DIR;
  const CmdResult r = RunCommand(absl::StrCat("NODE_PATH=", modules, " timeout 60 node ", src,
                                        "/tests/node/client.js ", (*server)->target(), " ",
                                        src, "/proto ", FLOWCLASS_GOOGLEAPIS_PROTO_DIR, " 2>&1"));
  ASSERT_EQ(r.code, 0) << r.out;
  // Batches 1..5 applied (generations 1..5), 6 rejected naming op 1 and
  // ipv4_src with the generation unchanged, 7 deleted the 250 even ids.
  for (int b = 1; b <= 5; ++b)
    EXPECT_THAT(r.out, HasSubstr(absl::StrCat("{\"batch_id\":\"", b,
                                              "\",\"status_code\":0,\"generation\":\"", b,
                                              "\",\"inserted\":100,\"deleted\":0")));
  // The ack's google.rpc.Status, decoded by protobufjs: BadRequest's path
  // and ErrorInfo's op_index, field and reason.
  EXPECT_THAT(r.out, HasSubstr("{\"batch_id\":\"6\",\"status_code\":3,\"generation\":\"5\","
                               "\"inserted\":0,\"deleted\":0,\"error_index\":\"1\","
                               "\"error_field\":\"ipv4_src\","
                               "\"error_path\":\"ops[1].insert.match.ipv4_src\","
                               "\"error_reason\":\"INVALID_RULE\"}"));
  // A failed call's google.rpc.Status, from grpc-status-details-bin.
  EXPECT_THAT(r.out, HasSubstr("\"bad_token\":{\"code\":3,\"status_code\":3,"
                               "\"path\":\"page_token\"}"));
  EXPECT_THAT(r.out, HasSubstr("{\"batch_id\":\"7\",\"status_code\":0,\"generation\":\"6\","
                               "\"inserted\":0,\"deleted\":250"));
  EXPECT_THAT(r.out, HasSubstr("\"stats\":{\"rules\":\"250\",\"generation\":\"6\",\"pmds\":1,"
                               "\"total_packets\":\"42\"}"));
  EXPECT_THAT(r.out, HasSubstr("\"listed_cookie1\":250"));
  EXPECT_THAT(r.out, HasSubstr("\"rule7\":{\"ipv4_src\":\"10.7.0.0/16\",\"tp_dst_hi\":2007,"
                               "\"output_port\":2}"));
  EXPECT_THAT(r.out, HasSubstr("\"missing_code\":5"));  // NOT_FOUND
  // A message that is not an ApplyRulesRequest (truncated; a string that is not
  // UTF-8) between two good batches: the first is acked, the stream ends
  // with INVALID_ARGUMENT naming message 2, the third is not applied.
  EXPECT_THAT(r.out, HasSubstr("\"raw\":[{\"acks\":[\"101\"],\"code\":3,\"message2\":true,"
                               "\"later\":5},{\"acks\":[\"101\"],\"code\":3,\"message2\":true,"
                               "\"later\":5}]"));
  // And the dataplane agrees (after the raw streams: two generations each,
  // batch 101 and the delete of its rule).
  EXPECT_EQ(fake.generation(), 10u);
  EXPECT_EQ(fake.ListRules().size(), 250u);
  for (const Rule& rule : fake.ListRules()) EXPECT_EQ(rule.id % 2, 1u);
}

}  // namespace
}  // namespace flowclass
