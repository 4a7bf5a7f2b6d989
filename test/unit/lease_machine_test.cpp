// Every transition of the lease state machine (src/core/lease_machine.h), one by one.
#include "lease_machine.h"

#include <gtest/gtest.h>

#include "lease_journal.h"

namespace whizbang::core::lease {
namespace {

const Owner kA{1, 1};
const Owner kB{2, 1};
constexpr std::int64_t kNow = 1000;

Lease lease(std::int64_t token, std::int64_t expiry = kNow + 300, std::uint8_t instance = 1) {
    Lease l;
    l.instance[0] = instance;
    l.token = token;
    l.expiry = expiry;
    l.attempts = 1;
    return l;
}

Fate no_prepared(std::uint32_t) { return Fate::in_progress; }

// A slot holding a committed lease with `token`.
Slot held_by(std::int64_t token, std::int64_t expiry = kNow + 300) {
    Slot s;
    s.committed = State::of(lease(token, expiry));
    return s;
}

TEST(LeaseMachine, TakeOfAFreeRowIsPendingUntilCommit) {
    Slot s;
    Lease old;
    State before;
    EXPECT_EQ(take(s, kA, lease(10), kNow, &old, &before), Take::taken);
    EXPECT_FALSE(before.present);
    EXPECT_TRUE(held(s, kB, kNow));                      // busy for the others
    EXPECT_EQ(visible(s, kA).lease.token, 10);           // the taker sees its lease
    EXPECT_FALSE(s.committed.present);
    commit(s);
    EXPECT_FALSE(s.owned);
    EXPECT_EQ(s.committed.lease.token, 10);
}

TEST(LeaseMachine, AbortedTakeLeavesTheRowFree) {
    Slot s;
    Lease old;
    State before;
    ASSERT_EQ(take(s, kA, lease(10), kNow, &old, &before), Take::taken);
    abort(s);
    EXPECT_TRUE(s.empty());
    EXPECT_FALSE(held(s, kB, kNow));
}

TEST(LeaseMachine, LiveLeaseIsHeldLapsedLeaseIsOffered) {
    Slot s = held_by(10);
    Lease old;
    State before;
    EXPECT_EQ(take(s, kB, lease(11), kNow, &old, &before), Take::held);
    s.committed.lease.expiry = kNow;
    EXPECT_EQ(take(s, kB, lease(11), kNow, &old, &before), Take::lapsed);
    EXPECT_EQ(old.token, 10);
    EXPECT_FALSE(s.owned);  // a lapsed lease is only taken over with take_over()
}

TEST(LeaseMachine, TakeOverNeedsTheLapsedLeaseWithItsToken) {
    Slot s = held_by(10, kNow);
    State before;
    EXPECT_FALSE(take_over(s, kB, 9, lease(11), kNow, &before));
    EXPECT_TRUE(take_over(s, kB, 10, lease(11), kNow, &before));
    EXPECT_EQ(before.lease.token, 10);
    abort(s);  // the old holder has it again
    EXPECT_EQ(s.committed.lease.token, 10);
    Slot live = held_by(10);
    EXPECT_FALSE(take_over(live, kB, 10, lease(11), kNow, &before));
}

TEST(LeaseMachine, EndIsPendingAndRestoredOnAbort) {
    Slot s = held_by(10);
    const std::int64_t token = 10;
    State was, before;
    EXPECT_EQ(end(s, kA, &token, &was, &before), Ended::ended);
    EXPECT_EQ(was.lease.token, 10);
    EXPECT_TRUE(held(s, kB, kNow + 1000));  // no claim takes a row whose end is pending
    Lease old;
    EXPECT_EQ(take(s, kB, lease(11), kNow + 1000, &old, &before), Take::held);
    abort(s);
    EXPECT_EQ(s.committed.lease.token, 10);
    EXPECT_EQ(end(s, kA, &token, &was, &before), Ended::ended);
    commit(s);
    EXPECT_TRUE(s.empty());
}

TEST(LeaseMachine, EndChecksTheToken) {
    Slot s = held_by(10);
    const std::int64_t wrong = 9, none = kNoLease;
    State was, before;
    EXPECT_EQ(end(s, kA, &wrong, &was, &before), Ended::mismatch);
    EXPECT_EQ(end(s, kA, &none, &was, &before), Ended::mismatch);
    EXPECT_FALSE(s.owned);
    EXPECT_EQ(end(s, kA, nullptr, &was, &before), Ended::ended);  // unfenced: whatever it holds
    EXPECT_EQ(end(s, kB, nullptr, &was, &before), Ended::mismatch);  // busy
}

TEST(LeaseMachine, EndOfARowWithoutLeaseKeepsItFromClaims) {
    Slot s;
    const std::int64_t none = kNoLease, token = 10;
    State was, before;
    EXPECT_EQ(end(s, kA, &token, &was, &before), Ended::untouched);
    EXPECT_FALSE(s.owned);
    EXPECT_EQ(end(s, kA, &none, &was, &before), Ended::ended);
    EXPECT_FALSE(was.present);
    EXPECT_TRUE(held(s, kB, kNow));
    commit(s);
    EXPECT_TRUE(s.empty());
}

TEST(LeaseMachine, ReleaseAndReclaimInOneTransactionRollsBackToTheOldLease) {
    Slot s = held_by(10);
    const std::int64_t token = 10;
    State was, before;
    ASSERT_EQ(end(s, kA, &token, &was, &before), Ended::ended);  // release
    Lease old;
    ASSERT_EQ(take(s, kA, lease(20), kNow, &old, &before), Take::taken);  // re-claim
    EXPECT_FALSE(before.present);
    EXPECT_EQ(visible(s, kA).lease.token, 20);
    EXPECT_EQ(take(s, kB, lease(21), kNow + 1000, &old, &before), Take::held);
    abort(s);
    EXPECT_EQ(s.committed.lease.token, 10);  // A's lease, as before
    EXPECT_TRUE(held(s, kB, kNow));
}

TEST(LeaseMachine, PreparedEndIsSettledByTheFateOfItsXid) {
    for (Fate fate : {Fate::committed, Fate::aborted}) {
        Slot s = held_by(10);
        const std::int64_t token = 10;
        State was, before;
        ASSERT_EQ(end(s, kA, &token, &was, &before), Ended::ended);
        prepare(s, 777);
        // Neither the preparing backend's next transaction nor anybody else may take it.
        const Owner next_of_a{1, 2};
        Lease old;
        EXPECT_FALSE(settle(s, no_prepared));
        EXPECT_EQ(take(s, next_of_a, lease(11), kNow + 1000, &old, &before), Take::held);
        EXPECT_EQ(take(s, kB, lease(11), kNow + 1000, &old, &before), Take::held);
        EXPECT_TRUE(held(settled(s, no_prepared), kB, kNow + 1000));
        EXPECT_TRUE(settle(s, [&](std::uint32_t xid) { return xid == 777 ? fate : Fate::in_progress; }));
        if (fate == Fate::committed) {
            EXPECT_TRUE(s.empty());
        } else {
            EXPECT_EQ(s.committed.lease.token, 10);
            EXPECT_FALSE(s.owned);
        }
    }
}

TEST(LeaseMachine, RenewalIsNotUndoneButNeedsTheCurrentLease) {
    Slot s = held_by(10);
    EXPECT_FALSE(renew(s, kA, 9, kNow + 900));
    EXPECT_TRUE(renew(s, kA, 10, kNow + 900));
    EXPECT_EQ(s.committed.lease.expiry, kNow + 900);
    const std::int64_t token = 10;
    State was, before;
    ASSERT_EQ(end(s, kB, &token, &was, &before), Ended::ended);
    EXPECT_FALSE(renew(s, kA, 10, kNow + 1200));  // busy: being completed by B
    EXPECT_FALSE(extend_live(s, kA, 10, lease(10).instance, kNow, kNow + 1200));
}

TEST(LeaseMachine, ExtendLiveNeedsALiveLeaseOfTheInstance) {
    Slot s = held_by(10);
    Uuid other{};
    other[0] = 9;
    EXPECT_FALSE(extend_live(s, kA, 10, other, kNow, kNow + 900));
    EXPECT_FALSE(extend_live(s, kA, 10, lease(10).instance, kNow + 300, kNow + 900));
    EXPECT_TRUE(extend_live(s, kA, 10, lease(10).instance, kNow, kNow + 900));
}

TEST(LeaseMachine, RetokenAndDeliveryTouchOnlyTheOwnersTake) {
    Slot s;
    Lease old;
    State before;
    ASSERT_EQ(take(s, kA, lease(-3), kNow, &old, &before), Take::taken);
    retoken(s, kB, -3, 50);
    EXPECT_EQ(s.current.lease.token, -3);
    retoken(s, kA, -3, 50);
    EXPECT_EQ(s.current.lease.token, 50);
    set_delivery(s, 50, 4, kNow + 60);
    EXPECT_EQ(s.current.lease.attempts, 4);
    EXPECT_EQ(s.current.lease.expiry, kNow + 60);
}

TEST(LeaseMachine, MayVoidRefusesARowBeingEndedElsewhere) {
    Slot s = held_by(10);
    bool carries = false;
    EXPECT_TRUE(may_void(s, kB, 10, &carries));
    EXPECT_TRUE(carries);
    const std::int64_t token = 10;
    State was, before;
    ASSERT_EQ(end(s, kA, &token, &was, &before), Ended::ended);
    EXPECT_FALSE(may_void(s, kB, 10, &carries));
    EXPECT_TRUE(may_void(s, kB, 11, &carries));
    EXPECT_FALSE(carries);
}

using TestJournal = Journal<int>;

// A change of slot `key` at `level`, journalled as the store does it.
void journalled_take(TestJournal& j, Slot& s, int key, int level, std::int64_t token) {
    j.ready();
    Lease old;
    State before;
    const bool first = !s.owned;
    ASSERT_EQ(take(s, kA, lease(token), kNow, &old, &before), Take::taken);
    j.noted(key, 0, level, before, first);
}
void journalled_end(TestJournal& j, Slot& s, int key, int level) {
    j.ready();
    State was, before;
    const bool first = !s.owned;
    ASSERT_EQ(end(s, kA, nullptr, &was, &before), Ended::ended);
    j.noted(key, 0, level, before, first);
}

TEST(LeaseJournal, SubtransactionAbortRestoresItsLevelOnly) {
    TestJournal j;
    Slot s = held_by(10);
    journalled_end(j, s, 1, 1);           // release at top level
    journalled_take(j, s, 1, 2, 20);      // re-claim in a savepoint
    j.abort_sub(2, [&](int, std::uint32_t, const State& saved, bool release) { restore(s, saved, release); });
    EXPECT_TRUE(s.owned);
    EXPECT_FALSE(s.current.present);      // released, as before the savepoint
    j.finish([&](int, std::uint32_t) { abort(s); });
    EXPECT_EQ(s.committed.lease.token, 10);
    EXPECT_TRUE(j.empty());
}

TEST(LeaseJournal, SubtransactionCommitHandsItsEntriesToTheLevelAround) {
    TestJournal j;
    Slot s;
    journalled_take(j, s, 1, 2, 20);
    j.commit_sub(2);
    journalled_end(j, s, 1, 1);
    journalled_take(j, s, 1, 3, 30);
    j.commit_sub(3);
    j.commit_sub(2);
    j.abort_sub(2, [&](int, std::uint32_t, const State&, bool) { FAIL() << "nothing left at level 2"; });
    j.abort_sub(1, [&](int, std::uint32_t, const State& saved, bool release) { restore(s, saved, release); });
    EXPECT_FALSE(s.owned);
    EXPECT_TRUE(s.empty());
}

TEST(LeaseJournal, UndoTakePutsBackTheStateBeforeTheTake) {
    TestJournal j;
    Slot s;
    journalled_take(j, s, 1, 1, 20);
    j.ready();
    EXPECT_FALSE(j.undo_take(1, 0, s, kA, 21, 1));  // another token: not this take
    EXPECT_TRUE(j.undo_take(1, 0, s, kA, 20, 1));
    EXPECT_FALSE(s.current.present);
    Slot t = held_by(10);
    journalled_end(j, t, 2, 1);
    journalled_take(j, t, 2, 1, 30);
    j.ready();
    EXPECT_TRUE(j.undo_take(2, 0, t, kA, 30, 1));
    EXPECT_TRUE(t.owned);
    EXPECT_FALSE(t.current.present);  // still released by this transaction
    j.finish([&](int key, std::uint32_t) { abort(key == 1 ? s : t); });
    EXPECT_TRUE(s.empty());
    EXPECT_EQ(t.committed.lease.token, 10);
}

}  // namespace
}  // namespace whizbang::core::lease
