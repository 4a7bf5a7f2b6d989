// Fuzz target: the relay's decoder of the replication stream (src/core/replication_decode.h).
// Any bytes either decode or throw ProtocolError: no crash, no read past the message, no other
// exception. A decoded pgoutput Begin, Commit or logical message encodes back to the very bytes
// it came from (nothing skipped or misread). The input is tried as a CopyData message (and its
// XLogData payload as pgoutput) and as a pgoutput message of its own.
#include <string>
#include <variant>

#include "fuzz_check.h"
#include "replication_decode.h"

namespace {

namespace rep = whizbang::core::replication;

std::string u64(std::uint64_t v) {
    std::string s;
    for (int shift = 56; shift >= 0; shift -= 8) s += static_cast<char>((v >> shift) & 0xff);
    return s;
}
std::string u32(std::uint32_t v) { return u64(v).substr(4); }

// The bytes PostgreSQL's proto.c writes for `m` (protocol version 1, no streaming).
std::string encode(const rep::PgOutputMessage& m) {
    if (const auto* b = std::get_if<rep::Begin>(&m))
        return "B" + u64(b->final_lsn) + u64(static_cast<std::uint64_t>(b->commit_time)) + u32(b->xid);
    if (const auto* c = std::get_if<rep::Commit>(&m))
        return "C" + std::string(1, static_cast<char>(c->flags)) + u64(c->commit_lsn) + u64(c->end_lsn) +
               u64(static_cast<std::uint64_t>(c->commit_time));
    return "";
}

void pgoutput(std::string_view payload) {
    try {
        const auto m = rep::decode_pgoutput(payload);
        if (std::holds_alternative<rep::Begin>(m) || std::holds_alternative<rep::Commit>(m))
            FUZZ_CHECK(encode(m) == payload, "Begin and Commit encode back to their bytes");
        if (const auto* l = std::get_if<rep::LogicalMessage>(&m)) {
            FUZZ_CHECK(l->prefix.find('\0') == std::string_view::npos, "a prefix ends at its NUL");
            FUZZ_CHECK(payload.size() == 1 + 1 + 8 + l->prefix.size() + 1 + 4 + l->content.size(),
                       "a logical message is exactly its fields");
            FUZZ_CHECK(l->transactional == ((payload[1] & 1) != 0), "transactional is flag bit 0");
        }
        if (const auto* s = std::get_if<rep::Skipped>(&m))
            FUZZ_CHECK(std::string("ORYIUDT").find(s->type) != std::string::npos, "only row messages are skipped");
    } catch (const rep::ProtocolError&) {
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::string_view bytes = whizbang::fuzz::as_text(data, size);
    try {
        const auto m = rep::decode_copy_data(bytes);
        if (const auto* x = std::get_if<rep::XLogData>(&m)) {
            FUZZ_CHECK(x->payload.size() + 25 == bytes.size(), "XLogData's payload is the rest of the message");
            pgoutput(x->payload);
        } else {
            FUZZ_CHECK(bytes.size() == 18, "a keepalive is 18 bytes");
        }
    } catch (const rep::ProtocolError&) {
    }
    pgoutput(bytes);
    return 0;
}
