#include "counter_journal.h"

#include <algorithm>

namespace whizbang::core {

void CounterJournal::add(int source, const std::string& consumer, Counter counter, std::uint64_t n, int level) {
    if (n == 0) return;
    for (Entry& e : entries_) {
        if (e.level == level && e.key.first == source && e.key.second == consumer) {
            e.values[static_cast<std::size_t>(counter)] += n;
            return;
        }
    }
    Entry e{level, {source, consumer}, {}};
    e.values[static_cast<std::size_t>(counter)] = n;
    entries_.push_back(std::move(e));
}

void CounterJournal::commit_sub(int level) {
    std::vector<Entry> kept;
    kept.reserve(entries_.size());
    for (Entry& e : entries_) {
        if (e.level < level) {
            kept.push_back(std::move(e));
            continue;
        }
        // Into the parent's entry of the same key, if it has one.
        auto parent = std::find_if(kept.begin(), kept.end(), [&](const Entry& k) {
            return k.level == level - 1 && k.key == e.key;
        });
        if (parent == kept.end()) {
            e.level = level - 1;
            kept.push_back(std::move(e));
        } else {
            for (std::size_t c = 0; c < kCounters; ++c) parent->values[c] += e.values[c];
        }
    }
    entries_ = std::move(kept);
}

void CounterJournal::abort_sub(int level) {
    entries_.erase(std::remove_if(entries_.begin(), entries_.end(), [&](const Entry& e) { return e.level >= level; }),
                   entries_.end());
}

std::map<CounterKey, CounterValues> CounterJournal::take() {
    std::map<CounterKey, CounterValues> sums;
    for (const Entry& e : entries_) {
        CounterValues& s = sums[e.key];
        for (std::size_t c = 0; c < kCounters; ++c) s[c] += e.values[c];
    }
    entries_.clear();
    return sums;
}

}  // namespace whizbang::core
