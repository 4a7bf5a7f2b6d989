// Reading an emitted outbox message's routing fields (src/core/outbox_fields.h).
#include <gtest/gtest.h>

#include <string>

#include "error.h"
#include "outbox_fields.h"

namespace whizbang::core {
namespace {

const std::string kMessage =
    R"({"MessageId":"0190A1B2-C3D4-7E5F-8A9B-000000000001","Destination":"orders","MessageType":"OrderPlaced",)"
    R"("StreamId":"0190a1b2-c3d4-7e5f-8a9b-0000000000aa","IsEvent":true,"Scope":{"tenant":"t1"},)"
    R"("Metadata":null,"Envelope":{"items":[1,2.5,-3e2,{"x":"y\"z"}],"note":"caf\u00e9 \ud83d\ude00"},)"
    R"("CreatedAt":"2026-12-07T10:00:00.123456+00:00"})";

InputError::Kind kind_of(const std::string& json) {
    try {
        read_outbox_fields(json);
    } catch (const InputError& e) {
        return e.kind();
    }
    ADD_FAILURE() << "accepted: " << json;
    return InputError::Kind::out_of_range;
}

TEST(OutboxFields, ReadsTheRoutingFields) {
    const auto f = read_outbox_fields(kMessage);
    EXPECT_EQ(f.message_id, "0190a1b2-c3d4-7e5f-8a9b-000000000001");  // canonical lowercase
    EXPECT_EQ(f.destination, "orders");
    EXPECT_EQ(f.message_type, "OrderPlaced");
    EXPECT_EQ(f.stream_id, "0190a1b2-c3d4-7e5f-8a9b-0000000000aa");
}

TEST(OutboxFields, StreamIdNullOrAbsentIsEmpty) {
    auto f = read_outbox_fields(R"({"MessageId":"0190a1b2-c3d4-7e5f-8a9b-000000000001","Destination":"d","MessageType":"t","StreamId":null})");
    EXPECT_EQ(f.stream_id, "");
    f = read_outbox_fields(R"( { "Destination" : "d" , "MessageType":"t", "MessageId":"0190a1b2c3d47e5f8a9b000000000001" } )");
    EXPECT_EQ(f.stream_id, "");
    EXPECT_EQ(f.message_id, "0190a1b2-c3d4-7e5f-8a9b-000000000001");
}

TEST(OutboxFields, DecodesEscapesInFields) {
    const auto f = read_outbox_fields(
        R"({"MessageId":"0190a1b2-c3d4-7e5f-8a9b-000000000001","Destination":"a\/b\u00e9\n","MessageType":"\ud83d\ude00","StreamId":null})");
    EXPECT_EQ(f.destination, "a/b\xc3\xa9\n");
    EXPECT_EQ(f.message_type, "\xf0\x9f\x98\x80");
}

TEST(OutboxFields, NestedMembersOfTheSameNameDoNotCount) {
    const auto f = read_outbox_fields(
        R"({"Envelope":{"MessageId":"not-a-uuid","Destination":1},"MessageId":"0190a1b2-c3d4-7e5f-8a9b-000000000001","Destination":"d","MessageType":"t"})");
    EXPECT_EQ(f.destination, "d");
}

TEST(OutboxFields, TheLastOfRepeatedMembersWins) {
    const auto f = read_outbox_fields(
        R"({"MessageId":"0190a1b2-c3d4-7e5f-8a9b-000000000001","Destination":"first","MessageType":"t","Destination":"last"})");
    EXPECT_EQ(f.destination, "last");
}

TEST(OutboxFields, MissingOrMistypedFieldsAreRefused) {
    using K = InputError::Kind;
    EXPECT_EQ(kind_of(R"({"Destination":"d","MessageType":"t"})"), K::invalid_parameter);
    EXPECT_EQ(kind_of(R"({"MessageId":"x","Destination":"d","MessageType":"t"})"), K::invalid_parameter);
    EXPECT_EQ(kind_of(R"({"MessageId":"0190a1b2-c3d4-7e5f-8a9b-000000000001","MessageType":"t"})"), K::invalid_parameter);
    EXPECT_EQ(kind_of(R"({"MessageId":"0190a1b2-c3d4-7e5f-8a9b-000000000001","Destination":7,"MessageType":"t"})"), K::invalid_parameter);
    EXPECT_EQ(kind_of(R"({"MessageId":"0190a1b2-c3d4-7e5f-8a9b-000000000001","Destination":"d"})"), K::invalid_parameter);
    EXPECT_EQ(kind_of(R"({"MessageId":"0190a1b2-c3d4-7e5f-8a9b-000000000001","Destination":"d","MessageType":"t","StreamId":1})"),
              K::invalid_parameter);
    EXPECT_EQ(kind_of(R"({"MessageId":"0190a1b2-c3d4-7e5f-8a9b-000000000001","Destination":"d","MessageType":"t","StreamId":"s"})"),
              K::invalid_parameter);
}

TEST(OutboxFields, MalformedJsonIsRefused) {
    using K = InputError::Kind;
    for (const char* bad : {"", "[]", "\"x\"", "{", "{\"a\":}", "{\"a\":1,}", "{\"a\" 1}", "{\"a\":01}", "{\"a\":1.}",
                            "{\"a\":-}", "{\"a\":1e}", "{\"a\":tru}", "{\"a\":\"\\x\"}", "{\"a\":\"\\ud800\"}",
                            "{\"a\":\"\\udc00\"}", "{\"a\":\"\\u12\"}", "{\"a\":\"\\u0000\"}", "{\"a\":\"x}",
                            "{\"a\":\"\x01\"}", "{\"a\":[1,2}", "{} x", "{\"a\":\"\xc3\"}", "{\"a\":\"\xc0\xaf\"}",
                            "{\"a\":\"\xed\xa0\x80\"}", "{\"a\":\"\xff\"}"})
        EXPECT_EQ(kind_of(bad), K::invalid_json) << bad;
}

TEST(OutboxFields, DeepNestingIsALimitNotACrash) {
    std::string deep = "{\"a\":";
    for (int i = 0; i < 20000; ++i) deep += '[';
    EXPECT_EQ(kind_of(deep), InputError::Kind::limit_exceeded);
}

TEST(OutboxFields, SingleLineTurnsLineBreaksIntoSpaces) {
    EXPECT_EQ(single_line("{\n\"a\":\r\n1}"), "{ \"a\":  1}");
    EXPECT_EQ(single_line(kMessage), kMessage);
}

}  // namespace
}  // namespace whizbang::core
