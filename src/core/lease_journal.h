// A transaction's journal of the lease slots it changed (lease_machine.h): an undo log. Each
// change of a slot appends the state the slot had before it, with the subtransaction level that
// made it. Rolling a level back walks the log backwards to that level, putting each saved state
// back (so the earliest one of the level wins); releasing a level hands its entries to the level
// around it; the end of the transaction settles every slot in the log.
//
// The journal is the backend's own memory; the slots may be shared. The store calls ready()
// before it locks a slot (it may allocate: nothing may allocate under a shared-memory lock),
// then noted() with the state before the change, under the lock (it does not allocate). Levels
// never decrease along the log: a level's entries are gone (rolled back) or relabelled
// (released) before its parent changes anything again.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <vector>

#include "lease_machine.h"

namespace whizbang::core::lease {

template <typename Key, typename KeyEqual = std::equal_to<Key>>
class Journal {
public:
    struct Entry {
        Key key;
        std::uint32_t hash;  // the store's hash of the key
        int level;
        State saved;  // the slot's state before this change
        bool first;   // the transaction's first change of the slot: undoing it ends the ownership
    };

    // Room for `n` more entries: call before locking the slot. Grows by doubling.
    void ready(std::size_t n = 1) {
        if (entries_.size() + n > entries_.capacity()) entries_.reserve(std::max<std::size_t>(16, (entries_.size() + n) * 2));
    }

    // The slot of `key` changed at `level`; `before` is its state before the change, `first`
    // whether the change made this transaction its owner. Within the room ready() made.
    void noted(const Key& key, std::uint32_t hash, int level, const State& before, bool first) noexcept {
        entries_.push_back(Entry{key, hash, level, before, first});
    }

    // A subtransaction of `level` commits: its entries belong to the level around it.
    void commit_sub(int level) {
        for (auto it = entries_.rbegin(); it != entries_.rend() && it->level >= level; ++it) it->level = level - 1;
    }

    // A subtransaction of `level` aborts: restore(key, hash, saved, release) for each of its
    // entries, latest first; `release` when the entry was the transaction's first change of the
    // slot (the slot is no longer its).
    template <typename F>
    void abort_sub(int level, F restore) {
        while (!entries_.empty() && entries_.back().level >= level) {
            const Entry& e = entries_.back();
            restore(e.key, e.hash, e.saved, e.first);
            entries_.pop_back();
        }
    }

    // The transaction ends (commit, abort or PREPARE): settle(key, hash) for every entry (a slot
    // changed twice comes twice: settling is idempotent); the journal is empty afterwards.
    template <typename F>
    void finish(F settle) {
        for (const Entry& e : entries_) settle(e.key, e.hash);
        entries_.clear();
        // A big transaction (a TRUNCATE ends every lease of a table) does not keep the memory.
        if (entries_.capacity() > 4096) std::vector<Entry>().swap(entries_);
    }

    // Undoes `me`'s latest change of `key`'s slot when it was the take of a lease carrying
    // `token` (a claim found the row not claimable after all), under the slot's lock, after
    // ready(). The undo is a change of `level` itself: rolling `level` back brings the take
    // back. The slot stays this transaction's until it ends, as a row it had locked would.
    bool undo_take(const Key& key, std::uint32_t hash, Slot& s, const Owner& me, std::int64_t token, int level) noexcept {
        if (!s.owned || s.owner != me || !s.current.present || s.current.lease.token != token) return false;
        for (auto it = entries_.rbegin(); it != entries_.rend(); ++it) {
            if (!KeyEqual()(it->key, key)) continue;
            const State taken = s.current;
            s.current = it->saved;
            noted(key, hash, level, taken, false);
            return true;
        }
        return false;
    }

    bool empty() const { return entries_.empty(); }

private:
    std::vector<Entry> entries_;
};

}  // namespace whizbang::core::lease
