// The p_messages argument of the store functions (DESIGN §3.2, §3.3): a jsonb array of message
// objects with PascalCase fields, read in one pass over the binary container.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/uuid.h"
#include "pg/boundary/bridge.h"
#include "pg/claim/work.h"

namespace whizbang::pg {

struct Message {
    core::Uuid id{};
    std::string target;  // HandlerName (inbox) or Destination (outbox)
    std::string message_type;
    Datum envelope = 0;  // Jsonb*
    std::optional<Datum> metadata, scope;
    std::optional<core::Uuid> stream_id;
    bool is_event = false;
    std::optional<TimestampTz> sent_at, scheduled_for;
    std::optional<std::string> fingerprint;  // of Envelope (inbox_receive only)
};

// One Message per element, in input order. A missing required field, a wrong type or an invalid
// value raises 22023 naming the element and the field (echoed values cut by quoted_excerpt);
// unknown fields are ignored, except a near miss of a known one (core::near_miss: 22023 with a
// hint naming it). Envelope, Metadata and Scope nesting deeper than core::kMaxJsonDepth is
// 54000. The inbox reads HandlerName and SentAt, the outbox Destination. `with_fingerprints`:
// fingerprint each Envelope (core::fingerprint).
std::vector<Message> parse_messages(FunctionCallInfo fcinfo, Source source, bool with_fingerprints);

// One row (message_id, stream_id, third) of the store functions' results into the
// materialized set: stream_id NULL without a StreamId. Called on the PostgreSQL side (pg_call).
void put_message_row(ReturnSetInfo* rsinfo, const Message& message, Datum third);

}  // namespace whizbang::pg
