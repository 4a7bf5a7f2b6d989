// The relay's libpq connection to the slot's database in logical replication mode
// (replication=database): the slot's checks in SQL, START_REPLICATION with pgoutput, and the
// COPY BOTH stream (DESIGN §3.10).
#pragma once

#include <libpq-fe.h>

#include <stdexcept>
#include <string>

#include "core/replication_decode.h"

namespace whizbang::relay {

using core::replication::Lsn;

// The connection failed or was lost; the relay connects again after a pause.
class ConnectionLost : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

struct SlotState {
    Lsn confirmed_flush = 0;
    std::string wal_status;  // reserved, extended, unreserved (about to be lost) or lost
};

class ReplicationConnection {
public:
    // Connects with `conninfo` (empty: libpq's PG* environment) plus replication=database.
    // Throws ConnectionLost.
    explicit ReplicationConnection(const std::string& conninfo);
    ~ReplicationConnection();
    ReplicationConnection(const ReplicationConnection&) = delete;
    ReplicationConnection& operator=(const ReplicationConnection&) = delete;

    // Checks through SQL that the slot exists in this database, is logical with pgoutput, is not
    // two_phase and was not invalidated, and that the publication exists. Throws Fatal
    // (kExitSlotUnusable, kExitSlotLost) or ConnectionLost.
    SlotState check_slot(const std::string& slot, const std::string& publication);

    // START_REPLICATION SLOT … LOGICAL 0/0 with pgoutput protocol version 1 and messages; the
    // server starts after the slot's confirmed position. Throws ConnectionLost (also for
    // a slot another process is using: that one may be a relay of ours that is ending).
    void start(const std::string& slot, const std::string& publication);

    // The next CopyData message into `out`: 1 got one, 0 nothing buffered now (wait for the
    // socket), throws ConnectionLost when the stream or the connection ended.
    int read(std::string& out);
    // Waits up to `timeout_ms` for the socket to become readable and takes in what came.
    // Returns early on a signal. Throws ConnectionLost.
    void wait(int timeout_ms);
    // Sends a standby status update reporting `lsn` as written, flushed and applied.
    void send_status(Lsn lsn, bool reply_requested);

    int server_version() const { return PQserverVersion(conn_); }

private:
    [[noreturn]] void lost(const std::string& what);
    std::string literal(const std::string& s);
    std::string identifier(const std::string& s);

    PGconn* conn_ = nullptr;
};

}  // namespace whizbang::relay
