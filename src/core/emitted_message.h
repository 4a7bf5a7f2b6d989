// The payload of one message of the WAL outbox (DESIGN §3.10): emit_outbox_messages writes it
// as a transactional logical message with the prefix kEmittedPrefix, and whizbang-relay hands
// it to a sink unchanged. It is store_outbox_messages' envelope, so that a receiver can pass
// it straight to store_inbox_messages as an element of p_messages.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "uuid.h"
#include "no_postgres.h"

namespace whizbang::core {

// pg_logical_emit_message's prefix of every whizbang outbox message; the relay skips others.
inline constexpr std::string_view kEmittedPrefix = "whizbang.outbox";

struct EmittedMessage {
    Uuid id{};
    std::string_view destination;
    std::string_view message_type;
    std::optional<Uuid> stream_id;
    bool is_event = false;
    // JSON texts, as jsonb prints them (one line); nullopt prints null.
    std::optional<std::string_view> scope_json, metadata_json;
    std::string_view envelope_json;
    std::int64_t created_at_unix_us = 0;
};

// Appends the message as one JSON object without a newline, its fields always in this order:
// MessageId, Destination, MessageType, StreamId, IsEvent, Scope, Metadata, Envelope, CreatedAt.
void append_emitted_json(std::string& out, const EmittedMessage& message);

// Appends `text` as a JSON string literal: quotes, backslashes and control characters escaped,
// everything else (UTF-8 included) as it is.
void append_json_string(std::string& out, std::string_view text);

// RFC 3339 in UTC with microseconds, whatever the session's TimeZone or DateStyle:
// 2026-12-07T10:00:00.123456+00:00. Years 1 to 9999.
std::string utc_timestamp_text(std::int64_t unix_us);

}  // namespace whizbang::core
