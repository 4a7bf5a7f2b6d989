#include "replication_decode.h"

#include <cstdio>

namespace whizbang::core::replication {
namespace {

// Network-order reader over one message. Every read checks the length, so a truncated message
// is a ProtocolError naming what was missing, never a read past the buffer.
class Reader {
public:
    Reader(std::string_view bytes, const char* what) : bytes_(bytes), what_(what) {}

    std::uint64_t u64(const char* field) { return take(8, field); }
    std::int64_t i64(const char* field) { return static_cast<std::int64_t>(take(8, field)); }
    std::uint32_t u32(const char* field) { return static_cast<std::uint32_t>(take(4, field)); }
    std::uint8_t u8(const char* field) { return static_cast<std::uint8_t>(take(1, field)); }

    // A NUL-terminated string (pq_sendstring).
    std::string_view cstring(const char* field) {
        const auto end = bytes_.find('\0', pos_);
        if (end == std::string_view::npos) fail(field, "is not NUL-terminated");
        std::string_view s = bytes_.substr(pos_, end - pos_);
        pos_ = end + 1;
        return s;
    }

    std::string_view bytes(std::size_t n, const char* field) {
        if (bytes_.size() - pos_ < n) fail(field, "is cut short");
        std::string_view s = bytes_.substr(pos_, n);
        pos_ += n;
        return s;
    }

    std::string_view rest() {
        std::string_view s = bytes_.substr(pos_);
        pos_ = bytes_.size();
        return s;
    }

    // Trailing bytes mean a layout the relay does not know (another protocol version).
    void end() {
        if (pos_ != bytes_.size())
            throw ProtocolError(std::string(what_) + " has " + std::to_string(bytes_.size() - pos_) +
                                " unexpected trailing bytes");
    }

private:
    std::uint64_t take(std::size_t n, const char* field) {
        if (bytes_.size() - pos_ < n) fail(field, "is cut short");
        std::uint64_t v = 0;
        for (std::size_t i = 0; i < n; ++i) v = (v << 8) | static_cast<std::uint8_t>(bytes_[pos_ + i]);
        pos_ += n;
        return v;
    }

    [[noreturn]] void fail(const char* field, const char* problem) {
        throw ProtocolError(std::string(what_) + ": field " + field + " " + problem + " (" +
                            std::to_string(bytes_.size()) + " bytes)");
    }

    std::string_view bytes_;
    const char* what_;
    std::size_t pos_ = 0;
};

std::string describe_type(char type) {
    char buf[16];
    if (type >= 0x20 && type < 0x7f)
        std::snprintf(buf, sizeof buf, "'%c'", type);
    else
        std::snprintf(buf, sizeof buf, "0x%02x", static_cast<unsigned>(static_cast<unsigned char>(type)));
    return buf;
}

void put_u64(std::string& out, std::uint64_t v) {
    for (int shift = 56; shift >= 0; shift -= 8) out += static_cast<char>((v >> shift) & 0xff);
}

}  // namespace

std::string format_lsn(Lsn lsn) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%X/%X", static_cast<unsigned>(lsn >> 32), static_cast<unsigned>(lsn & 0xffffffffu));
    return buf;
}

bool parse_lsn(std::string_view text, Lsn& out) {
    const auto slash = text.find('/');
    if (slash == std::string_view::npos) return false;
    auto hex = [](std::string_view part, std::uint64_t& v) {
        if (part.empty() || part.size() > 8) return false;
        v = 0;
        for (char c : part) {
            int d;
            if (c >= '0' && c <= '9') d = c - '0';
            else if (c >= 'a' && c <= 'f') d = c - 'a' + 10;
            else if (c >= 'A' && c <= 'F') d = c - 'A' + 10;
            else return false;
            v = (v << 4) | static_cast<std::uint64_t>(d);
        }
        return true;
    };
    std::uint64_t hi, lo;
    if (!hex(text.substr(0, slash), hi) || !hex(text.substr(slash + 1), lo)) return false;
    out = (hi << 32) | lo;
    return true;
}

CopyMessage decode_copy_data(std::string_view bytes) {
    if (bytes.empty()) throw ProtocolError("empty CopyData message");
    const char type = bytes[0];
    if (type == 'w') {
        Reader r(bytes.substr(1), "XLogData");
        XLogData d;
        d.data_start = r.u64("dataStart");
        d.wal_end = r.u64("walEnd");
        d.send_time = r.i64("sendTime");
        d.payload = r.rest();
        return d;
    }
    if (type == 'k') {
        Reader r(bytes.substr(1), "primary keepalive");
        Keepalive k;
        k.wal_end = r.u64("walEnd");
        k.send_time = r.i64("sendTime");
        const auto reply = r.u8("replyRequested");
        if (reply > 1) throw ProtocolError("primary keepalive: replyRequested is " + std::to_string(reply));
        k.reply_requested = reply == 1;
        r.end();
        return k;
    }
    throw ProtocolError("unknown CopyData message type " + describe_type(type));
}

PgOutputMessage decode_pgoutput(std::string_view payload) {
    if (payload.empty()) throw ProtocolError("empty pgoutput message");
    const char type = payload[0];
    const std::string_view body = payload.substr(1);
    switch (type) {
        case 'B': {
            Reader r(body, "pgoutput Begin");
            Begin b;
            b.final_lsn = r.u64("final_lsn");
            b.commit_time = r.i64("commit_time");
            b.xid = r.u32("xid");
            r.end();
            return b;
        }
        case 'C': {
            Reader r(body, "pgoutput Commit");
            Commit c;
            c.flags = r.u8("flags");
            c.commit_lsn = r.u64("commit_lsn");
            c.end_lsn = r.u64("end_lsn");
            c.commit_time = r.i64("commit_time");
            r.end();
            return c;
        }
        case 'M': {
            // Protocol version 1 without streaming: no xid before the flags.
            Reader r(body, "pgoutput Message");
            LogicalMessage m;
            const auto flags = r.u8("flags");
            m.transactional = (flags & 1) != 0;
            m.lsn = r.u64("lsn");
            m.prefix = r.cstring("prefix");
            const auto length = r.u32("length");
            m.content = r.bytes(length, "content");
            r.end();
            return m;
        }
        // Origin, relation, type, insert, update, delete, truncate: the publication is empty,
        // and none of them carries anything the relay publishes.
        case 'O':
        case 'R':
        case 'Y':
        case 'I':
        case 'U':
        case 'D':
        case 'T':
            return Skipped{type};
        // Stream start/stop/commit/abort: sent only when streaming was asked for.
        case 'S':
        case 'E':
        case 'c':
        case 'A':
            throw ProtocolError("pgoutput sent a streaming message (" + describe_type(type) +
                                ") although the relay did not ask for streaming");
        // Begin prepare, prepare, commit/rollback prepared, stream prepare: two_phase decoding.
        case 'b':
        case 'P':
        case 'K':
        case 'r':
        case 'p':
            throw ProtocolError("pgoutput sent a two-phase message (" + describe_type(type) +
                                "); the relay refuses two_phase slots, whose messages come before COMMIT PREPARED");
        default:
            throw ProtocolError("unknown pgoutput message type " + describe_type(type));
    }
}

std::string encode_status_update(Lsn lsn, std::int64_t now_pg_us, bool reply_requested) {
    std::string out;
    out.reserve(34);
    out += 'r';
    put_u64(out, lsn);  // written
    put_u64(out, lsn);  // flushed: what the slot may confirm
    put_u64(out, lsn);  // applied
    put_u64(out, static_cast<std::uint64_t>(now_pg_us));
    out += static_cast<char>(reply_requested ? 1 : 0);
    return out;
}

}  // namespace whizbang::core::replication
