// A transaction's journal of the lease slots it changed (lease_machine.h): which slots its
// commit, abort or PREPARE settles, and for each subtransaction level that changed a slot, the
// state the slot had before that level first changed it — what that level's abort puts back.
//
// The journal is the backend's own memory; the slots may be shared. The store calls ready()
// before it locks a slot (it allocates: nothing may allocate under a shared-memory lock), then
// noted() with the state before the change, under the lock (it does not allocate).
#pragma once

#include <cstdint>
#include <unordered_map>
#include <utility>
#include <vector>

#include "lease_machine.h"

namespace whizbang::core::lease {

template <typename Key, typename KeyHash, typename KeyEqual = std::equal_to<Key>>
class Journal {
public:
    struct Save {
        int level;
        State saved;  // the slot's state before `level` first changed it
    };
    struct Record {
        std::uint32_t hash = 0;     // the store's hash of the key
        std::vector<Save> saves;    // levels strictly increasing
        State before_last;          // the state before the latest change (undo_take)
        bool before_last_valid = false;  // no savepoint was rolled back since
    };

    // The record of `key`, with room for a change at `level`: call before locking the slot.
    Record& ready(const Key& key, std::uint32_t hash, int level) {
        Record& r = records_[key];
        r.hash = hash;
        if (r.saves.empty() || r.saves.back().level < level) r.saves.reserve(r.saves.size() + 1);
        return r;
    }

    // The slot of `r` changed at `level`; `before` is its state before the change.
    static void noted(Record& r, int level, const State& before) noexcept {
        if (r.saves.empty() || r.saves.back().level < level) r.saves.push_back({level, before});
        r.before_last = before;
        r.before_last_valid = true;
    }

    // A subtransaction of `level` commits: its saves belong to the level around it.
    void commit_sub(int level) {
        for (auto& [key, r] : records_) {
            if (r.saves.empty() || r.saves.back().level < level) continue;
            if (r.saves.size() >= 2 && r.saves[r.saves.size() - 2].level >= level - 1) r.saves.pop_back();
            else r.saves.back().level = level - 1;
        }
    }

    // A subtransaction of `level` aborts: restore(key, hash, saved, release) for every slot it
    // changed, `release` when no enclosing level had changed it.
    template <typename F>
    void abort_sub(int level, F restore) {
        for (auto it = records_.begin(); it != records_.end();) {
            Record& r = it->second;
            r.before_last_valid = false;
            if (!r.saves.empty() && r.saves.back().level >= level) {
                State saved;
                while (!r.saves.empty() && r.saves.back().level >= level) {
                    saved = r.saves.back().saved;
                    r.saves.pop_back();
                }
                restore(it->first, r.hash, saved, r.saves.empty());
            }
            if (r.saves.empty()) it = records_.erase(it);
            else ++it;
        }
    }

    // The transaction ends (commit, abort or PREPARE): settle(key, hash) for every slot it
    // changed; the journal is empty afterwards.
    template <typename F>
    void finish(F settle) {
        for (auto& [key, r] : records_)
            if (!r.saves.empty()) settle(key, r.hash);
        records_.clear();
        // A big transaction (a TRUNCATE ends every lease of a table) does not keep the memory.
        if (records_.bucket_count() > 4096) std::unordered_map<Key, Record, KeyHash, KeyEqual>().swap(records_);
    }

    // The record of `key`, if this transaction changed that slot.
    const Record* find(const Key& key) const {
        auto it = records_.find(key);
        return it == records_.end() || it->second.saves.empty() ? nullptr : &it->second;
    }

    // Undoes `me`'s latest change of the slot of `r` (ready() at `level`) when it was the take
    // of a lease carrying `token` (a claim found the row not claimable after all), under the
    // slot's lock. The undo is a change of `level` itself: rolling `level` back brings the take
    // back. The slot stays this transaction's until it ends, as a row it had locked would.
    static bool undo_take(Record& r, Slot& s, const Owner& me, std::int64_t token, int level) noexcept {
        if (!r.before_last_valid || !s.owned || s.owner != me || !s.current.present || s.current.lease.token != token)
            return false;
        const State taken = s.current;
        s.current = r.before_last;
        noted(r, level, taken);
        return true;
    }

    bool empty() const { return records_.empty(); }
    std::size_t size() const { return records_.size(); }

private:
    std::unordered_map<Key, Record, KeyHash, KeyEqual> records_;
};

}  // namespace whizbang::core::lease
