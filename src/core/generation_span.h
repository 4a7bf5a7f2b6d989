// The time spans of dedup generations (DESIGN §3.6 "Generations", issue 23): which span a
// record's first_seen_at belongs to, the span to create for a time no generation covers yet,
// a generation's table name, and when a generation has left the retention window.
//
// Times are PostgreSQL timestamptz values: microseconds since 2000-01-01 00:00 UTC. Spans are
// aligned to whole periods since that instant (a day by default, so generations start at
// midnight UTC). A span never overlaps one that exists: after a change of the period the new
// spans fill the gaps between the old ones, so existing generations keep their bounds.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "no_postgres.h"

namespace whizbang::core::generations {

constexpr std::int64_t kMicrosPerHour = 3600LL * 1000000LL;

struct Span {
    std::int64_t start = 0;  // inclusive
    std::int64_t end = 0;    // exclusive
    bool operator==(const Span& o) const { return start == o.start && end == o.end; }
};

// The start of the period that holds t (floor, also before 2000).
std::int64_t period_start(std::int64_t t, std::int64_t period);

// The existing span holding t, if any (`existing`: sorted by start, not overlapping).
std::optional<Span> span_holding(const std::vector<Span>& existing, std::int64_t t);

// The span to create for t, which no existing span holds: t's period, cut where it meets
// existing spans.
Span span_for(const std::vector<Span>& existing, std::int64_t t, std::int64_t period);

// The spans to create so that [from, until) is covered, in order.
std::vector<Span> spans_to_cover(const std::vector<Span>& existing, std::int64_t from, std::int64_t until,
                                 std::int64_t period);

// A span has left the window when every record it can hold is older than now - retention.
inline bool left_window(const Span& s, std::int64_t now, std::int64_t retention) { return s.end <= now - retention; }

// Where a store's p_now falls against the window it may make generations in (issue 30 item
// 10), at clock time `now` (the transaction's start). A generation that exists takes the record
// (made by maintenance at its p_now: a test simulating another time runs maintenance there
// first). Else the span it would get is `expired` when it has left the window (the delivery is
// looked up, not recorded, and nothing is made), `too_far_ahead` when it starts after
// now + period (maintenance makes the generation of now + period ahead; a store makes none
// further: each generation costs every new id a look-up), else `inside`.
enum class Placement { inside, expired, too_far_ahead };
Placement place(const std::vector<Span>& existing, std::int64_t p_now, std::int64_t now, std::int64_t retention,
                std::int64_t period);

// The table name of a generation: <base>_g<YYYYMMDD> for a span that starts at midnight UTC,
// else <base>_g<YYYYMMDD>t<HHMM> (UTC), e.g. wh_message_deduplication_g20261202.
std::string generation_name(const std::string& base, const Span& s);

// t as an ISO 8601 UTC literal, e.g. '2026-12-02 00:00:00.000000+00': read alike under every
// DateStyle and TimeZone, for partition bounds written into DDL.
std::string utc_literal(std::int64_t t);

}  // namespace whizbang::core::generations
