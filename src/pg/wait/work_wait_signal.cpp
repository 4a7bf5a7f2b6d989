// The shared side of claim_work's p_wait (work_wait.h): the array of waiting claims, and the
// commit callback that wakes those that can use what the transaction made claimable.
//
// One slot per backend (by pgprocno), under one lock: a waiter writes its slot a few times per
// wait, a committing transaction that noted work reads the waiting ones once (a compact list of
// them is kept beside the slots, so a commit does not visit every backend's) and plans its
// wake-ups.
// Nothing under the lock can raise a PostgreSQL error; the commit callback never throws (an
// error after commit cannot be reported) — at worst a waiter sleeps until its own time.
#include <algorithm>
#include <vector>

#include "pg/lease/lease_store.h"
#include "pg/claim/work.h"
#include "pg/wait/work_wait.h"

extern "C" {
#include "miscadmin.h"
#include "port/atomics.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/lwlock.h"
#include "storage/proc.h"
#include "storage/shmem.h"
}

namespace whizbang::pg {
namespace {

constexpr const char* kTranche = "whizbang_wait";

struct Slot {
    bool waiting;
    int listed_at;  // its place in waiting_list() while waiting
    bool woken;  // woken for work, not back from its retry yet
    core::WorkSignal woken_for;  // the work it was woken for (the first, if several)
    Oid database;
    uint64 ticket;
    TimestampTz wake_at;  // when it wakes by itself at the latest
    core::WaitFilter filter;
};

struct Shared {
    pg_atomic_uint32 waiting;
    pg_atomic_uint64 wakeups;
    uint64 next_ticket;  // under the lock
    int nslots;
    int nlisted;  // under the lock: how many entries of waiting_list() are set
    Slot slots[FLEXIBLE_ARRAY_MEMBER];
    // followed by waiting_list(): the slot numbers of the waiting claims, in no order
};

bool active = false;
Shared* shared = nullptr;
LWLock* lock = nullptr;
shmem_request_hook_type prev_request = nullptr;
shmem_startup_hook_type prev_startup = nullptr;

// MaxBackends is known when shared memory is requested (PostgreSQL 15); backends and background
// workers have pgprocno below it.
Size slots_size() { return add_size(offsetof(Shared, slots), mul_size(sizeof(Slot), MaxBackends)); }
Size shared_size() { return add_size(MAXALIGN(slots_size()), mul_size(sizeof(int), MaxBackends)); }

void request_shmem() {
    if (prev_request) prev_request();
    RequestAddinShmemSpace(shared_size());
    RequestNamedLWLockTranche(kTranche, 1);
}

void startup_shmem() {
    if (prev_startup) prev_startup();
    LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
    bool found = false;
    shared = static_cast<Shared*>(ShmemInitStruct("whizbang waiting claims", shared_size(), &found));
    if (!found) {
        memset(static_cast<void*>(shared), 0, shared_size());
        pg_atomic_init_u32(&shared->waiting, 0);
        pg_atomic_init_u64(&shared->wakeups, 0);
        shared->nslots = MaxBackends;
    }
    LWLockRelease(AddinShmemInitLock);
    lock = &GetNamedLWLockTranche(kTranche)->lock;
}

int* waiting_list() { return reinterpret_cast<int*>(reinterpret_cast<char*>(shared) + MAXALIGN(slots_size())); }

Slot* my_slot() {
    if (!active || !shared || !MyProc || compat::my_proc_number() >= shared->nslots) return nullptr;
    return &shared->slots[compat::my_proc_number()];
}

bool registered = false;
int registered_level = 0;  // the subtransaction the waiting call runs in

// ---- what this transaction made claimable ----------------------------------------------------

struct Noted {
    Source source;
    uint64 consumer_hash;
    int level;  // subtransaction nest level
    core::WorkSignal signal;
};
std::vector<Noted> noted;

// Releases an LWLock however the scope ends: planning under the lock allocates, and a
// bad_alloc must not leave the lock held.
class HeldLock {
public:
    HeldLock(LWLock* l, LWLockMode mode) : l_(l) { LWLockAcquire(l_, mode); }
    ~HeldLock() { LWLockRelease(l_); }
    HeldLock(const HeldLock&) = delete;
    HeldLock& operator=(const HeldLock&) = delete;

private:
    LWLock* l_;
};

// Plans and wakes under the lock, so that two committing transactions never plan the same
// waiter for their rows, and a waiter cannot leave between the plan and its wake-up (it leaves
// woken, and passes it on). `counted`: a commit's wake-ups count in claim_wakeups, one passed
// on by a leaving waiter does not.
void wake(const std::vector<Noted>& signals, bool counted = true) {
    std::vector<int> index;
    std::vector<core::WaiterView> views;
    index.reserve(shared->nslots);
    views.reserve(shared->nslots);
    uint64 woken = 0;
    {
        HeldLock held(lock, LW_EXCLUSIVE);
        for (int k = 0; k < shared->nlisted; ++k) {
            const int i = waiting_list()[k];
            const Slot& s = shared->slots[i];
            if (!s.waiting || s.database != MyDatabaseId) continue;
            index.push_back(i);
            views.push_back({s.filter, s.woken, s.ticket, s.wake_at});
        }
        for (const Noted& n : signals) {
            if (views.empty()) break;
            const core::WakePlan plan = core::plan_wakeups(views, n.signal);
            for (std::size_t v : plan.wake) {
                Slot& s = shared->slots[index[v]];
                views[v].woken = s.woken = true;
                s.woken_for = n.signal;
                ++woken;
                SetLatch(&ProcGlobal->allProcs[index[v]].procLatch);
            }
            if (plan.remind >= 0) {
                Slot& s = shared->slots[index[plan.remind]];
                views[plan.remind].wake_at = s.wake_at = std::min(s.wake_at, n.signal.next_due);
                SetLatch(&ProcGlobal->allProcs[index[plan.remind]].procLatch);
            }
        }
    }
    if (woken && counted) pg_atomic_fetch_add_u64(&shared->wakeups, woken);
}

// Merged per source and consumer: one pass over the waiters per committing transaction.
void wake_noted() {
    std::vector<Noted> merged;
    for (const Noted& n : noted) {
        auto same = std::find_if(merged.begin(), merged.end(), [&](const Noted& m) {
            return m.source == n.source && m.consumer_hash == n.consumer_hash;
        });
        if (same == merged.end()) merged.push_back(n);
        else same->signal.merge(n.signal);
    }
    wake(merged);
}

// Takes a waiting slot off the list (under the lock): the last one takes its place.
void unlist(Slot* s) {
    if (!s->waiting) return;
    const int last = waiting_list()[--shared->nlisted];
    waiting_list()[s->listed_at] = last;
    shared->slots[last].listed_at = s->listed_at;
}

// Leaves the slot: at the end of a wait, or when the waiting call errors out (a cancel). A
// waiter woken for work it has not looked for since (woken during its last look, which handed
// out other rows or failed) passes the wake-up on to another waiter that can use that work:
// otherwise the work would wait, with matching waiters asleep, until someone looks anyway.
void leave_slot() {
    Slot* s = my_slot();
    if (!registered || !s) return;
    LWLockAcquire(lock, LW_EXCLUSIVE);
    const bool woken = s->woken;
    const core::WorkSignal woken_for = s->woken_for;
    unlist(s);
    s->waiting = false;
    s->woken = false;
    LWLockRelease(lock);
    pg_atomic_fetch_sub_u32(&shared->waiting, 1);
    registered = false;
    if (!woken || pg_atomic_read_u32(&shared->waiting) == 0) return;
    try {
        Noted pass{woken_for.inbox ? Source::inbox : Source::outbox, woken_for.consumer_hash, 0, woken_for};
        pass.signal.rows_now = 1;
        pass.signal.next_due = core::kNever;
        wake({pass}, false);  // counted when the commit woke the first waiter
    } catch (...) {
        // Nobody woken: the others look again by their own deadline.
    }
}

void on_xact(XactEvent event) {
    try {
        switch (event) {
            case XACT_EVENT_COMMIT:
                if (!noted.empty() && pg_atomic_read_u32(&shared->waiting) > 0) wake_noted();
                noted.clear();
                break;
            case XACT_EVENT_ABORT:
                leave_slot();
                noted.clear();
                break;
            case XACT_EVENT_PREPARE:
                // COMMIT PREPARED runs elsewhere, later: waiters find that work at their next look.
                noted.clear();
                break;
            default:
                break;
        }
    } catch (...) {
        noted.clear();  // nobody woken: waiters look again by their own deadline
    }
}

void on_subxact(SubXactEvent event) {
    // The waiting call's own subtransaction (or an outer one) aborts: a cancel caught by an
    // exception block. One inside a look (a row-security function's) leaves the wait alone.
    if (event == SUBXACT_EVENT_ABORT_SUB && registered && GetCurrentTransactionNestLevel() <= registered_level)
        leave_slot();
    if (noted.empty()) return;
    const int level = GetCurrentTransactionNestLevel();
    if (event == SUBXACT_EVENT_ABORT_SUB)
        noted.erase(std::remove_if(noted.begin(), noted.end(), [level](const Noted& n) { return n.level >= level; }),
                    noted.end());
    else if (event == SUBXACT_EVENT_COMMIT_SUB)
        for (Noted& n : noted)
            if (n.level >= level) n.level = level - 1;
}

void leave_at_exit(int, Datum) { leave_slot(); }

}  // namespace

void work_wait_preload_init() {
    prev_request = shmem_request_hook;
    shmem_request_hook = request_shmem;
    prev_startup = shmem_startup_hook;
    shmem_startup_hook = startup_shmem;
    active = true;
}

void wake_waiters_to_look() {
    if (!active || !shared || pg_atomic_read_u32(&shared->waiting) == 0) return;
    pg_call([] {
        const TimestampTz now = GetCurrentTimestamp();
        LWLockAcquire(lock, LW_EXCLUSIVE);
        // A reminder for now (not a wake-up for work: nothing is passed on when it leaves).
        for (int k = 0; k < shared->nlisted; ++k) {
            const int i = waiting_list()[k];
            Slot& s = shared->slots[i];
            if (!s.waiting || s.database != MyDatabaseId) continue;
            s.wake_at = std::min(s.wake_at, now);
            SetLatch(&ProcGlobal->allProcs[i].procLatch);
        }
        LWLockRelease(lock);
    });
}

void waiters_at_xact(XactEvent event) {
    if (active) on_xact(event);
}

void waiters_at_subxact(SubXactEvent event) {
    if (active) on_subxact(event);
}

void note_work(Source source, const std::string& consumer, const core::Uuid& key, TimestampTz due, TimestampTz now) {
    if (!active) return;
    const uint64 hash = source == Source::inbox ? shm::consumer_hash(consumer) : 0;
    const int level = GetCurrentTransactionNestLevel();
    if (noted.empty() || noted.back().source != source || noted.back().consumer_hash != hash || noted.back().level != level) {
        Noted n{source, hash, level, {}};
        n.signal.inbox = source == Source::inbox;
        n.signal.consumer_hash = hash;
        noted.push_back(n);
    }
    noted.back().signal.add(key, due, now);
}

WaitCounts wait_counts() {
    WaitCounts c;
    if (!active || !shared) return c;
    c.waiting = pg_atomic_read_u32(&shared->waiting);
    c.wakeups = static_cast<int64_t>(pg_atomic_read_u64(&shared->wakeups));
    return c;
}

namespace waiters {

bool available() { return my_slot() != nullptr; }

void enter(const core::WaitFilter& filter) {
    Slot* s = my_slot();
    if (!s || registered) return;
    static bool exit_hook = false;
    pg_call([&] {
        if (!exit_hook) {
            before_shmem_exit(leave_at_exit, 0);
            exit_hook = true;
        }
        LWLockAcquire(lock, LW_EXCLUSIVE);
        s->filter = filter;
        s->database = MyDatabaseId;
        s->ticket = shared->next_ticket++;
        s->woken = false;
        s->wake_at = core::kNever;
        s->waiting = true;
        s->listed_at = shared->nlisted;
        waiting_list()[shared->nlisted++] = compat::my_proc_number();
        LWLockRelease(lock);
        pg_atomic_fetch_add_u32(&shared->waiting, 1);
        registered = true;
        registered_level = GetCurrentTransactionNestLevel();
    });
}

void rearm() {
    Slot* s = my_slot();
    if (!s || !registered) return;
    pg_call([&] {
        LWLockAcquire(lock, LW_EXCLUSIVE);
        s->woken = false;
        s->wake_at = core::kNever;
        LWLockRelease(lock);
    });
}

void sleeping_until(TimestampTz wake_at) {
    Slot* s = my_slot();
    if (!s || !registered) return;
    pg_call([&] {
        LWLockAcquire(lock, LW_EXCLUSIVE);
        // A reminder that came during the look stands if it is earlier.
        s->wake_at = std::min(s->wake_at, wake_at);
        LWLockRelease(lock);
    });
}

TimestampTz woken_or_wake_at() {
    Slot* s = my_slot();
    if (!s || !registered) return core::kNever;
    return pg_call([&] {
        LWLockAcquire(lock, LW_SHARED);
        const TimestampTz at = s->woken ? 0 : s->wake_at;
        LWLockRelease(lock);
        return at;
    });
}

void leave() { leave_slot(); }

}  // namespace waiters
}  // namespace whizbang::pg
