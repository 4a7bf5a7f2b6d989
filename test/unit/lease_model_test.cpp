// Model-based test of the lease state machine and journal (DESIGN §3.8): thousands of random
// interleavings of transactions on a few rows — takes, take-overs, ends with right, wrong and no
// tokens, renewals, undone takes, savepoints released and rolled back, commits, aborts, backend
// exits, PREPARE with COMMIT / ROLLBACK PREPARED from anywhere, server restarts — run on the
// machine as the shared-memory store runs it, and on a plain reference model: the committed
// leases, and for each transaction a private copy of the rows it changed, with a full copy per
// savepoint. After every step each transaction must see every row as the model says, and:
//   - at most one live holder per row: a row changed by one transaction is busy for all others;
//   - any rollback restores the state before (the model's copies);
//   - a prepared end keeps its row from every claim until COMMIT or ROLLBACK PREPARED;
//   - a row's committed lease only ever changes to one with a larger token.
// WHIZBANG_LEASE_MODEL_SEEDS sets how many interleavings (default 3000).
#include <cstdlib>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <vector>

#include <gtest/gtest.h>

#include "lease_journal.h"
#include "lease_machine.h"

namespace whizbang::core::lease {
namespace {

constexpr int kRows = 5;
constexpr int kBackends = 3;

using RowJournal = Journal<int>;
using Rows = std::map<int, State>;

// ---- the reference model ---------------------------------------------------------------------

struct RefTxn {
    Rows priv;                  // the rows this transaction changed, as it sees them
    std::map<int, State> last_before;  // per row, the state before its latest take (or undo)
    std::vector<std::pair<Rows, std::map<int, State>>> saves;  // both, at each open savepoint
};

struct Reference {
    Rows committed;
    std::map<int, RefTxn> open;          // by backend
    std::map<std::uint32_t, Rows> prepared;  // by xid

    State committed_of(int r) const {
        auto it = committed.find(r);
        return it == committed.end() ? State::none() : it->second;
    }
    bool busy(int r, int me) const {
        for (const auto& [b, t] : open)
            if (b != me && t.priv.count(r)) return true;
        for (const auto& [x, p] : prepared)
            if (p.count(r)) return true;
        return false;
    }
    State visible(int r, int me) const {
        auto t = open.find(me);
        if (t != open.end()) {
            auto it = t->second.priv.find(r);
            if (it != t->second.priv.end()) return it->second;
        }
        return committed_of(r);
    }
    void settle(const Rows& priv, bool commit) {
        if (!commit) return;
        for (const auto& [r, st] : priv) {
            if (st.present) committed[r] = st;
            else committed.erase(r);
        }
    }
};

// ---- the machine, as the shared-memory store drives it ---------------------------------------

struct Backend {
    int pid = 0;
    std::uint32_t serial = 1;
    bool open = false;
    int level = 0;  // 1 at top level
    RowJournal journal;
    Owner owner() const { return Owner{pid, serial}; }
};

struct Machine {
    std::map<int, Slot> table;
    std::map<std::uint32_t, Fate> fates;
    FateOf fate() const {
        return [this](std::uint32_t xid) {
            auto it = fates.find(xid);
            return it == fates.end() ? Fate::in_progress : it->second;
        };
    }
    Slot& slot(int r) {
        Slot& s = table[r];
        settle(s, fate());
        return s;
    }
    void tidy() {
        for (auto it = table.begin(); it != table.end();) {
            settle(it->second, fate());
            it = it->second.empty() ? table.erase(it) : std::next(it);
        }
    }
};

class World {
public:
    explicit World(unsigned seed) : rng_(seed) {
        for (int b = 0; b < kBackends; ++b) backends_[b].pid = 100 + b;
    }

    void run(int steps) {
        for (int i = 0; i < steps && !::testing::Test::HasFailure(); ++i) {
            step();
            check();
            if (::testing::Test::HasFailure()) {
                std::ostringstream trace;
                for (const std::string& h : history_) trace << "\n  " << h;
                ADD_FAILURE() << "after step " << i << ", the steps:" << trace.str();
            }
        }
    }

private:
    int pick(int n) { return std::uniform_int_distribution<int>(0, n - 1)(rng_); }

    Lease fresh() {
        Lease l;
        l.instance[0] = static_cast<std::uint8_t>(pick(3));
        l.token = ++tokens_;
        l.expiry = now_ + 1 + pick(20);
        l.attempts = 1 + pick(3);
        return l;
    }

    // The token an outcome call passes: the one it sees, another, none (unfenced) or kNoLease.
    std::optional<std::int64_t> token_for(int r, int b) {
        const State v = ref_.visible(r, b);
        switch (pick(4)) {
            case 0:
            case 1:
                return v.present ? v.lease.token : std::optional<std::int64_t>(kNoLease);
            case 2:
                return std::nullopt;
            default:
                return 1 + pick(static_cast<int>(tokens_) + 1);
        }
    }

    void begin_if_needed(int b) {
        Backend& be = backends_[b];
        if (be.open) return;
        be.open = true;
        be.level = 1;
        ref_.open[b] = RefTxn{};
    }

    void end_txn(int b, bool commit) {
        Backend& be = backends_[b];
        be.journal.finish([&](int r, std::uint32_t) {
            Slot& s = m_.table[r];
            if (s.owned && s.owner == be.owner()) commit ? lease::commit(s) : lease::abort(s);
        });
        ref_.settle(ref_.open[b].priv, commit);
        ref_.open.erase(b);
        be.open = false;
        ++be.serial;
    }

    void step() {
        const int b = pick(kBackends);
        const int r = pick(kRows);
        Backend& be = backends_[b];
        std::ostringstream what;
        const int op = pick(100);
        if (op < 22) {  // claim: take, or take over a lapsed lease
            begin_if_needed(b);
            const Lease l = fresh();
            Lease old_m, old_r;
            State before;
            be.journal.ready();
            const bool first = !m_.slot(r).owned;
            const Take got = take(m_.slot(r), be.owner(), l, now_, &old_m, &before);
            if (got == Take::taken) be.journal.noted(r, 0, be.level, before, first);
            Take want;
            const State v = ref_.visible(r, b);
            if (ref_.busy(r, b) || (v.present && v.lease.expiry > now_)) want = Take::held;
            else if (v.present) want = Take::lapsed, old_r = v.lease;
            else want = Take::taken;
            what << "take b" << b << " r" << r << " t" << l.token << " -> " << int(got);
            EXPECT_EQ(got, want) << what.str();
            if (want == Take::taken) {
                RefTxn& t = ref_.open[b];
                t.last_before[r] = ref_.visible(r, b);
                t.priv[r] = State::of(l);
                takes_[b].push_back({r, l.token});
            }
            if (got == Take::lapsed && want == Take::lapsed && pick(2)) {
                EXPECT_EQ(old_m, old_r);
                const Lease l2 = fresh();
                be.journal.ready();
                const bool first2 = !m_.slot(r).owned;
                const bool ok = take_over(m_.slot(r), be.owner(), old_m.token, l2, now_, &before);
                if (ok) be.journal.noted(r, 0, be.level, before, first2);
                EXPECT_TRUE(ok) << what.str() << " take_over";
                if (ok) ref_.open[b].priv[r] = State::of(l2);
            }
        } else if (op < 40) {  // an outcome call ends the row's lease
            begin_if_needed(b);
            const std::optional<std::int64_t> token = token_for(r, b);
            State was, before;
            be.journal.ready();
            const bool first = !m_.slot(r).owned;
            const Ended got = end(m_.slot(r), be.owner(), token ? &*token : nullptr, &was, &before);
            if (got == Ended::ended) be.journal.noted(r, 0, be.level, before, first);
            Ended want;
            const State v = ref_.visible(r, b);
            if (ref_.busy(r, b)) want = Ended::mismatch;
            else if (v.present) want = token && *token != v.lease.token ? Ended::mismatch : Ended::ended;
            else want = token && *token != kNoLease ? Ended::untouched : Ended::ended;
            what << "end b" << b << " r" << r << " token " << (token ? std::to_string(*token) : "null") << " -> "
                 << int(got);
            EXPECT_EQ(got, want) << what.str();
            if (want == Ended::ended) {
                EXPECT_EQ(was, v) << what.str();
                ref_.open[b].priv[r] = State::none();
            }
        } else if (op < 47) {  // renewal (outside or inside a transaction)
            const std::optional<std::int64_t> token = token_for(r, b);
            if (!token) return;
            const std::int64_t expiry = now_ + 1 + pick(20);
            const bool got = renew(m_.slot(r), be.owner(), *token, expiry);
            const State v = ref_.visible(r, b);
            const bool want = !ref_.busy(r, b) && v.present && v.lease.token == *token;
            what << "renew b" << b << " r" << r << " t" << *token << " -> " << got;
            EXPECT_EQ(got, want) << what.str();
            if (want) {
                auto t = ref_.open.find(b);
                if (t != ref_.open.end()) {
                    auto it = t->second.priv.find(r);
                    if (it != t->second.priv.end() && it->second.present && it->second.lease.token == *token)
                        it->second.lease.expiry = expiry;
                    // Not undone by a rollback to a savepoint either: a heartbeat is not transactional.
                    for (auto& [saved, unused] : t->second.saves) {
                        auto sv = saved.find(r);
                        if (sv != saved.end() && sv->second.present && sv->second.lease.token == *token)
                            sv->second.lease.expiry = expiry;
                    }
                }
                auto c = ref_.committed.find(r);
                if (c != ref_.committed.end() && c->second.lease.token == *token) c->second.lease.expiry = expiry;
            }
        } else if (op < 52) {  // a claim undoes its take (the row was not claimable after all)
            auto& mine = takes_[b];
            if (!be.open || mine.empty()) return;
            const auto [row, token] = mine[static_cast<std::size_t>(pick(static_cast<int>(mine.size())))];
            be.journal.ready();
            const bool got = be.journal.undo_take(row, 0, m_.slot(row), be.owner(), token, be.level);
            RefTxn& t = ref_.open[b];
            auto it = t.priv.find(row);
            const bool want = it != t.priv.end() && it->second.present && it->second.lease.token == token &&
                              t.last_before.count(row);
            what << "undo b" << b << " r" << row << " t" << token << " -> " << got;
            EXPECT_EQ(got, want) << what.str();
            if (want) {
                const State taken = it->second;
                it->second = t.last_before[row];
                t.last_before[row] = taken;
            }
        } else if (op < 60) {  // SAVEPOINT
            begin_if_needed(b);
            ++be.level;
            ref_.open[b].saves.push_back({ref_.open[b].priv, ref_.open[b].last_before});
            what << "savepoint b" << b << " level " << be.level;
        } else if (op < 66) {  // RELEASE SAVEPOINT
            if (!be.open || be.level == 1) return;
            be.journal.commit_sub(be.level);
            --be.level;
            ref_.open[b].saves.pop_back();
            what << "release b" << b;
        } else if (op < 73) {  // ROLLBACK TO SAVEPOINT
            if (!be.open || be.level == 1) return;
            be.journal.abort_sub(be.level, [&](int row, std::uint32_t, const State& saved, bool release) {
                restore(m_.table[row], saved, release);
            });
            --be.level;
            RefTxn& t = ref_.open[b];
            t.priv = t.saves.back().first;
            t.last_before = t.saves.back().second;
            t.saves.pop_back();
            what << "rollback to savepoint b" << b;
        } else if (op < 80) {  // COMMIT
            if (!be.open) return;
            end_txn(b, true);
            what << "commit b" << b;
        } else if (op < 85) {  // ROLLBACK, or the backend exits (its abort runs)
            if (!be.open) return;
            end_txn(b, false);
            what << "abort b" << b;
        } else if (op < 90) {  // PREPARE TRANSACTION
            if (!be.open) return;
            const std::uint32_t xid = ++xids_;
            be.journal.finish([&](int row, std::uint32_t) {
                Slot& s = m_.table[row];
                if (s.owned && s.owner == be.owner()) prepare(s, xid);
            });
            ref_.prepared[xid] = ref_.open[b].priv;
            for (const auto& [row, st] : ref_.prepared[xid])
                if (!st.present) prepared_ends_.insert({xid, row});
            ref_.open.erase(b);
            be.open = false;
            ++be.serial;
            what << "prepare b" << b << " as " << xid;
        } else if (op < 95) {  // COMMIT / ROLLBACK PREPARED, from any session
            if (ref_.prepared.empty()) return;
            auto it = ref_.prepared.begin();
            std::advance(it, pick(static_cast<int>(ref_.prepared.size())));
            const bool commit = pick(2);
            m_.fates[it->first] = commit ? Fate::committed : Fate::aborted;
            ref_.settle(it->second, commit);
            for (auto e = prepared_ends_.begin(); e != prepared_ends_.end();)
                e = e->first == it->first ? prepared_ends_.erase(e) : std::next(e);
            what << (commit ? "commit prepared " : "rollback prepared ") << it->first;
            ref_.prepared.erase(it);
            if (pick(3) == 0) m_.tidy();
        } else if (op < 99) {
            now_ += 1 + pick(8);
            what << "time " << now_;
        } else {  // server restart: every lease is void, open transactions are gone
            m_ = Machine{};
            ref_ = Reference{};
            prepared_ends_.clear();
            for (Backend& x : backends_) {
                x.open = false;
                x.journal = RowJournal{};
                ++x.serial;
            }
            what << "restart";
        }
        if (op < 52 || op >= 60) takes_.erase(be.open ? -1 : b);
        last_ = what.str();
        if (!last_.empty()) history_.push_back(last_);
    }

    void check() {
        for (int r = 0; r < kRows; ++r) {
            const Slot settled_slot = settled(m_.table.count(r) ? m_.table[r] : Slot{}, m_.fate());
            for (int b = 0; b < kBackends; ++b) {
                const Owner me = backends_[b].owner();
                ASSERT_EQ(busy(settled_slot, me), ref_.busy(r, b)) << last_ << ": busy r" << r << " for b" << b;
                if (!ref_.busy(r, b)) {
                    ASSERT_EQ(visible(settled_slot, me), ref_.visible(r, b)) << last_ << ": r" << r << " for b" << b;
                }
            }
            // A prepared end keeps its row from every claim until it is settled.
            for (const auto& [xid, row] : prepared_ends_) {
                if (row != r) continue;
                for (int b = 0; b < kBackends; ++b) {
                    ASSERT_TRUE(held(settled_slot, backends_[b].owner(), now_ + 1000000)) << last_;
                }
            }
            // Committed leases of a row only change to newer tokens.
            const State c = ref_.committed_of(r);
            ASSERT_EQ(settled_slot.committed, c) << last_ << ": committed r" << r;
            if (c.present) {
                auto& seen = last_token_[r];
                if (c.lease.token != seen) {
                    ASSERT_GT(c.lease.token, seen) << last_ << ": r" << r << " went back to an older lease";
                    seen = c.lease.token;
                }
            }
        }
    }

    std::mt19937 rng_;
    Machine m_;
    Reference ref_;
    Backend backends_[kBackends];
    std::map<int, std::vector<std::pair<int, std::int64_t>>> takes_;  // this transaction's takes
    std::set<std::pair<std::uint32_t, int>> prepared_ends_;
    std::map<int, std::int64_t> last_token_;
    std::int64_t now_ = 1000, tokens_ = 0;
    std::uint32_t xids_ = 1000;
    std::string last_;
    std::vector<std::string> history_;
};

int seeds() {
    const char* env = std::getenv("WHIZBANG_LEASE_MODEL_SEEDS");
    return env ? std::atoi(env) : 3000;
}

TEST(LeaseModel, RandomInterleavingsMatchTheReference) {
    const int n = seeds();
    for (int seed = 1; seed <= n && !HasFailure(); ++seed) {
        World w(static_cast<unsigned>(seed));
        w.run(200);
        if (HasFailure()) ADD_FAILURE() << "seed " << seed;
    }
}

}  // namespace
}  // namespace whizbang::core::lease
