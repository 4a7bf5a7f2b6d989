// UUIDs of RFC 9562: version 5 (name-based, SHA-1) and version 7 (time-ordered).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "no_postgres.h"

namespace whizbang::core {

using Uuid = std::array<std::uint8_t, 16>;

// 6ba7b811-9dad-11d1-80b4-00c04fd430c8, RFC 9562 appendix C.
extern const Uuid kUrlNamespace;

Uuid uuid_v5(const Uuid& ns, std::string_view name);

// UUIDv5 in the URL namespace of the name `<octet length of source>:<source><id>`.
// The length prefix keeps ("ab", "c") and ("a", "bc") apart.
Uuid event_uuid(std::string_view source, std::string_view id);

// Canonical 8-4-4-4-12 lowercase text.
std::string to_string(const Uuid& u);

// Parses the forms PostgreSQL's uuid input accepts for JSON fields: 32 hex digits, with or
// without hyphens after any group of four, optionally in braces; case-insensitive.
// std::nullopt for anything else.
std::optional<Uuid> parse_uuid(std::string_view text);

// Generates UUIDv7 values: 48-bit Unix milliseconds, version 7, 12-bit rand_a, variant 10,
// 62-bit rand_b. Values from one generator are strictly increasing as long as the requested
// millisecond does not go backwards: within one millisecond (or when asked for an earlier
// millisecond than the last one by less than kMaxBackwardMs) the 74 random bits of the last
// value are incremented instead of redrawn. An earlier time beyond that is honoured as asked.
class UuidV7Generator {
public:
    static constexpr std::int64_t kMaxBackwardMs = 10000;
    // `random` supplies 10 bytes of entropy (only used when a fresh value is drawn).
    Uuid next(std::int64_t unix_ms, const std::array<std::uint8_t, 10>& random);

private:
    Uuid last_{};
    std::int64_t last_ms_ = -1;
};

}  // namespace whizbang::core
