#include "idempotency.h"

#include "error.h"
#include "excerpt.h"

namespace whizbang::core {

namespace {

std::string seconds_text(std::int64_t us) {
    std::string text = std::to_string(us / 1000000);
    std::int64_t frac = us % 1000000;
    if (frac != 0) {
        std::string digits = std::to_string(frac < 0 ? -frac : frac);
        digits.insert(0, 6 - digits.size(), '0');           // 50000 us is 0.05 s, not 0.5 s
        digits.erase(digits.find_last_not_of('0') + 1);
        text += "." + digits;
    }
    return text + "s";
}

}  // namespace

void require_positive_ttl(std::int64_t ttl_us, const char* what) {
    if (ttl_us <= 0)
        throw InputError(InputError::Kind::invalid_parameter, std::string(what) + " must be positive");
}

void require_result_ttl_in_bounds(std::int64_t ttl_us, const TtlPolicy& policy, const std::string& scope) {
    require_positive_ttl(ttl_us, "result TTL");
    if (ttl_us < policy.min_result_us || ttl_us > policy.max_result_us)
        throw InputError(InputError::Kind::invalid_parameter,
                         "result TTL " + seconds_text(ttl_us) + " is outside the policy of scope " + quoted_excerpt(scope) + ": [" +
                             seconds_text(policy.min_result_us) + ", " + seconds_text(policy.max_result_us) + "]");
}

const char* outcome_word(BeginDecision d) {
    switch (d) {
        case BeginDecision::reclaim: return "claimed";
        case BeginDecision::in_progress_duplicate: return "in_progress_duplicate";
        case BeginDecision::completed_duplicate: return "completed_duplicate";
        case BeginDecision::expired_duplicate: return "expired_duplicate";
        case BeginDecision::conflict: return "conflict";
    }
    return "unknown";
}

BeginDecision decide_begin(const KeyRecord& key, const std::optional<std::string>& fingerprint, std::int64_t now_us) {
    // A forgotten key (past its tombstone) is a new key: nothing is left to conflict with.
    if (key.state == KeyState::completed && now_us >= key.tombstone_expires_us) return BeginDecision::reclaim;
    if (fingerprint && key.fingerprint && *fingerprint != *key.fingerprint) return BeginDecision::conflict;
    if (key.state == KeyState::in_progress)
        return now_us >= key.lease_expires_us ? BeginDecision::reclaim : BeginDecision::in_progress_duplicate;
    return now_us >= key.result_expires_us ? BeginDecision::expired_duplicate : BeginDecision::completed_duplicate;
}

}  // namespace whizbang::core
