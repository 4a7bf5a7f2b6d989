// What a relay sink makes of a destination's answer (issue 32, DESIGN §3.10): acknowledged,
// worth another attempt, or refused for good. Pure so that the rules are unit-tested without a
// web server or a broker; the sinks in src/relay only map their library's codes onto these.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "no_postgres.h"

namespace whizbang::core {

enum class Delivery {
    kAcknowledged,  // the destination has the message: the relay may confirm past it
    kRetry,         // the destination could not take it now; the same request may succeed later
    kRefused,       // the destination will not take it as sent: an operator must look
};

// An HTTP status of a POSTed message: 2xx acknowledged; 408 (request timeout), 429 (too many
// requests) and every 5xx retried, since the server says the failure was its own or momentary;
// everything else refused: other 4xx mean the request itself is wrong and resending the same
// bytes cannot help, and 1xx/3xx as a final answer mean the URL is not the endpoint (a redirect
// is not followed: re-POSTing to wherever it points is not what the operator configured).
Delivery http_status_delivery(long status);

// Retry-After in its delay-seconds form (RFC 9110 §10.2.3): a non-negative decimal integer,
// optional surrounding whitespace. The HTTP-date form and anything else give std::nullopt (the
// caller falls back to its own backoff). Values beyond `max_seconds` are cut to it.
std::optional<std::int64_t> parse_retry_after_seconds(std::string_view value, std::int64_t max_seconds);

// Whether an AMQP 0-9-1 reply code of a channel.close or connection.close means the same
// publish may succeed on a new connection: 320 connection-forced (a broker shutting down or an
// operator closing connections), 405 resource-locked, 506 resource-error, 541 internal-error.
// Every other code (403 access-refused, 404 not-found for a missing exchange, 406
// precondition-failed, 530 not-allowed for a vhost, the protocol errors) is a configuration or
// program error that reconnecting repeats.
bool amqp_reply_code_transient(int reply_code);

}  // namespace whizbang::core
