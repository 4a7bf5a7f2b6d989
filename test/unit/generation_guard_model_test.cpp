// Model test of the dedup key's uniqueness across generations (src/core/generation_guard.h,
// DESIGN §3.6): thousands of random interleavings of transactions that record a few keys (in
// sorted order, one speculative-insertion token per transaction, as dedup_store.cpp inserts),
// each key into a generation of its own choosing, run step by step as the server runs the
// protocol — looks with a dirty snapshot, speculative records, a unique index per generation,
// waits on a token or on a transaction — with commits, aborts and rollbacks to a savepoint at any
// point, PREPARE TRANSACTION with a later COMMIT PREPARED or ROLLBACK PREPARED, a server crash
// (every transaction not prepared aborts at once; prepared ones survive it), and maintenance
// moving the oldest generation's records forward and dropping it (only when no store
// transaction is open or prepared: it needs the table's ACCESS EXCLUSIVE lock, which waits for
// every store's ROW EXCLUSIVE). After every step:
//   - at most one committed record per key, in all generations together (never two deliveries
//     of one id both new);
//   - a key reported duplicate had a committed record when it was reported;
// and every interleaving ends: no transaction waits for ever (no cycle of waits), no livelock.
// WHIZBANG_GENERATION_MODEL_SEEDS sets how many interleavings (default 20000).
#include <algorithm>
#include <cstdlib>
#include <optional>
#include <random>
#include <sstream>
#include <vector>

#include <gtest/gtest.h>

#include "generation_guard.h"

namespace whizbang::core::generations {
namespace {

constexpr int kMaxSteps = 20000;

struct Record {
    int txn;  // -1: committed
    int key;
    int generation;
    bool speculative;
    int token_epoch;  // the inserter's token when it inserted
};

// Each look and what follows it are separate steps, as on a server: another transaction may
// insert, complete or withdraw between a look and the action it decided.
enum class Phase { look, act_on_look, check_others, act_on_check, done, prepared, ended };

struct Wait {
    enum Kind { none, token, xact } kind = none;
    int txn = -1;
    int epoch = 0;
};

struct Txn {
    std::uint32_t xid = 0;
    std::vector<int> keys;         // sorted
    std::vector<int> generations;  // per key
    std::size_t at = 0;            // the key being recorded
    Phase phase = Phase::look;
    bool token_held = false;
    int token_epoch = 0;
    Wait wait;
    std::vector<std::pair<int, bool>> outcomes;  // key, new
    // The decision of the last look, acted on in the next step.
    Sighting seen;
    int seen_holder = -1, seen_epoch = 0;
    Before before = Before::insert;
    After after = After::keep;
};

struct World {
    std::mt19937 rng;
    int generations = 3;
    std::vector<Record> records;
    std::vector<Txn> txns;
    std::uint32_t next_xid = 1000;
    std::ostringstream trace;

    explicit World(unsigned seed) : rng(seed) {}

    int rand(int n) { return static_cast<int>(rng() % static_cast<unsigned>(n)); }

    bool committed_record(int key) const {
        return std::any_of(records.begin(), records.end(), [&](const Record& r) { return r.txn < 0 && r.key == key; });
    }

    // A look with a dirty snapshot: the first record of `key` by another transaction (or a
    // committed one), generation `first` first (the server's hint: where the batch's last id
    // on record was; -1: none), then newest first; `skip` is not looked at (-1: none).
    Sighting look(int me, int key, int skip, int first, int* holder, int* epoch) const {
        for (int n = -1; n < generations; ++n) {
            const int g = n < 0 ? first : generations - 1 - n;
            if (g < 0 || g == skip || (n >= 0 && g == first)) continue;
            for (const Record& r : records) {
                if (r.key != key || r.generation != g || r.txn == me) continue;
                if (r.txn < 0) return Sighting{Found::live, 0};
                *holder = r.txn;
                *epoch = r.token_epoch;
                return Sighting{r.speculative ? Found::inserting : Found::inserted, txns[r.txn].xid};
            }
        }
        return Sighting{};
    }

    void release_token(Txn& t) {
        if (t.token_held) {
            t.token_held = false;
            ++t.token_epoch;
        }
    }
    void acquire_token(Txn& t) {
        if (!t.token_held) {
            t.token_held = true;
            ++t.token_epoch;
        }
    }

    void wait_for(Txn& t, const Sighting& s, int holder, int epoch) {
        t.wait = s.found == Found::inserting ? Wait{Wait::token, holder, epoch} : Wait{Wait::xact, holder, 0};
    }

    bool blocked(const Txn& t) const {
        if (t.wait.kind == Wait::none) return false;
        const Txn& u = txns[t.wait.txn];
        if (u.phase == Phase::ended) return false;
        if (t.wait.kind == Wait::xact) return true;
        return u.token_held && u.token_epoch == t.wait.epoch;
    }

    void next_key(Txn& t) {
        ++t.at;
        t.phase = t.at < t.keys.size() ? Phase::look : Phase::done;
        if (t.phase == Phase::done) release_token(t);
    }

    void remove_records_of(int i) {
        records.erase(std::remove_if(records.begin(), records.end(), [&](const Record& r) { return r.txn == i; }),
                      records.end());
    }

    // One step of transaction i's recording.
    void step(int i) {
        Txn& t = txns[i];
        t.wait = Wait{};
        const int key = t.keys[t.at], gen = t.generations[t.at];
        switch (t.phase) {
            case Phase::look:
                t.seen_holder = -1;
                t.seen = look(i, key, -1, rand(generations + 1) - 1, &t.seen_holder, &t.seen_epoch);
                t.before = before_insert(t.seen);
                t.phase = Phase::act_on_look;
                return;
            case Phase::act_on_look: act_on_look(i, key, gen); return;
            case Phase::check_others:
                t.seen_holder = -1;
                t.seen = look(i, key, gen, rand(generations + 1) - 1, &t.seen_holder, &t.seen_epoch);
                t.after = after_insert(t.seen, t.xid);
                t.phase = Phase::act_on_check;
                return;
            case Phase::act_on_check: act_on_check(i, key); return;
            default: return;
        }
    }

    void act_on_look(int i, int key, int gen) {
        Txn& t = txns[i];
        switch (t.before) {
            case Before::duplicate:
                trace << "t" << i << " k" << key << " duplicate\n";
                ASSERT_TRUE(committed_record(key)) << trace.str();
                t.outcomes.push_back({key, false});
                next_key(t);
                return;
            case Before::wait:
                trace << "t" << i << " k" << key << " waits (look) for t" << t.seen_holder << "\n";
                release_token(t);
                wait_for(t, t.seen, t.seen_holder, t.seen_epoch);
                t.phase = Phase::look;
                return;
            case Before::insert: break;
        }
        acquire_token(t);
        // The generation's unique index: a record of the key there (another's) is a conflict,
        // found by the insertion itself; the speculative record is removed at once.
        for (const Record& r : records)
            if (r.key == key && r.generation == gen && r.txn != i) {
                if (r.txn < 0) {
                    trace << "t" << i << " k" << key << " duplicate (own generation)\n";
                    t.outcomes.push_back({key, false});
                    next_key(t);
                    return;
                }
                trace << "t" << i << " k" << key << " conflicts in g" << gen << " with t" << r.txn << "\n";
                release_token(t);
                wait_for(t, Sighting{r.speculative ? Found::inserting : Found::inserted, txns[r.txn].xid}, r.txn,
                         r.token_epoch);
                t.phase = Phase::look;
                return;
            }
        records.push_back(Record{i, key, gen, true, t.token_epoch});
        trace << "t" << i << " k" << key << " inserts into g" << gen << "\n";
        t.phase = Phase::check_others;
    }

    void act_on_check(int i, int key) {
        Txn& t = txns[i];
        switch (t.after) {
            case After::keep:
                for (Record& r : records)
                    if (r.txn == i && r.key == key) r.speculative = false;
                trace << "t" << i << " k" << key << " new\n";
                t.outcomes.push_back({key, true});
                next_key(t);
                return;
            case After::withdraw:
                records.erase(std::remove_if(records.begin(), records.end(),
                                             [&](const Record& r) { return r.txn == i && r.key == key; }),
                              records.end());
                trace << "t" << i << " k" << key << " withdraws\n";
                t.phase = Phase::look;
                return;
            case After::wait_keeping:
                trace << "t" << i << " k" << key << " waits (keeping) for t" << t.seen_holder << "\n";
                wait_for(t, t.seen, t.seen_holder, t.seen_epoch);
                t.phase = Phase::check_others;
                return;
        }
    }

    void end(int i, bool commit) {
        Txn& t = txns[i];
        if (commit) {
            for (Record& r : records)
                if (r.txn == i) {
                    EXPECT_FALSE(r.speculative) << trace.str();
                    r.txn = -1;
                }
        } else {
            remove_records_of(i);
        }
        release_token(t);
        t.phase = Phase::ended;
        t.wait = Wait{};
        trace << "t" << i << (commit ? " commits\n" : " aborts\n");
    }

    // ROLLBACK TO SAVEPOINT and the same keys again, in a new subtransaction (a new xid).
    void rollback_to_savepoint(int i) {
        Txn& t = txns[i];
        remove_records_of(i);
        release_token(t);
        t.xid = next_xid++;
        t.at = 0;
        t.phase = Phase::look;
        t.wait = Wait{};
        t.outcomes.clear();
        trace << "t" << i << " rolls back to its savepoint, now xid " << t.xid << "\n";
    }

    // PREPARE TRANSACTION: the records stay the transaction's (in progress for everyone else)
    // until COMMIT PREPARED or ROLLBACK PREPARED; no more steps.
    void prepare(int i) {
        Txn& t = txns[i];
        release_token(t);
        t.phase = Phase::prepared;
        trace << "t" << i << " prepares\n";
    }

    // A crash: every open transaction that is not prepared is aborted.
    void crash() {
        trace << "crash\n";
        for (int i = 0; i < static_cast<int>(txns.size()); ++i)
            if (txns[i].phase != Phase::ended && txns[i].phase != Phase::prepared) end(i, false);
    }

    // Maintenance drops the oldest generation; committed records there move to the next one.
    void drop_oldest_generation() {
        if (generations < 2) return;
        for (Record& r : records) {
            ASSERT_LT(r.txn, 0) << "a generation dropped while a store's record was in progress\n" << trace.str();
            if (r.generation == 0) r.generation = 1;
        }
        for (Record& r : records) r.generation -= 1;
        for (Txn& t : txns)
            for (int& g : t.generations) g = std::max(0, g - 1);
        --generations;
        trace << "maintenance drops the oldest generation, its records moved forward\n";
    }

    void check_invariants() {
        for (int key = 0; key < 3; ++key) {
            int committed = 0;
            for (const Record& r : records) committed += (r.txn < 0 && r.key == key) ? 1 : 0;
            ASSERT_LE(committed, 1) << "key " << key << " committed new twice\n" << trace.str();
        }
    }
};

// One wave: transactions that all start together and run until each has ended.
void run_wave(World& w, int ntxns, int nkeys, bool with_aborts) {
    const int first = static_cast<int>(w.txns.size());
    std::vector<std::uint32_t> xids;
    for (int i = 0; i < ntxns; ++i) xids.push_back(w.next_xid++);
    std::shuffle(xids.begin(), xids.end(), w.rng);  // xids are taken in any order
    std::vector<bool> on_record_before(nkeys);
    for (int key = 0; key < nkeys; ++key) on_record_before[key] = w.committed_record(key);
    for (int i = 0; i < ntxns; ++i) {
        Txn t;
        t.xid = xids[i];
        for (int key = 0; key < nkeys; ++key)
            if (w.rand(3) != 0 || key == nkeys - 1) {
                t.keys.push_back(key);
                t.generations.push_back(w.rand(w.generations));
            }
        w.txns.push_back(t);
    }
    const int last = first + ntxns;
    for (int steps = 0;; ++steps) {
        ASSERT_LT(steps, kMaxSteps) << "livelock\n" << w.trace.str();
        std::vector<int> runnable, open, finished, prepared;
        for (int i = first; i < last; ++i) {
            const Txn& t = w.txns[i];
            if (t.phase == Phase::ended) continue;
            open.push_back(i);
            if (t.phase == Phase::done) finished.push_back(i);
            if (t.phase == Phase::prepared) prepared.push_back(i);
            if (t.phase != Phase::done && t.phase != Phase::prepared && !w.blocked(t)) runnable.push_back(i);
        }
        if (open.empty()) break;
        if (runnable.empty() && finished.empty() && prepared.empty())
            FAIL() << "every open transaction waits: a cycle of waits\n" << w.trace.str();
        const int roll = w.rand(100);
        if (with_aborts && roll < 3) {
            w.end(open[w.rand(static_cast<int>(open.size()))], false);
        } else if (with_aborts && roll < 5 && !finished.empty()) {
            w.rollback_to_savepoint(finished[w.rand(static_cast<int>(finished.size()))]);
        } else if (with_aborts && roll < 6) {
            w.crash();
        } else if (with_aborts && roll < 9 && !finished.empty()) {
            w.prepare(finished[w.rand(static_cast<int>(finished.size()))]);
        } else if (!prepared.empty() && (roll < 15 || (runnable.empty() && finished.empty()))) {
            w.end(prepared[w.rand(static_cast<int>(prepared.size()))], w.rand(3) != 0);  // COMMIT / ROLLBACK PREPARED
        } else if (!finished.empty() && (runnable.empty() || roll < 25)) {
            w.end(finished[w.rand(static_cast<int>(finished.size()))], !with_aborts || w.rand(5) != 0);
        } else {
            w.step(runnable[w.rand(static_cast<int>(runnable.size()))]);
        }
        if (::testing::Test::HasFatalFailure()) return;
        w.check_invariants();
        if (::testing::Test::HasFatalFailure()) return;
    }
    // A key on record when the wave began (also in a generation moved forward since) is never
    // new; every key some transaction recorded and committed is on record.
    for (int i = first; i < last; ++i)
        for (auto [key, fresh] : w.txns[i].outcomes) {
            ASSERT_FALSE(fresh && on_record_before[key]) << "key " << key << " new again\n" << w.trace.str();
            ASSERT_TRUE(w.committed_record(key) || !fresh || with_aborts) << w.trace.str();
        }
}

void run_one(unsigned seed, bool with_aborts) {
    World w(seed);
    w.generations = 2 + w.rand(2);
    const int nkeys = 1 + w.rand(3);
    // Some keys are on record before the transactions start, in a random generation.
    for (int key = 0; key < nkeys; ++key)
        if (w.rand(4) == 0) w.records.push_back(Record{-1, key, w.rand(w.generations), false, 0});
    const int waves = 1 + w.rand(3);
    for (int wave = 0; wave < waves; ++wave) {
        run_wave(w, 2 + w.rand(3), nkeys, with_aborts);
        if (::testing::Test::HasFatalFailure()) return;
        // Maintenance between waves (its lock waits for every open or prepared store).
        if (w.rand(2) == 0) w.drop_oldest_generation();
        if (::testing::Test::HasFatalFailure()) return;
    }
}

int seeds() {
    const char* s = std::getenv("WHIZBANG_GENERATION_MODEL_SEEDS");
    return s ? std::atoi(s) : 20000;
}

TEST(GenerationGuardModel, OneNewPerKeyAcrossGenerationsWithCommitsOnly) {
    for (int seed = 1; seed <= seeds(); ++seed) {
        run_one(static_cast<unsigned>(seed), false);
        if (HasFatalFailure()) FAIL() << "seed " << seed;
    }
}

TEST(GenerationGuardModel, OneNewPerKeyAcrossGenerationsWithAbortsAndSavepoints) {
    for (int seed = 1; seed <= seeds(); ++seed) {
        run_one(static_cast<unsigned>(seed) * 7919u, true);
        if (HasFatalFailure()) FAIL() << "seed " << seed;
    }
}

TEST(GenerationGuard, Decisions) {
    EXPECT_EQ(before_insert(Sighting{}), Before::insert);
    EXPECT_EQ(before_insert(Sighting{Found::live, 0}), Before::duplicate);
    EXPECT_EQ(before_insert(Sighting{Found::inserting, 7}), Before::wait);
    EXPECT_EQ(before_insert(Sighting{Found::inserted, 7}), Before::wait);
    EXPECT_EQ(after_insert(Sighting{}, 5), After::keep);
    EXPECT_EQ(after_insert(Sighting{Found::live, 0}, 5), After::withdraw);
    EXPECT_EQ(after_insert(Sighting{Found::inserted, 9}, 5), After::withdraw);
    EXPECT_EQ(after_insert(Sighting{Found::inserting, 9}, 5), After::wait_keeping);  // we are older
    EXPECT_EQ(after_insert(Sighting{Found::inserting, 3}, 5), After::withdraw);      // we are younger
    // Across the wrap of 32-bit xids, as PostgreSQL orders them.
    EXPECT_TRUE(xid_precedes(0xFFFFFFF0u, 5));
    EXPECT_FALSE(xid_precedes(5, 0xFFFFFFF0u));
}

}  // namespace
}  // namespace whizbang::core::generations
