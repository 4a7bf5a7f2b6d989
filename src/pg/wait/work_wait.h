// claim_work's p_wait (DESIGN §3.4, issue 12): a claim that finds nothing sleeps on its latch
// until a transaction that stored matching work commits, a scheduled row or a lease falls due,
// or its time is up.
//
// With whizbang preloaded, waiting claims register in a shared array (one slot per backend) with
// what they can use; the functions that make work claimable note it per transaction
// (note_work), and the transaction's commit callback wakes only waiters that can use it, no
// more of them than its rows need (core/wait_match.h). An aborted transaction wakes nobody.
// Without the preload there is nobody to wake a sleeper: the wait polls with short sleeps.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "core/uuid.h"
#include "core/wait_match.h"
#include "pg/boundary/bridge.h"

namespace whizbang::pg {

enum class Source;

// _PG_init while preloading: the shared waiter array.
void work_wait_preload_init();

// The ends of transactions and subtransactions: a commit wakes the claims that can use the work
// it made claimable (module.cpp's dispatcher calls these after the lease store's).
void waiters_at_xact(XactEvent event);
void waiters_at_subxact(SubXactEvent event);

// Rows this transaction made claimable: at `due` (at once when due <= now). `key` is the row's
// partition key (stream id, else message id). Woken for at this transaction's commit.
void note_work(Source source, const std::string& consumer, const core::Uuid& key, TimestampTz due, TimestampTz now);

// Every claim of this database that is waiting looks again now, whatever it waits for: work
// reached the tables or leases changed without a commit of this server's (COMMIT PREPARED and
// ROLLBACK PREPARED, module.cpp). Not counted as wake-ups.
void wake_waiters_to_look();

struct WaitCounts {
    int64_t waiting = 0;  // claims sleeping now
    int64_t wakeups = 0;  // waiters woken since the server started
};
WaitCounts wait_counts();

// The calling backend's slot among the waiting claims (work_wait_signal.cpp).
namespace waiters {
bool available();                            // preloaded, and this backend has a slot
void enter(const core::WaitFilter& filter);  // waiting from now on
void rearm();                                // about to look again: not woken, no reminder
void sleeping_until(TimestampTz wake_at);    // wakes by itself then at the latest
TimestampTz woken_or_wake_at();              // 0 when woken for work, else when it must look again
                                             // (kNever when not registered)
void leave();
}  // namespace waiters

// What a claim's wait looks for, besides commits: how long after the call began a row becomes
// claimable by itself (a scheduled row, a lease lapsing) — later than `elapsed_us` — or
// core::kNever. Measured on the claim's clock (p_now plus the time waited), which due times
// and lease expiries were written in.
using NextDue = std::function<int64_t(int64_t elapsed_us)>;

// Calls try_claim(elapsed_us) — which returns how many rows it handed out — until it hands out
// rows, or wrote something (then the caller's transaction holds locks: it returns rather than
// sleep on them), or wait_us has passed (cut short before statement_timeout). Between tries it
// sleeps, registered with `filter`, until woken or next_due. Throws on cancel, with nothing
// registered.
void claim_with_wait(int64_t wait_us, const core::WaitFilter& filter, const std::function<int(int64_t elapsed_us)>& try_claim,
                     const std::function<bool()>& wrote, const NextDue& next_due);

}  // namespace whizbang::pg
