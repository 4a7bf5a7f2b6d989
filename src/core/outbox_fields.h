// The fields whizbang-relay reads off an emitted outbox message (DESIGN §3.10): the content of
// pg_logical_emit_message(true, 'whizbang.outbox', …) is one JSON object with the envelope of
// store_outbox_messages. The relay passes the object on as it is; sinks route by these fields
// (an HTTP header, an AMQP routing key) without parsing JSON themselves.
//
// A strict reader (RFC 8259) rather than canonical_json: that one renders a whole document
// canonically, while the relay needs four members of the top level and the text untouched.
#pragma once

#include <string>
#include <string_view>

#include "no_postgres.h"

namespace whizbang::core {

struct OutboxFields {
    std::string message_id;    // MessageId, canonical lowercase UUID text
    std::string destination;   // Destination
    std::string message_type;  // MessageType
    std::string stream_id;     // StreamId as canonical UUID text, empty when null or absent
};

// Reads the top-level members MessageId (a UUID, required), Destination and MessageType (strings,
// required) and StreamId (a UUID or null, optional) of `json`, which must be one valid JSON
// object. Other members are checked for syntax only. A repeated member counts by its last value,
// as jsonb keeps it. Throws InputError: invalid_json for malformed text, invalid_parameter for a
// missing or mistyped field, limit_exceeded for nesting deeper than kMaxJsonDepth.
OutboxFields read_outbox_fields(std::string_view json);

// `json` on one line: raw line breaks, which valid JSON has only as whitespace between tokens
// (inside strings they must be escaped), become spaces. An NDJSON line holds the message whole.
std::string single_line(std::string_view json);

}  // namespace whizbang::core
