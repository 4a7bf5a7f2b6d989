// The sinks that need a client library: each is compiled only when its library was found
// (src/relay/sinks.mk defines WHIZBANG_RELAY_HTTP / WHIZBANG_RELAY_AMQP), and make_sink names
// them only then.
#pragma once

#include <memory>
#include <string>

#include "sink.h"

namespace whizbang::relay {

// http://… or https://…: POSTs each message (libcurl). See docs/relay-sinks.md.
std::unique_ptr<Sink> make_http_sink(const std::string& uri);

// amqp://… or amqps://…: publishes to RabbitMQ with publisher confirms (librabbitmq).
std::unique_ptr<Sink> make_amqp_sink(const std::string& uri);

}  // namespace whizbang::relay
