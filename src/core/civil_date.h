// Calendar dates from day counts, without the C library's time zone or range limits: used for
// names and texts whizbang writes in UTC whatever the server's settings (generation names,
// the WAL outbox's CreatedAt).
#pragma once

#include <cstdint>

#include "no_postgres.h"

namespace whizbang::core {

// The proleptic Gregorian date of a day count since 1970-01-01 (negative before it).
void civil_from_days(std::int64_t days_since_1970, int& year, unsigned& month, unsigned& day);

}  // namespace whizbang::core
