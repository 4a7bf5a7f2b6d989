// Handler idempotency keys (DESIGN §3.5): the decision a begin makes on an existing key,
// and the TTL policy checks, without a server. Times are microseconds on any fixed epoch.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "no_postgres.h"

namespace whizbang::core {

// Effective TTLs of one scope: wh_idempotency_policies over the global settings.
struct TtlPolicy {
    std::int64_t in_progress_us = 0;
    std::int64_t default_result_us = 0;
    std::int64_t min_result_us = 0;
    std::int64_t max_result_us = 0;
    std::int64_t tombstone_us = 0;
};

// Throws InputError(invalid_parameter) naming `what` unless ttl is positive.
void require_positive_ttl(std::int64_t ttl_us, const char* what);

// Throws InputError(invalid_parameter) unless ttl lies within [min_result, max_result].
void require_result_ttl_in_bounds(std::int64_t ttl_us, const TtlPolicy& policy, const std::string& scope);

enum class KeyState { in_progress, completed };

struct KeyRecord {
    KeyState state = KeyState::in_progress;
    std::optional<std::string> fingerprint;
    std::int64_t lease_expires_us = 0;      // in_progress: when an abandoned claim may be taken over
    std::int64_t result_expires_us = 0;     // completed: when the stored result is purged
    std::int64_t tombstone_expires_us = 0;  // completed: when the key is forgotten entirely
};

enum class BeginDecision {
    reclaim,                // take the key (abandoned claim, or forgotten key): new token
    in_progress_duplicate,  // someone else owns it and may still finish
    completed_duplicate,    // done: return the stored result
    expired_duplicate,      // done, result purged: only the tombstone remembers it
    conflict,               // same key, different fingerprint
};

const char* outcome_word(BeginDecision d);

// What a begin does with an existing key at time `now_us`.
BeginDecision decide_begin(const KeyRecord& key, const std::optional<std::string>& fingerprint, std::int64_t now_us);

}  // namespace whizbang::core
