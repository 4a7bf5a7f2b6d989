// Which position whizbang-relay may confirm to its replication slot (DESIGN §3.10). Confirming
// LSN L tells the server never to send again a transaction that committed at or before L, so
// L may pass a transaction only once the sink acknowledged every message of it and of every
// transaction before it. The relay publishes messages as they arrive and calls the sink's
// flush() at a time of its choosing (after a commit when nothing more is waiting); flush()
// acknowledges everything published so far.
//
// A keepalive's walEnd may be confirmed only when no transaction is open and nothing published
// is unacknowledged: then every transaction that committed before walEnd has been received and
// acknowledged. Confirming it lets the slot move on while the database writes nothing for the
// relay (else the slot would hold back WAL of unrelated transactions).
#pragma once

#include <cstdint>

#include "no_postgres.h"
#include "replication_decode.h"

namespace whizbang::core::replication {

class ConfirmTracker {
public:
    // `start`: the slot's confirmed_flush_lsn when the relay began.
    explicit ConfirmTracker(Lsn start) : confirmable_(start), committed_end_(start) {}

    // Begin of a transaction. Throws ProtocolError when one is open already (without streaming
    // pgoutput sends one transaction after the other).
    void begin();
    // One message published to the sink inside the open transaction (ProtocolError without one).
    void published();
    // Commit of the open transaction at `end_lsn` (ProtocolError without one).
    void commit(Lsn end_lsn);
    // The sink's flush() returned: every message published so far is acknowledged.
    void flushed();
    // A primary keepalive reporting the server's position (walEnd).
    void keepalive(Lsn wal_end);
    // After a reconnect: the server sends again everything after the confirmed position, so
    // what was open or unacknowledged is forgotten (the sink may see it twice).
    void restart();

    // The highest position that may be confirmed now; never decreases.
    Lsn confirmable() const { return confirmable_; }
    // Messages were published and not yet acknowledged.
    bool unacknowledged() const { return unacknowledged_ != 0; }
    bool in_transaction() const { return open_; }
    // A committed transaction waits for flush() before its end may be confirmed.
    bool commit_waiting() const { return committed_end_ > confirmable_; }

private:
    void advance(Lsn lsn) {
        if (lsn > confirmable_) confirmable_ = lsn;
    }

    Lsn confirmable_;
    Lsn committed_end_;  // end of the last committed transaction received
    std::uint64_t unacknowledged_ = 0;  // messages published since the last flush()
    bool open_ = false;
};

}  // namespace whizbang::core::replication
