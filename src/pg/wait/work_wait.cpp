// claim_work's wait (work_wait.h): look, sleep until woken or something falls due, look again.
#include <algorithm>

#include "pg/wait/work_wait.h"

#include "pg/citus/distributed.h"

extern "C" {
#include "access/xact.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "storage/latch.h"
#include "storage/proc.h"
#include "utils/timestamp.h"
}

namespace whizbang::pg {
namespace {

// With the preload a waiter is woken by commits and knows when rows fall due; it still looks
// again this often, for work that reached the tables without a wake-up (COMMIT PREPARED).
constexpr int64_t kRecheckUs = 30 * USECS_PER_SEC;
// Without the preload nobody wakes a waiter: it polls, first soon, then every 100 ms.
constexpr long kFirstPollMs = 5, kMaxPollMs = 100;
// A wait ends this long before statement_timeout would cancel the statement.
constexpr int64_t kTimeoutMarginUs = 50 * 1000;

TimestampTz add_saturated(TimestampTz t, int64_t us) {
    TimestampTz out = 0;
    return __builtin_add_overflow(t, us, &out) ? PG_INT64_MAX : out;
}

// When the wait must end: after wait_us, and before statement_timeout cancels the statement.
TimestampTz deadline_of(TimestampTz start, int64_t wait_us) {
    TimestampTz deadline = add_saturated(start, wait_us);
    if (StatementTimeout > 0) {
        const int64_t timeout_us = static_cast<int64_t>(StatementTimeout) * 1000;
        const TimestampTz cancel_at = add_saturated(GetCurrentStatementStartTimestamp(), timeout_us);
        deadline = std::min(deadline, cancel_at - std::min(kTimeoutMarginUs, timeout_us / 10));
    }
    return deadline;
}

// Leaves the waiters' array however the wait ends (a cancel arrives as a C++ exception here;
// the abort callback would also clear the slot).
struct Registration {
    explicit Registration(const core::WaitFilter* filter) {
        if (filter) waiters::enter(*filter);
    }
    ~Registration() { waiters::leave(); }
};

}  // namespace

void claim_with_wait(int64_t wait_us, const core::WaitFilter& filter, const std::function<int(int64_t elapsed_us)>& try_claim,
                     const std::function<bool()>& wrote, const NextDue& next_due) {
    const TimestampTz start = GetCurrentTimestamp();
    const TimestampTz deadline = deadline_of(start, wait_us);
    // A distributed install stores its work on the workers: no commit here wakes the waiter.
    const bool woken_by_commits = waiters::available() && !distributed();
    // Registered before the first look, so that a commit between that look and the sleep wakes it.
    Registration registration(woken_by_commits ? &filter : nullptr);
    long poll_ms = kFirstPollMs;
    for (TimestampTz now = start;;) {
        waiters::rearm();
        const int64_t look_us = now - start;
        if (try_claim(look_us) > 0 || wrote()) return;
        now = GetCurrentTimestamp();
        if (now >= deadline) return;
        bool deadline_only = true;  // nothing but the deadline ends this sleep
        TimestampTz wake_at = deadline;
        if (woken_by_commits) {
            // What falls due after the look's time, not after now: a row that fell due between
            // the two was not handed out and must not be taken for one due already.
            const int64_t due_us = next_due(look_us);
            if (due_us != core::kNever) wake_at = std::min(wake_at, std::max(add_saturated(start, due_us), now + 1000));
            wake_at = std::min(wake_at, add_saturated(now, kRecheckUs));
            deadline_only = wake_at == deadline;
            waiters::sleeping_until(wake_at);
        } else {
            wake_at = std::min(wake_at, add_saturated(now, poll_ms * 1000));
            poll_ms = std::min(poll_ms * 2, kMaxPollMs);
        }
        // Sleeps until woken for work or its time. The woken mark is read before each sleep, not
        // only the latch: a lock wait inside the look may have reset the latch a wake-up set. A
        // latch set for anything else (a cache-invalidation catch-up, a reminder of a later
        // time) does not cost a look.
        for (;;) {
            if (woken_by_commits) {
                const TimestampTz told = waiters::woken_or_wake_at();
                if (told <= now) {
                    deadline_only = false;
                    break;
                }
                if (told < wake_at) deadline_only = false;
                wake_at = std::min(wake_at, told);
            }
            const long ms = static_cast<long>((wake_at - now + 999) / 1000);
            pg_call([ms] {
                (void)WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH, ms, PG_WAIT_EXTENSION);
                ResetLatch(MyLatch);
                CHECK_FOR_INTERRUPTS();
            });
            now = GetCurrentTimestamp();
            if (!woken_by_commits || now >= wake_at) break;
        }
        // Not woken, nothing fell due: the time is up without another look (a commit would have
        // woken it; the caller's next call looks first anyway).
        if (woken_by_commits && deadline_only && now >= deadline && waiters::woken_or_wake_at() != 0) return;
    }
}

}  // namespace whizbang::pg
