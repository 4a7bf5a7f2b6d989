// Decoding of what whizbang-relay reads from a logical replication connection (DESIGN §3.10):
// the replication protocol's CopyData messages (XLogData 'w', primary keepalive 'k') and, inside
// XLogData, pgoutput's protocol version 1 messages. Only what the relay acts on is decoded:
// Begin, Commit and logical decoding messages. Row changes and their metadata (relation, type,
// origin, insert, update, delete, truncate) come only for tables of the publication, which is
// empty; they are recognised and skipped. Streaming and two-phase messages are an error: the
// relay never asks for either, so seeing one means the stream is not what the relay believes.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <variant>

#include "no_postgres.h"

namespace whizbang::core::replication {

using Lsn = std::uint64_t;

// Malformed or unexpected protocol input. The relay drops the connection and stops: it cannot
// tell which position it is safe to confirm.
class ProtocolError : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

// "16/B374D848": PostgreSQL's text form of an LSN.
std::string format_lsn(Lsn lsn);
// The reverse of format_lsn (hex digits case-insensitive); false for anything else.
bool parse_lsn(std::string_view text, Lsn& out);

struct XLogData {
    Lsn data_start = 0;
    Lsn wal_end = 0;
    std::int64_t send_time = 0;  // microseconds since 2000-01-01 (PostgreSQL's epoch)
    std::string_view payload;    // one pgoutput message; points into the decoded buffer
};

struct Keepalive {
    Lsn wal_end = 0;
    std::int64_t send_time = 0;
    bool reply_requested = false;
};

using CopyMessage = std::variant<XLogData, Keepalive>;

// One CopyData message of START_REPLICATION's COPY BOTH stream. Throws ProtocolError.
CopyMessage decode_copy_data(std::string_view bytes);

struct Begin {
    Lsn final_lsn = 0;            // the transaction's commit LSN
    std::int64_t commit_time = 0;  // microseconds since 2000-01-01
    std::uint32_t xid = 0;
};

struct Commit {
    std::uint8_t flags = 0;
    Lsn commit_lsn = 0;
    Lsn end_lsn = 0;  // end of the commit record: the position to confirm for this transaction
    std::int64_t commit_time = 0;
};

// pg_logical_emit_message's message: `transactional` is flag bit 0.
struct LogicalMessage {
    bool transactional = false;
    Lsn lsn = 0;
    std::string_view prefix;
    std::string_view content;
};

// A message the relay has no use for (its type byte).
struct Skipped {
    char type = 0;
};

using PgOutputMessage = std::variant<Begin, Commit, LogicalMessage, Skipped>;

// One pgoutput (protocol version 1, no streaming) message. Throws ProtocolError.
PgOutputMessage decode_pgoutput(std::string_view payload);

// PostgreSQL timestamps (microseconds since 2000-01-01) to and from the Unix epoch.
constexpr std::int64_t kPostgresEpochUnixUs = 946684800LL * 1000000LL;
inline std::int64_t unix_us_from_postgres(std::int64_t pg_us) { return pg_us + kPostgresEpochUnixUs; }
inline std::int64_t postgres_us_from_unix(std::int64_t unix_us) { return unix_us - kPostgresEpochUnixUs; }

// The standby status update ('r') that reports `lsn` as written, flushed and applied.
std::string encode_status_update(Lsn lsn, std::int64_t now_pg_us, bool reply_requested);

}  // namespace whizbang::core::replication
