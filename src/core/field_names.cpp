#include "field_names.h"

#include <algorithm>

namespace whizbang::core {
namespace {

char fold(char c) { return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c; }

}  // namespace

const std::vector<std::string_view>& inbox_fields() {
    static const std::vector<std::string_view> fields = {"MessageId", "HandlerName", "MessageType", "Envelope",
                                                         "Metadata",  "Scope",       "StreamId",    "IsEvent",
                                                         "SentAt",    "ScheduledFor"};
    return fields;
}

const std::vector<std::string_view>& outbox_fields() {
    static const std::vector<std::string_view> fields = {"MessageId", "Destination", "MessageType",
                                                         "Envelope",  "Metadata",    "Scope",
                                                         "StreamId",  "IsEvent",     "ScheduledFor"};
    return fields;
}

std::size_t folded_distance(std::string_view a, std::string_view b, std::size_t limit) {
    const std::size_t n = a.size(), m = b.size();
    if ((n > m ? n - m : m - n) > limit) return limit + 1;
    // Three rows of the dynamic-programming table, on the stack for names as short as field
    // names (this runs for every unknown key of every element); longer input was mostly
    // rejected by the length difference above.
    constexpr std::size_t kStackRow = 64;
    std::size_t stack_rows[3][kStackRow];
    std::vector<std::size_t> heap_rows;
    std::size_t *before = stack_rows[0], *previous = stack_rows[1], *current = stack_rows[2];
    if (m + 1 > kStackRow) {
        heap_rows.resize(3 * (m + 1));
        before = heap_rows.data();
        previous = before + (m + 1);
        current = previous + (m + 1);
    }
    for (std::size_t j = 0; j <= m; ++j) previous[j] = j;
    for (std::size_t i = 1; i <= n; ++i) {
        current[0] = i;
        std::size_t row_min = current[0];
        for (std::size_t j = 1; j <= m; ++j) {
            const bool same = fold(a[i - 1]) == fold(b[j - 1]);
            current[j] = std::min({previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (same ? 0 : 1)});
            if (i > 1 && j > 1 && fold(a[i - 1]) == fold(b[j - 2]) && fold(a[i - 2]) == fold(b[j - 1]))
                current[j] = std::min(current[j], before[j - 2] + 1);
            row_min = std::min(row_min, current[j]);
        }
        if (row_min > limit) return limit + 1;  // every later row is at least as far
        std::swap(before, previous);
        std::swap(previous, current);
    }
    return std::min(previous[m], limit + 1);
}

std::size_t near_miss_limit(std::string_view known) { return known.size() <= 6 ? 1 : 2; }

std::optional<std::string_view> near_miss(std::string_view name, const std::vector<std::string_view>& known) {
    std::optional<std::string_view> best;
    std::size_t best_distance = 0;
    for (std::string_view k : known) {
        const std::size_t limit = near_miss_limit(k);
        const std::size_t d = folded_distance(name, k, limit);
        if (d <= limit && (!best || d < best_distance)) {
            best = k;
            best_distance = d;
        }
    }
    return best;
}

}  // namespace whizbang::core
