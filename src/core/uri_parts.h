// The pieces of a sink URI the relay's sinks need beyond what their client libraries parse:
// the query string (options of the AMQP sink: librabbitmq's amqp_parse_url knows none) and a
// form of a URI fit for logs (no password).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "no_postgres.h"

namespace whizbang::core {

struct SplitUri {
    std::string base;   // everything before the first '?' (and before any '#')
    std::string query;  // between '?' and '#', without either; empty when there is none
};
SplitUri split_query(std::string_view uri);

// RFC 3986 percent-decoding; '+' stays '+' (it means a space only in HTML forms). std::nullopt
// for a '%' not followed by two hex digits.
std::optional<std::string> percent_decode(std::string_view text);

// The query's name=value pairs in order, both percent-decoded; a pair without '=' has an empty
// value; empty pairs ("a=1&&b=2") are skipped. std::nullopt when any part fails to decode.
std::optional<std::vector<std::pair<std::string, std::string>>> parse_query(std::string_view query);

// `uri` with the password of its userinfo ("scheme://user:password@host…") replaced by "***",
// for describe() and error messages: sink URIs end up in logs.
std::string redact_password(std::string_view uri);

// `value` made safe as an HTTP header field value (RFC 9110 §5.5): control characters (which
// could end the header and start another), DEL, bytes of non-ASCII UTF-8 (which many servers
// and proxies mangle) and '%' itself become %XX, so that the receiver can percent-decode the
// value back to the exact bytes. Plain printable ASCII, the common case, stays as it is.
std::string header_value_escape(std::string_view value);

}  // namespace whizbang::core
