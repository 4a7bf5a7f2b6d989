// Shared by the work-coordination functions (work.cpp, work_outcomes.cpp).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/uuid.h"
#include "pg/bridge.h"

namespace whizbang::pg {

// p_source: 'inbox' (or, where allowed, NULL for "every source"; returns ""). 'outbox' is
// refused with 0A000 until a version with the outbox is installed.
std::string source_arg(FunctionCallInfo fcinfo, int argno, bool allow_null);

// Moves inbox work to wh_dead_letters with its message; a NULL error keeps the last one.
void dead_letter(const std::vector<core::Uuid>& ids, const std::vector<std::string>& consumers,
                 const std::vector<std::optional<std::string>>& errors, TimestampTz now);

}  // namespace whizbang::pg
