#include "emitted_message.h"

#include <gtest/gtest.h>

namespace whizbang::core {
namespace {

TEST(EmittedMessage, UtcTimestampText) {
    EXPECT_EQ(utc_timestamp_text(0), "1970-01-01T00:00:00.000000+00:00");
    // 2026-12-07 10:00:00.123456 UTC
    EXPECT_EQ(utc_timestamp_text(1796637600123456LL), "2026-12-07T10:00:00.123456+00:00");
    // leap day and the microsecond before midnight
    EXPECT_EQ(utc_timestamp_text(951868799999999LL), "2000-02-29T23:59:59.999999+00:00");
    // before 1970: the remainder is carried into the previous day
    EXPECT_EQ(utc_timestamp_text(-1), "1969-12-31T23:59:59.999999+00:00");
    EXPECT_EQ(utc_timestamp_text(-62135596800000000LL), "0001-01-01T00:00:00.000000+00:00");
}

TEST(EmittedMessage, JsonStringEscapes) {
    std::string out;
    append_json_string(out, "a\"b\\c\n\t\x01\x1f\x7f é");
    EXPECT_EQ(out, "\"a\\\"b\\\\c\\n\\t\\u0001\\u001f\x7f é\"");
}

TEST(EmittedMessage, FieldsInFixedOrder) {
    EmittedMessage m;
    m.id = *parse_uuid("0190f0b0-0000-7000-8000-000000000001");
    m.destination = "orders";
    m.message_type = "Order\"Created";
    m.envelope_json = R"({"amount": 42})";
    m.created_at_unix_us = 0;
    std::string out;
    append_emitted_json(out, m);
    EXPECT_EQ(out,
              R"({"MessageId":"0190f0b0-0000-7000-8000-000000000001","Destination":"orders",)"
              R"("MessageType":"Order\"Created","StreamId":null,"IsEvent":false,"Scope":null,"Metadata":null,)"
              R"("Envelope":{"amount": 42},"CreatedAt":"1970-01-01T00:00:00.000000+00:00"})");

    m.stream_id = *parse_uuid("0190f0b0-0000-7000-8000-00000000000a");
    m.is_event = true;
    std::string scope = R"({"tenant": "t1"})", meta = "[1, 2]";
    m.scope_json = scope;
    m.metadata_json = meta;
    out.clear();
    append_emitted_json(out, m);
    EXPECT_NE(out.find(R"("StreamId":"0190f0b0-0000-7000-8000-00000000000a","IsEvent":true,)"
                       R"("Scope":{"tenant": "t1"},"Metadata":[1, 2],)"),
              std::string::npos)
        << out;
}

}  // namespace
}  // namespace whizbang::core
