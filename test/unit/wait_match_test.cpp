#include "wait_match.h"

#include <gtest/gtest.h>

#include "partition.h"

namespace whizbang::core {
namespace {

Uuid id(std::uint8_t n) {
    Uuid u{};
    u[15] = n;
    u[0] = 0x42;
    return u;
}

WorkSignal inbox_rows(std::uint64_t consumer, int rows, std::int64_t now = 100) {
    WorkSignal s;
    s.inbox = true;
    s.consumer_hash = consumer;
    for (int i = 0; i < rows; ++i) s.add(id(static_cast<std::uint8_t>(i)), now, now);
    return s;
}

WaiterView waiter(std::uint64_t ticket, int max_rows = 1) {
    WaiterView w;
    w.ticket = ticket;
    w.filter.max_rows = max_rows;
    return w;
}

TEST(WaitMatch, OneRowWakesOneWaiterTheOldest) {
    std::vector<WaiterView> ws;
    for (int i = 0; i < 50; ++i) ws.push_back(waiter(100 - i));
    WakePlan p = plan_wakeups(ws, inbox_rows(7, 1));
    ASSERT_EQ(p.wake.size(), 1u);
    EXPECT_EQ(p.wake[0], 49u);  // ticket 51: the longest waiting
    EXPECT_EQ(p.remind, -1);
}

TEST(WaitMatch, RowsAreSharedOutByMaxRows) {
    std::vector<WaiterView> ws = {waiter(1, 10), waiter(2, 10), waiter(3, 10), waiter(4, 10)};
    EXPECT_EQ(plan_wakeups(ws, inbox_rows(7, 25)).wake.size(), 3u);
    EXPECT_EQ(plan_wakeups(ws, inbox_rows(7, 10)).wake.size(), 1u);
    EXPECT_EQ(plan_wakeups(ws, inbox_rows(7, 0)).wake.size(), 0u);
}

TEST(WaitMatch, AWokenWaiterIsNotCountedOn) {
    std::vector<WaiterView> ws = {waiter(1), waiter(2)};
    ws[0].woken = true;
    WakePlan p = plan_wakeups(ws, inbox_rows(7, 1));
    ASSERT_EQ(p.wake.size(), 1u);
    EXPECT_EQ(p.wake[0], 1u);
}

TEST(WaitMatch, ConsumerAndSourceMustMatch) {
    WaiterView a = waiter(1);
    a.filter.any_consumer = false;
    a.filter.consumer_hash = 1;
    WaiterView outbox_only = waiter(2);
    outbox_only.filter.inbox = false;
    std::vector<WaiterView> ws = {a, outbox_only};
    EXPECT_TRUE(plan_wakeups(ws, inbox_rows(2, 5)).wake.empty());
    WakePlan p = plan_wakeups(ws, inbox_rows(1, 5));
    ASSERT_EQ(p.wake.size(), 1u);
    EXPECT_EQ(p.wake[0], 0u);

    WorkSignal outbox = inbox_rows(0, 1);
    outbox.inbox = false;
    EXPECT_EQ(match(a.filter, outbox), Match::yes);  // p_consumer selects inbox rows only
    ws[0].filter.outbox = false;                      // a waits for the inbox only
    p = plan_wakeups(ws, outbox);
    ASSERT_EQ(p.wake.size(), 1u);
    EXPECT_EQ(p.wake[0], 1u);
}

TEST(WaitMatch, PartitionsDecideAndSureMatchesComeFirst) {
    const int count = 16;
    WorkSignal s = inbox_rows(7, 1);
    const int p = partition_of(s.keys[0], count);
    WaiterView other = waiter(1), mine = waiter(2), many = waiter(0);
    other.filter.partition_count = mine.filter.partition_count = many.filter.partition_count = count;
    other.filter.npartitions = mine.filter.npartitions = 1;
    other.filter.partitions[0] = (p + 1) % count;
    mine.filter.partitions[0] = p;
    many.filter.npartitions = kWaitMaxPartitions + 1;
    std::vector<WaiterView> ws = {other, mine, many};
    EXPECT_EQ(match(other.filter, s), Match::no);
    EXPECT_EQ(match(mine.filter, s), Match::yes);
    EXPECT_EQ(match(many.filter, s), Match::maybe);
    WakePlan plan = plan_wakeups(ws, s);
    ASSERT_EQ(plan.wake.size(), 1u);
    EXPECT_EQ(plan.wake[0], 1u);  // the sure match, though the "maybe" waits longer
}

TEST(WaitMatch, TooManyKeysMayMatchAnyPartition) {
    WorkSignal s = inbox_rows(7, kWaitMaxKeys + 5);
    EXPECT_EQ(s.rows_now, kWaitMaxKeys + 5);
    EXPECT_EQ(s.nkeys, kWaitMaxKeys + 1);
    WaiterView w = waiter(1);
    w.filter.partition_count = 4;
    w.filter.npartitions = 1;
    EXPECT_EQ(match(w.filter, s), Match::maybe);
}

TEST(WaitMatch, KeysAreKeptOnce) {
    WorkSignal s;
    s.add(id(1), 0, 0);
    s.add(id(1), 0, 0);
    EXPECT_EQ(s.rows_now, 2);
    EXPECT_EQ(s.nkeys, 1);
    WorkSignal t;
    t.add(id(1), 0, 0);
    t.add(id(2), 0, 0);
    s.merge(t);
    EXPECT_EQ(s.rows_now, 4);
    EXPECT_EQ(s.nkeys, 2);
}

TEST(WaitMatch, LaterRowsRemindOneWaiterUnlessOneWakesInTime) {
    WorkSignal s;
    s.add(id(1), 500, 100);  // due at 500
    EXPECT_EQ(s.rows_now, 0);
    EXPECT_EQ(s.next_due, 500);
    std::vector<WaiterView> ws = {waiter(2), waiter(1)};
    ws[0].wake_at = ws[1].wake_at = 900;
    WakePlan p = plan_wakeups(ws, s);
    EXPECT_TRUE(p.wake.empty());
    EXPECT_EQ(p.remind, 1);  // the longest waiting
    ws[0].wake_at = 400;     // wakes before the row is due, and looks again then
    EXPECT_EQ(plan_wakeups(ws, s).remind, -1);
}

TEST(WaitMatch, EachRowsPartitionGetsAWaiterThatCanTakeIt) {
    const int count = 16;
    WorkSignal s = inbox_rows(7, 2);  // two rows, in two partitions
    const int p0 = partition_of(s.keys[0], count), p1 = partition_of(s.keys[1], count);
    ASSERT_NE(p0, p1);
    WaiterView first = waiter(1, 100), second = waiter(2, 100);
    first.filter.partition_count = second.filter.partition_count = count;
    first.filter.npartitions = second.filter.npartitions = 1;
    first.filter.partitions[0] = p0;
    second.filter.partitions[0] = p1;
    WakePlan p = plan_wakeups({first, second}, s);
    ASSERT_EQ(p.wake.size(), 2u);  // first's p_max_rows would cover both rows, but not row 2's partition
    EXPECT_EQ(p.wake[0], 0u);
    EXPECT_EQ(p.wake[1], 1u);
    // Waiters without partitions take every row: no extra wake-up.
    EXPECT_EQ(plan_wakeups({waiter(1, 100), waiter(2, 100)}, s).wake.size(), 1u);
}

TEST(WaitMatch, ARowDueLaterIsRememberedByAWaiterNotWokenNow) {
    WorkSignal s;
    s.add(id(1), 100, 100);  // claimable now
    s.add(id(2), 500, 100);  // due at 500
    std::vector<WaiterView> ws = {waiter(1), waiter(2)};
    ws[0].wake_at = ws[1].wake_at = 900;
    WakePlan p = plan_wakeups(ws, s);
    ASSERT_EQ(p.wake.size(), 1u);
    EXPECT_EQ(p.wake[0], 0u);
    EXPECT_EQ(p.remind, 1);  // the woken one may take row 1 and return
}

}  // namespace
}  // namespace whizbang::core
