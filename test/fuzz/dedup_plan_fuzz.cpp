// Fuzz target: DedupPlan (src/core/dedup_plan.h), which turns a delivered batch into the sorted
// rows the database locks and resolves each element's outcome from the database's answer.
// Input: one byte per element (id from 16 values, expired flag, optional fingerprint from 4),
// a 0xff byte, then one byte per distinct id for the database's answer (inserted, optional
// stored fingerprint). Checks DESIGN §3.1's rules as properties:
//   - keys are strictly ascending and unique (the lock order), and split the elements;
//   - the recording element is the first non-expired element of its id;
//   - "new" is given once, to the recording element, and only when the row was inserted;
//   - "expired" only for an inserted row (a lookup that found nothing, or elements before the
//     recording one); such lookups, and only they, are removed again;
//   - "conflict" only when the element's fingerprint and the one on record both exist and differ;
//   - the counter adjustments add up to the conflicts and the elements the upsert skipped.
#include <optional>
#include <string>
#include <vector>

#include "dedup_plan.h"
#include "fuzz_check.h"

namespace {

using namespace whizbang::core;

std::optional<std::string> fingerprint_of(std::uint8_t b) {
    if (!(b & 0x20)) return std::nullopt;
    return std::string(1, static_cast<char>('a' + (b >> 6)));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    std::size_t pos = 0;
    std::vector<DedupElement> elements;
    for (; pos < size && data[pos] != 0xff; ++pos) {
        DedupElement e;
        e.id[15] = data[pos] & 0x0f;
        e.id[0] = static_cast<std::uint8_t>(0xf0 - (e.id[15] << 4));  // sort order is not byte 15's
        e.expired = data[pos] & 0x10;
        e.fingerprint = fingerprint_of(data[pos]);
        elements.push_back(e);
    }
    ++pos;

    const DedupPlan plan(elements);
    const auto& keys = plan.keys();
    std::vector<StoredKey> stored;
    for (std::size_t k = 0; k < keys.size(); ++k) {
        FUZZ_CHECK(k == 0 || keys[k - 1].id < keys[k].id, "keys are strictly ascending");
        const std::uint8_t b = pos + k < size ? data[pos + k] : 0;
        stored.push_back({(b & 1) != 0, fingerprint_of(b)});
    }
    std::vector<std::vector<int>> members(keys.size());
    for (std::size_t i = 0; i < elements.size(); ++i) {
        std::size_t k = 0;
        while (k < keys.size() && keys[k].id != elements[i].id) ++k;
        FUZZ_CHECK(k < keys.size(), "every element has its key");
        members[k].push_back(static_cast<int>(i));
    }

    const DedupResolution r = plan.resolve(stored);
    FUZZ_CHECK(r.outcomes.size() == elements.size(), "one outcome per element");
    std::size_t removals = 0, adjusted_conflicts = 0, conflicts = 0;
    int adjusted_observations = 0, skipped = 0;
    for (const auto& a : r.adjustments) {
        FUZZ_CHECK(a.conflicts > 0 || a.observations > 0, "no empty adjustment");
        adjusted_conflicts += static_cast<std::size_t>(a.conflicts);
        adjusted_observations += a.observations;
    }
    for (std::size_t k = 0; k < keys.size(); ++k) {
        const DedupKey& key = keys[k];
        int first_live = -1;
        for (int e : members[k]) {
            if (!elements[e].expired) {
                first_live = e;
                break;
            }
        }
        FUZZ_CHECK(key.recording_element == first_live, "the first non-expired element records the id");
        const bool lookup_only = stored[k].inserted && first_live < 0;
        if (lookup_only) ++removals;
        const std::string* on_record = stored[k].inserted
                                           ? (first_live >= 0 && elements[first_live].fingerprint
                                                  ? &*elements[first_live].fingerprint : nullptr)
                                           : (stored[k].fingerprint ? &*stored[k].fingerprint : nullptr);
        for (int e : members[k]) {
            const DedupOutcome o = r.outcomes[e];
            FUZZ_CHECK((o == DedupOutcome::fresh) == (stored[k].inserted && e == first_live),
                       "\"new\" goes to the recording element of an inserted row only");
            FUZZ_CHECK((o == DedupOutcome::expired) == (stored[k].inserted && (first_live < 0 || e < first_live)),
                       "\"expired\" only for elements before the recording one of an inserted row");
            const auto& fp = elements[e].fingerprint;
            const bool differs = fp && on_record && *fp != *on_record;
            if (o == DedupOutcome::duplicate || o == DedupOutcome::conflict)
                FUZZ_CHECK((o == DedupOutcome::conflict) == differs, "conflict exactly when fingerprints differ");
            if (o == DedupOutcome::conflict) ++conflicts;
            if (!stored[k].inserted && e < first_live) ++skipped;
        }
    }
    FUZZ_CHECK(r.remove.size() == removals, "exactly the lookups that inserted a row remove it again");
    FUZZ_CHECK(adjusted_conflicts == conflicts, "adjustments count every conflict");
    FUZZ_CHECK(adjusted_observations == skipped, "adjustments count the elements the upsert skipped");
    return 0;
}
