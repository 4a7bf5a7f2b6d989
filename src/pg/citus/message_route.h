// The store calls on a distributed install (docs/scaleout.md): store_inbox_messages,
// inbox_receive and store_outbox_messages split their batch by shard, each message going where
// its partition (its stream's, or its own) lives, and route each part to its node
// (citus_route.h); the rows that come back are returned in input order, as on one server.
#pragma once

#include <vector>

#include "pg/store/message_parse.h"

namespace whizbang::pg {

enum class RoutedRows {
    one_per_input,  // inbox_receive, store_outbox_messages: one row per element, in order
    new_only,       // store_inbox_messages: one row per new element, in order (the parts
                    // answer every element, flagged, so a short answer is an error here too)
};

// Routes the batch in argument 0 of the calling whizbang `function` (its other arguments passed
// on as they came) and fills the caller's materialized result (three columns). `messages` are
// the parsed elements of the batch, in order. Returns how many rows say "created": column 3
// true (store_outbox_messages) or outcome 'new' (inbox_receive).
std::size_t route_messages(FunctionCallInfo fcinfo, const char* function, const std::vector<Message>& messages,
                           int partition_count, RoutedRows rows);

}  // namespace whizbang::pg
