#include "generation_span.h"

#include "civil_date.h"

#include <algorithm>
#include <cstdio>

namespace whizbang::core::generations {
namespace {

constexpr std::int64_t kMicrosPerDay = 24 * kMicrosPerHour;
// Spans count from 2000-01-01 (PostgreSQL's epoch).
constexpr std::int64_t kDays1970To2000 = 10957;

std::int64_t floor_div(std::int64_t a, std::int64_t b) { return a / b - ((a % b != 0) && ((a < 0) != (b < 0)) ? 1 : 0); }

}  // namespace

std::int64_t period_start(std::int64_t t, std::int64_t period) { return floor_div(t, period) * period; }

std::optional<Span> span_holding(const std::vector<Span>& existing, std::int64_t t) {
    auto after = std::upper_bound(existing.begin(), existing.end(), t,
                                  [](std::int64_t v, const Span& s) { return v < s.start; });
    if (after == existing.begin()) return std::nullopt;
    const Span& s = *(after - 1);
    if (t < s.end) return s;
    return std::nullopt;
}

Span span_for(const std::vector<Span>& existing, std::int64_t t, std::int64_t period) {
    Span s{period_start(t, period), period_start(t, period) + period};
    for (const Span& e : existing) {
        if (e.end <= t) s.start = std::max(s.start, e.end);
        if (e.start > t) s.end = std::min(s.end, e.start);
    }
    return s;
}

std::vector<Span> spans_to_cover(const std::vector<Span>& existing, std::int64_t from, std::int64_t until,
                                 std::int64_t period) {
    std::vector<Span> all = existing, made;
    for (std::int64_t t = from; t < until;) {
        if (std::optional<Span> held = span_holding(all, t)) {
            t = held->end;
            continue;
        }
        const Span s = span_for(all, t, period);
        made.push_back(s);
        all.insert(std::upper_bound(all.begin(), all.end(), s, [](const Span& a, const Span& b) { return a.start < b.start; }),
                   s);
        t = s.end;
    }
    return made;
}

Placement place(const std::vector<Span>& existing, std::int64_t p_now, std::int64_t now, std::int64_t retention,
                std::int64_t period) {
    if (span_holding(existing, p_now)) return Placement::inside;
    const Span s = span_for(existing, p_now, period);
    if (left_window(s, now, retention)) return Placement::expired;
    if (s.start > now + period) return Placement::too_far_ahead;
    return Placement::inside;
}

std::string generation_name(const std::string& base, const Span& s) {
    const std::int64_t day = floor_div(s.start, kMicrosPerDay);
    const std::int64_t in_day = s.start - day * kMicrosPerDay;
    int y = 0;
    unsigned m = 0, d = 0;
    core::civil_from_days(day + kDays1970To2000, y, m, d);
    char buf[32];
    if (in_day == 0) {
        std::snprintf(buf, sizeof buf, "_g%04d%02u%02u", y, m, d);
    } else {
        const std::int64_t minutes = in_day / (60LL * 1000000LL);
        std::snprintf(buf, sizeof buf, "_g%04d%02u%02ut%02d%02d", y, m, d, static_cast<int>(minutes / 60),
                      static_cast<int>(minutes % 60));
    }
    return base + buf;
}

std::string utc_literal(std::int64_t t) {
    const std::int64_t day = floor_div(t, kMicrosPerDay);
    const std::int64_t in_day = t - day * kMicrosPerDay;
    int y = 0;
    unsigned m = 0, d = 0;
    core::civil_from_days(day + kDays1970To2000, y, m, d);
    const std::int64_t seconds = in_day / 1000000;
    char buf[48];
    std::snprintf(buf, sizeof buf, "%04d-%02u-%02u %02d:%02d:%02d.%06d+00", y, m, d, static_cast<int>(seconds / 3600),
                  static_cast<int>(seconds / 60 % 60), static_cast<int>(seconds % 60),
                  static_cast<int>(in_day % 1000000));
    return buf;
}

}  // namespace whizbang::core::generations
