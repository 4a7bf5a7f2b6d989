#include "dedup_plan.h"

#include <algorithm>
#include <numeric>

namespace whizbang::core {

const char* outcome_word(DedupOutcome o) {
    switch (o) {
        case DedupOutcome::fresh: return "new";
        case DedupOutcome::duplicate: return "duplicate";
        case DedupOutcome::conflict: return "conflict";
        case DedupOutcome::expired: return "expired";
    }
    return "unknown";
}

DedupPlan::DedupPlan(const std::vector<DedupElement>& elements) : elements_(elements) {
    std::vector<int> order(elements.size());
    std::iota(order.begin(), order.end(), 0);
    // Stable: elements of one id stay in input order, which resolve() relies on.
    std::stable_sort(order.begin(), order.end(),
                     [&](int a, int b) { return elements[a].id < elements[b].id; });

    for (std::size_t pos = 0; pos < order.size();) {
        std::size_t end = pos;
        while (end < order.size() && elements[order[end]].id == elements[order[pos]].id) ++end;

        DedupKey key;
        key.id = elements[order[pos]].id;
        std::vector<int> members(order.begin() + pos, order.begin() + end);
        std::size_t from = 0;
        while (from < members.size() && elements[members[from]].expired) ++from;
        if (from < members.size()) {
            key.recording_element = members[from];
        } else {
            from = 0;  // a lookup counts every element if the id turns out to be on record
        }
        key.observations = static_cast<int>(members.size() - from);
        // The fingerprint an id is recorded with is that of the delivery that records it, and it
        // never changes: a record without one never conflicts ("different non-null fingerprint").
        if (key.recording_element >= 0 && elements[key.recording_element].fingerprint)
            key.fingerprint = &*elements[key.recording_element].fingerprint;

        keys_.push_back(key);
        members_.push_back(std::move(members));
        pos = end;
    }
}

DedupResolution DedupPlan::resolve(const std::vector<StoredKey>& stored) const {
    DedupResolution r;
    r.outcomes.assign(elements_.size(), DedupOutcome::duplicate);

    for (std::size_t k = 0; k < keys_.size(); ++k) {
        const DedupKey& key = keys_[k];
        const StoredKey& db = stored.at(k);
        const std::vector<int>& members = members_[k];
        if (db.inserted && key.recording_element < 0) {
            // Not on record and too old to trust: nothing may be recorded.
            for (int e : members) r.outcomes[e] = DedupOutcome::expired;
            r.remove.push_back(key.id);
            continue;
        }

        int conflicts = 0, uncounted = 0;
        // Each element is compared with the fingerprint on record: the stored one, or for an id
        // this call recorded, that of its recording element.
        const std::string* reference = db.inserted || !db.fingerprint ? nullptr : &*db.fingerprint;
        for (int e : members) {
            const auto& fp = elements_[e].fingerprint;
            if (db.inserted && e < key.recording_element) {
                r.outcomes[e] = DedupOutcome::expired;  // arrived before the id was recorded
                continue;
            }
            if (db.inserted && e == key.recording_element) {
                r.outcomes[e] = DedupOutcome::fresh;
                if (fp) reference = &*fp;
                continue;
            }
            if (!db.inserted && e < key.recording_element) ++uncounted;  // the upsert skipped it
            if (fp && reference && *fp != *reference) {
                r.outcomes[e] = DedupOutcome::conflict;
                ++conflicts;
            } else {
                r.outcomes[e] = DedupOutcome::duplicate;
            }
        }
        if (conflicts || uncounted) r.adjustments.push_back({key.id, uncounted, conflicts});
    }
    return r;
}

}  // namespace whizbang::core
