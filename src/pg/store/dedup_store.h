// The write path for new message ids: native speculative insertion, one index descent per
// new id (DESIGN §7: the cost of a new message is index and heap writes, not parsing).
#pragma once

#include <string>
#include <vector>

#include "core/dedup_plan.h"
#include "pg/boundary/bridge.h"

namespace whizbang::pg {

// Inserts, in key order, every key of `keys` that may be recorded (recording_element >= 0)
// and is not on record yet. `on_record` (sized like keys) is set to 1 for keys that were
// already on record or may only be looked up: the caller passes those to the upsert.
// Returns refused, having written nothing, when the table has triggers, row security or
// unique indexes other than its primary key: the upsert then handles every key; and
// no_generation when the table is in generations and none holds `now` (generations.h).
// `function_name` names the SQL function in errors (read-only transaction, recovery).
// partitions[k]: the distribution column of keys[k] (-1: NULL, a single server).
// found_at (sized like keys, filled with kNotFound): on a table in generations, the
// first_seen_at of the record found for a key on record, which names its generation.
constexpr TimestampTz kNotFound = DT_NOBEGIN;
// target_sealed: the generation of `now` was sealed between the store's unsealing and this call
// (dedup_filters.h): nothing was written.
enum class NativeInsert { done, refused, no_generation, target_sealed };

NativeInsert insert_new_keys(const char* function_name, const std::string& consumer, TimestampTz now,
                     const std::vector<core::DedupKey>& keys, const std::vector<int>& partitions,
                     std::vector<char>& on_record, std::vector<TimestampTz>& found_at);

}  // namespace whizbang::pg
