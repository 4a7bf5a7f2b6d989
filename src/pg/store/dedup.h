// Recording deliveries in wh_message_deduplication, shared by the dedup functions and the inbox.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "core/dedup_plan.h"
#include "pg/boundary/bridge.h"

namespace whizbang::pg {

// p_consumer: required, at most 1024 bytes.
std::string consumer_arg(FunctionCallInfo fcinfo, int argno);

// Records every element (DESIGN §3.1) and returns one outcome per element, in input order.
// Marks elements sent before the replay horizon as expired first (replay_policy = reject).
// `function_name` names the calling SQL function in errors.
// The distribution column of a new dedup record (docs/scaleout.md): NULL on a single server.
using PartitionOfId = std::function<std::optional<int>(const core::Uuid&)>;

// `partition` empty: the record's own id's partition inside a routed call (shard_scope.h),
// NULL outside one.
std::vector<core::DedupOutcome> record_deliveries(const char* function_name, const std::string& consumer,
                                                  std::vector<core::DedupElement>& elements,
                                                  const std::vector<std::optional<TimestampTz>>& sent_at,
                                                  TimestampTz now, PartitionOfId partition = {});

}  // namespace whizbang::pg
