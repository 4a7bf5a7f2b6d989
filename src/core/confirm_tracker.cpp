#include "confirm_tracker.h"

namespace whizbang::core::replication {

void ConfirmTracker::begin() {
    if (open_) throw ProtocolError("Begin inside an open transaction (the relay did not ask for streaming)");
    open_ = true;
}

void ConfirmTracker::published() {
    if (!open_) throw ProtocolError("a transactional message outside Begin and Commit");
    ++unacknowledged_;
}

void ConfirmTracker::commit(Lsn end_lsn) {
    if (!open_) throw ProtocolError("Commit without Begin");
    open_ = false;
    if (end_lsn > committed_end_) committed_end_ = end_lsn;
    // Nothing unacknowledged: neither this transaction nor one before it waits for the sink.
    if (unacknowledged_ == 0) advance(committed_end_);
}

void ConfirmTracker::flushed() {
    unacknowledged_ = 0;
    // Every transaction committed so far is acknowledged in full. An open one is not: its end
    // is not known yet and comes with its commit.
    advance(committed_end_);
}

void ConfirmTracker::keepalive(Lsn wal_end) {
    if (open_ || unacknowledged_ != 0) return;
    advance(wal_end);
    if (committed_end_ < confirmable_) committed_end_ = confirmable_;
}

void ConfirmTracker::restart() {
    open_ = false;
    unacknowledged_ = 0;
    committed_end_ = confirmable_;
}

}  // namespace whizbang::core::replication
