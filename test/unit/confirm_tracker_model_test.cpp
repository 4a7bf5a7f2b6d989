// Model test of the relay's confirm rule (src/core/confirm_tracker.h, DESIGN §3.10): random
// streams of begins, published messages, commits, sink flushes, keepalives and reconnects, run
// through the ConfirmTracker and through a plain reference that keeps the whole history and
// recomputes from scratch after every step which position may be confirmed:
//   the greatest of
//   - the slot's position at the start and at each reconnect (what was confirmed stays so),
//   - the end of a committed transaction when every message of it and of every transaction
//     received before it (since the last reconnect) was published before a flush(),
//   - a keepalive's walEnd when, at that keepalive, no transaction was open and every message
//     received so far was acknowledged.
// The two must agree after every step; a confirmed position never decreases. Two deliberately
// broken trackers (one confirming at commit without waiting for flush(), one confirming a
// keepalive inside an open transaction) must be caught, which shows the model can fail.
// WHIZBANG_CONFIRM_MODEL_SEEDS sets how many streams (default 5000).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "confirm_tracker.h"

namespace whizbang::core::replication {
namespace {

// The reference: the history of one connection (epoch), recomputed on every question.
class Reference {
public:
    explicit Reference(Lsn start) : floor_(start) {}

    void begin() { txs_.push_back(Tx{}); }
    void published() { txs_.back().messages.push_back(false); }
    void commit(Lsn end) {
        txs_.back().end = end;
    }
    void flushed() {
        for (auto& t : txs_) std::fill(t.messages.begin(), t.messages.end(), true);
    }
    void keepalive(Lsn wal_end) {
        const bool open = !txs_.empty() && !txs_.back().end.has_value();
        bool all_acked = true;
        for (const auto& t : txs_)
            for (bool a : t.messages) all_acked = all_acked && a;
        if (!open && all_acked) keepalives_.push_back(wal_end);
    }
    void restart() {
        floor_ = confirmable();
        txs_.clear();
        keepalives_.clear();
    }

    Lsn confirmable() const {
        Lsn best = floor_;
        for (Lsn k : keepalives_) best = std::max(best, k);
        bool prefix_acked = true;
        for (const auto& t : txs_) {
            for (bool a : t.messages) prefix_acked = prefix_acked && a;
            if (!prefix_acked || !t.end.has_value()) break;
            best = std::max(best, *t.end);
        }
        return best;
    }

    bool open() const { return !txs_.empty() && !txs_.back().end.has_value(); }

private:
    struct Tx {
        std::optional<Lsn> end;
        std::vector<bool> messages;  // acknowledged?
    };
    Lsn floor_;
    std::vector<Tx> txs_;
    std::vector<Lsn> keepalives_;
};

// Broken on purpose: confirms a transaction's end at its commit, flushed or not.
class ConfirmAtCommit {
public:
    explicit ConfirmAtCommit(Lsn start) : t_(start) {}
    void begin() { t_.begin(); }
    void published() { t_.published(); }
    void commit(Lsn end) {
        t_.commit(end);
        forced_ = std::max(forced_, end);
    }
    void flushed() { t_.flushed(); }
    void keepalive(Lsn w) { t_.keepalive(w); }
    void restart() { t_.restart(); }
    Lsn confirmable() const { return std::max(t_.confirmable(), forced_); }

private:
    ConfirmTracker t_;
    Lsn forced_ = 0;
};

// Broken on purpose: confirms every keepalive, even inside a transaction or before a flush().
class KeepaliveAlways {
public:
    explicit KeepaliveAlways(Lsn start) : t_(start) {}
    void begin() { t_.begin(); }
    void published() { t_.published(); }
    void commit(Lsn end) { t_.commit(end); }
    void flushed() { t_.flushed(); }
    void keepalive(Lsn w) {
        t_.keepalive(w);
        forced_ = std::max(forced_, w);
    }
    void restart() { t_.restart(); }
    Lsn confirmable() const { return std::max(t_.confirmable(), forced_); }

private:
    ConfirmTracker t_;
    Lsn forced_ = 0;
};

// One random stream; the first disagreement, or nullopt.
template <typename Tracker>
std::optional<std::string> run_stream(unsigned seed) {
    std::mt19937_64 rng(seed);
    auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<unsigned>(n)); };
    const Lsn start = 0x1000 + static_cast<Lsn>(pick(1000));
    Tracker tracker(start);
    Reference ref(start);
    Lsn lsn = start;  // the server's position: every LSN it sends after this is greater
    Lsn last_confirmed = start;
    std::ostringstream trace;
    const int steps = 20 + pick(120);
    for (int step = 0; step < steps; ++step) {
        const int what = pick(100);
        if (!ref.open() && what < 25) {
            tracker.begin(), ref.begin();
            trace << "B ";
        } else if (ref.open() && what < 45) {
            tracker.published(), ref.published();
            trace << "M ";
        } else if (ref.open() && what < 60) {
            lsn += 1 + static_cast<Lsn>(pick(100));
            tracker.commit(lsn), ref.commit(lsn);
            trace << "C" << lsn << ' ';
        } else if (what < 75) {
            tracker.flushed(), ref.flushed();
            trace << "F ";
        } else if (what < 93) {
            lsn += static_cast<Lsn>(pick(50));
            tracker.keepalive(lsn), ref.keepalive(lsn);
            trace << "K" << lsn << ' ';
        } else {
            // A reconnect: the server sends again from the position it last heard, which may
            // be behind what the relay may confirm (the status update had not gone out yet).
            tracker.restart(), ref.restart();
            const Lsn c = ref.confirmable();
            lsn = c - std::min<Lsn>(c - start, static_cast<Lsn>(pick(200)));
            trace << "R" << lsn << ' ';
        }
        const Lsn got = tracker.confirmable(), want = ref.confirmable();
        if (got != want || got < last_confirmed) {
            std::ostringstream why;
            why << "seed " << seed << " step " << step << ": tracker " << got << ", reference " << want
                << ", before " << last_confirmed << "; stream: " << trace.str();
            return why.str();
        }
        last_confirmed = got;
    }
    return std::nullopt;
}

unsigned seeds() {
    const char* s = std::getenv("WHIZBANG_CONFIRM_MODEL_SEEDS");
    return s != nullptr ? static_cast<unsigned>(std::strtoul(s, nullptr, 10)) : 5000u;
}

TEST(ConfirmTrackerModel, AgreesWithTheReferenceOnRandomStreams) {
    for (unsigned seed = 1; seed <= seeds(); ++seed) {
        const auto failure = run_stream<ConfirmTracker>(seed);
        ASSERT_FALSE(failure.has_value()) << *failure;
    }
}

TEST(ConfirmTrackerModel, CatchesATrackerThatConfirmsBeforeFlush) {
    std::optional<std::string> failure;
    for (unsigned seed = 1; seed <= 200 && !failure; ++seed) failure = run_stream<ConfirmAtCommit>(seed);
    EXPECT_TRUE(failure.has_value());
}

TEST(ConfirmTrackerModel, CatchesATrackerThatConfirmsKeepalivesInsideATransaction) {
    std::optional<std::string> failure;
    for (unsigned seed = 1; seed <= 200 && !failure; ++seed) failure = run_stream<KeepaliveAlways>(seed);
    EXPECT_TRUE(failure.has_value());
}

// The rule spelled out on one stream.
TEST(ConfirmTracker, ATransactionIsConfirmedOnlyAfterFlush) {
    ConfirmTracker t(100);
    t.begin();
    t.published();
    t.keepalive(150);  // inside a transaction: not confirmable
    EXPECT_EQ(t.confirmable(), 100u);
    t.commit(200);
    EXPECT_EQ(t.confirmable(), 100u);
    EXPECT_TRUE(t.commit_waiting());
    t.keepalive(250);  // a committed transaction is not acknowledged: not confirmable
    EXPECT_EQ(t.confirmable(), 100u);
    t.flushed();
    EXPECT_EQ(t.confirmable(), 200u);
    EXPECT_FALSE(t.commit_waiting());
    t.keepalive(300);
    EXPECT_EQ(t.confirmable(), 300u);
    t.begin();  // a transaction without relay messages (other prefixes) needs no flush
    t.commit(400);
    EXPECT_EQ(t.confirmable(), 400u);
    t.keepalive(350);  // an older keepalive never moves it back
    EXPECT_EQ(t.confirmable(), 400u);
}

TEST(ConfirmTracker, AnEmptyTransactionWaitsBehindAnUnacknowledgedOne) {
    ConfirmTracker t(0);
    t.begin(), t.published(), t.commit(10);
    t.begin(), t.commit(20);
    EXPECT_EQ(t.confirmable(), 0u);
    t.flushed();
    EXPECT_EQ(t.confirmable(), 20u);
}

TEST(ConfirmTracker, AFlushInsideATransactionConfirmsOnlyWhatCommittedBefore) {
    ConfirmTracker t(0);
    t.begin(), t.published(), t.commit(10);
    t.begin(), t.published();
    t.flushed();
    EXPECT_EQ(t.confirmable(), 10u);
    t.published();
    t.commit(20);
    EXPECT_EQ(t.confirmable(), 10u);  // the message after the flush is unacknowledged
    t.flushed();
    EXPECT_EQ(t.confirmable(), 20u);
}

TEST(ConfirmTracker, ProtocolOrderIsChecked) {
    ConfirmTracker t(0);
    EXPECT_THROW(t.commit(1), ProtocolError);
    EXPECT_THROW(t.published(), ProtocolError);
    t.begin();
    EXPECT_THROW(t.begin(), ProtocolError);
}

TEST(ConfirmTracker, ARestartForgetsTheOpenTransaction) {
    ConfirmTracker t(5);
    t.begin(), t.published();
    t.restart();
    EXPECT_FALSE(t.in_transaction());
    EXPECT_FALSE(t.unacknowledged());
    t.keepalive(9);
    EXPECT_EQ(t.confirmable(), 9u);
}

}  // namespace
}  // namespace whizbang::core::replication
