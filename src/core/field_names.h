// The element fields of p_messages (DESIGN §3.2, §3.3) and the near-miss rule: an unknown
// field is ignored (forward compatibility) unless it is a known field's name in another letter
// case or within a few letters of it (`ScheduleFor`, `messageId`), which is a mistake.
#pragma once

#include <cstddef>
#include <optional>
#include <string_view>
#include <vector>

#include "no_postgres.h"

namespace whizbang::core {

// The fields an inbox (store_inbox_messages, inbox_receive) or outbox element is read for.
const std::vector<std::string_view>& inbox_fields();
const std::vector<std::string_view>& outbox_fields();

// Edit distance of ASCII-case-folded `a` and `b` (optimal string alignment: insertions,
// deletions, substitutions and swaps of neighbours cost 1), or `limit` + 1 when it exceeds
// `limit` (so a long name costs nothing to reject).
std::size_t folded_distance(std::string_view a, std::string_view b, std::size_t limit);

// How far a name may be from `known` and still count as a near miss of it: 2, or 1 for names
// of at most 6 characters (`SentAt`, `Scope`), where two edits reach unrelated names
// (`SentBy`, `Slope`).
std::size_t near_miss_limit(std::string_view known);

// The known field `name` is a near miss of (the closest; the first on a tie), or nullopt.
// `name` itself must not be one of `known`.
std::optional<std::string_view> near_miss(std::string_view name, const std::vector<std::string_view>& known);

}  // namespace whizbang::core
