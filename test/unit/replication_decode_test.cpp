// The replication stream and pgoutput decoder (src/core/replication_decode.h): byte layouts as
// PostgreSQL's walsender.c (XLogData, keepalive) and proto.c (protocol version 1) write them.
#include <gtest/gtest.h>

#include <string>

#include "replication_decode.h"

namespace whizbang::core::replication {
namespace {

std::string u64(std::uint64_t v) {
    std::string s;
    for (int shift = 56; shift >= 0; shift -= 8) s += static_cast<char>((v >> shift) & 0xff);
    return s;
}
std::string u32(std::uint32_t v) { return u64(v).substr(4); }

TEST(ReplicationDecode, XLogDataCarriesItsPayload) {
    const std::string bytes = "w" + u64(0x1600000100) + u64(0x1600000200) + u64(12345) + "Bpayload";
    const auto m = decode_copy_data(bytes);  // `bytes` outlives the payload view
    const auto& d = std::get<XLogData>(m);
    EXPECT_EQ(d.data_start, 0x1600000100u);
    EXPECT_EQ(d.wal_end, 0x1600000200u);
    EXPECT_EQ(d.send_time, 12345);
    EXPECT_EQ(d.payload, "Bpayload");
}

TEST(ReplicationDecode, KeepaliveWithAndWithoutReplyRequest) {
    auto k = std::get<Keepalive>(decode_copy_data("k" + u64(0xABCDEF) + u64(7) + std::string(1, '\1')));
    EXPECT_EQ(k.wal_end, 0xABCDEFu);
    EXPECT_TRUE(k.reply_requested);
    k = std::get<Keepalive>(decode_copy_data("k" + u64(1) + u64(7) + std::string(1, '\0')));
    EXPECT_FALSE(k.reply_requested);
}

TEST(ReplicationDecode, TruncatedOrUnknownCopyDataIsAnError) {
    EXPECT_THROW(decode_copy_data(""), ProtocolError);
    EXPECT_THROW(decode_copy_data("w" + u64(1) + u64(2)), ProtocolError);
    EXPECT_THROW(decode_copy_data("k" + u64(1) + u64(2)), ProtocolError);
    EXPECT_THROW(decode_copy_data("k" + u64(1) + u64(2) + std::string(1, '\1') + "x"), ProtocolError);
    EXPECT_THROW(decode_copy_data("k" + u64(1) + u64(2) + std::string(1, '\2')), ProtocolError);
    EXPECT_THROW(decode_copy_data("x123"), ProtocolError);
}

TEST(ReplicationDecode, BeginAndCommit) {
    const auto b = std::get<Begin>(decode_pgoutput("B" + u64(0x500) + u64(99) + u32(731)));
    EXPECT_EQ(b.final_lsn, 0x500u);
    EXPECT_EQ(b.commit_time, 99);
    EXPECT_EQ(b.xid, 731u);
    const auto c = std::get<Commit>(decode_pgoutput("C" + std::string(1, '\0') + u64(0x500) + u64(0x530) + u64(99)));
    EXPECT_EQ(c.commit_lsn, 0x500u);
    EXPECT_EQ(c.end_lsn, 0x530u);
    EXPECT_EQ(c.commit_time, 99);
    EXPECT_THROW(decode_pgoutput("B" + u64(0x500) + u64(99)), ProtocolError);
    EXPECT_THROW(decode_pgoutput("C" + std::string(1, '\0') + u64(0x500) + u64(0x530) + u64(99) + "z"), ProtocolError);
}

TEST(ReplicationDecode, LogicalMessageWithFlagsPrefixAndContent) {
    const std::string full = std::string("{\"a\":1}\n") + '\0' + "x";
    // The views point into the decoded buffer, which must outlive them.
    const std::string bytes = "M" + std::string(1, '\1') + u64(0x777) + "whizbang.outbox" + std::string(1, '\0') +
                              u32(static_cast<std::uint32_t>(full.size())) + full;
    const auto m = std::get<LogicalMessage>(decode_pgoutput(bytes));
    EXPECT_TRUE(m.transactional);
    EXPECT_EQ(m.lsn, 0x777u);
    EXPECT_EQ(m.prefix, "whizbang.outbox");
    EXPECT_EQ(m.content, full);
    const std::string empty = "M" + std::string(1, '\0') + u64(1) + "p" + std::string(1, '\0') + u32(0);
    const auto n = std::get<LogicalMessage>(decode_pgoutput(empty));
    EXPECT_FALSE(n.transactional);
    EXPECT_EQ(n.content, "");
}

TEST(ReplicationDecode, LogicalMessageCutShortIsAnError) {
    // Content shorter than its length, a prefix without its NUL, bytes after the content.
    EXPECT_THROW(decode_pgoutput("M" + std::string(1, '\1') + u64(1) + "p" + std::string(1, '\0') + u32(5) + "abcd"),
                 ProtocolError);
    EXPECT_THROW(decode_pgoutput("M" + std::string(1, '\1') + u64(1) + "prefix"), ProtocolError);
    EXPECT_THROW(decode_pgoutput("M" + std::string(1, '\1') + u64(1) + "p" + std::string(1, '\0') + u32(1) + "ab"),
                 ProtocolError);
}

TEST(ReplicationDecode, RowMessagesAreSkippedStreamingAndTwoPhaseRefused) {
    for (char t : std::string("ORYIUDT")) EXPECT_EQ(std::get<Skipped>(decode_pgoutput(std::string(1, t) + "junk")).type, t);
    for (char t : std::string("SEcA")) {
        try {
            decode_pgoutput(std::string(1, t) + "junk");
            ADD_FAILURE() << t;
        } catch (const ProtocolError& e) {
            EXPECT_NE(std::string(e.what()).find("streaming"), std::string::npos) << e.what();
        }
    }
    for (char t : std::string("bPKrp")) {
        try {
            decode_pgoutput(std::string(1, t) + "junk");
            ADD_FAILURE() << t;
        } catch (const ProtocolError& e) {
            EXPECT_NE(std::string(e.what()).find("two-phase"), std::string::npos) << e.what();
        }
    }
    EXPECT_THROW(decode_pgoutput("Z"), ProtocolError);
    EXPECT_THROW(decode_pgoutput(""), ProtocolError);
}

TEST(ReplicationDecode, StatusUpdateLayout) {
    const std::string s = encode_status_update(0x0000001600000042ull, 5, true);
    ASSERT_EQ(s.size(), 34u);
    EXPECT_EQ(s[0], 'r');
    EXPECT_EQ(s.substr(1, 8), u64(0x1600000042));
    EXPECT_EQ(s.substr(9, 8), u64(0x1600000042));
    EXPECT_EQ(s.substr(17, 8), u64(0x1600000042));
    EXPECT_EQ(s.substr(25, 8), u64(5));
    EXPECT_EQ(s[33], '\1');
    EXPECT_EQ(encode_status_update(1, 5, false)[33], '\0');
}

TEST(ReplicationDecode, LsnText) {
    EXPECT_EQ(format_lsn(0x16B374D848ull), "16/B374D848");
    EXPECT_EQ(format_lsn(0), "0/0");
    Lsn l = 0;
    EXPECT_TRUE(parse_lsn("16/b374d848", l));
    EXPECT_EQ(l, 0x16B374D848ull);
    EXPECT_FALSE(parse_lsn("16", l));
    EXPECT_FALSE(parse_lsn("/1", l));
    EXPECT_FALSE(parse_lsn("1/123456789", l));
    EXPECT_FALSE(parse_lsn("1/x", l));
}

TEST(ReplicationDecode, PostgresEpoch) {
    // 2000-01-01 00:00:00 UTC is 946684800 seconds after the Unix epoch.
    EXPECT_EQ(unix_us_from_postgres(0), 946684800000000LL);
    EXPECT_EQ(postgres_us_from_unix(unix_us_from_postgres(123)), 123);
}

}  // namespace
}  // namespace whizbang::core::replication
