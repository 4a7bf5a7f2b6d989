// Options of the HTTP and AMQP sinks that are not part of their URI (an HTTP URI's query string
// belongs to the target), read from the environment once, when the sink is made.
#pragma once

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "sink.h"

namespace whizbang::relay {

// The environment variable `name` as a whole number in [min, max], or `fallback` when unset or
// empty. Anything else is a configuration mistake: a permanent SinkError naming the variable,
// rather than a silently ignored setting.
inline int64_t env_integer(const char* name, int64_t fallback, int64_t min, int64_t max) {
  const char* text = std::getenv(name);
  if (text == nullptr || *text == '\0') return fallback;
  errno = 0;
  char* end = nullptr;
  const long long value = std::strtoll(text, &end, 10);
  if (errno != 0 || *end != '\0' || value < min || value > max) {
    throw SinkError(std::string(name) + "=\"" + text + "\" is not a whole number from " + std::to_string(min) +
                        " to " + std::to_string(max),
                    false);
  }
  return value;
}

}  // namespace whizbang::relay
