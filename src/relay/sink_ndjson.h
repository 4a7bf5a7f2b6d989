// ndjson:PATH and ndjson:- (sink_ndjson.cpp): the sink every build has.
#pragma once

#include <memory>
#include <string>

#include "relay/sink.h"

namespace whizbang::relay {

// `path` is what follows "ndjson:" ("-" is stdout).
std::unique_ptr<Sink> make_ndjson_sink(const std::string& path);

}  // namespace whizbang::relay
