// Planning and resolving one dedup batch (DESIGN §3.1), without a server.
//
// A batch is turned into one row per distinct message id, sorted by id: the order in which
// the database locks them, so overlapping batches never deadlock (DESIGN §1.5). After the
// database has answered for each distinct id whether it was inserted and what fingerprint it
// now holds, resolve() gives each input element its outcome in input order and says which
// counters still need adjusting.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "no_postgres.h"
#include "uuid.h"

namespace whizbang::core {

enum class DedupOutcome { fresh, duplicate, conflict, expired };

// The outcome word of DESIGN §3.1 ("new", "duplicate", "conflict", "expired").
const char* outcome_word(DedupOutcome o);

struct DedupElement {
    Uuid id{};
    std::optional<std::string> fingerprint;  // raw bytes; nullopt when not given
    bool expired = false;                    // sent before the replay horizon (caller decides)
};

struct DedupKey {
    Uuid id{};
    // Element whose arrival records the id when it is new: the first element that is not
    // expired. -1 when every element of this id is expired: the id may only be looked up.
    int recording_element = -1;
    int observations = 0;                   // elements from recording_element on (all, for a lookup)
    const std::string* fingerprint = nullptr;  // the recording element's fingerprint, if any
};

// What the database said about one key, in the order of DedupPlan::keys.
struct StoredKey {
    bool inserted = false;  // the upsert created the row in this call
    std::optional<std::string> fingerprint;
};

struct CounterAdjustment {
    Uuid id{};
    int observations = 0;
    int conflicts = 0;
};

struct DedupResolution {
    std::vector<DedupOutcome> outcomes;           // one per element, input order
    std::vector<Uuid> remove;                     // inserted only to look up: delete again
    std::vector<CounterAdjustment> adjustments;   // counters the upsert did not get right
};

class DedupPlan {
public:
    explicit DedupPlan(const std::vector<DedupElement>& elements);

    const std::vector<DedupKey>& keys() const { return keys_; }

    // `stored` has one entry per key, in keys() order.
    DedupResolution resolve(const std::vector<StoredKey>& stored) const;

private:
    const std::vector<DedupElement>& elements_;
    std::vector<DedupKey> keys_;
    std::vector<std::vector<int>> members_;  // element indexes of each key, input order
};

}  // namespace whizbang::core
