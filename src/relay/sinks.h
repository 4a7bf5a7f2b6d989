// The sinks make_sink (make_sink.cpp) chooses from by the URI's scheme. Each lives in a file of
// its own; HTTP and RabbitMQ are compiled in only when the build defines WHIZBANG_RELAY_HTTP or
// WHIZBANG_RELAY_AMQP (they need libcurl or librabbitmq, which a plain build does without).
#pragma once

#include <memory>
#include <string>

#include "relay/sink.h"

namespace whizbang::relay {

// ndjson:PATH: `path` is what follows "ndjson:" ("-" is stdout). sink_ndjson.cpp.
std::unique_ptr<Sink> make_ndjson_sink(const std::string& path);
// http://… or https://…, the whole URI. sink_http.cpp (with WHIZBANG_RELAY_HTTP).
std::unique_ptr<Sink> make_http_sink(const std::string& uri);
// amqp://… or amqps://…, the whole URI. sink_amqp.cpp (with WHIZBANG_RELAY_AMQP).
std::unique_ptr<Sink> make_amqp_sink(const std::string& uri);

}  // namespace whizbang::relay
