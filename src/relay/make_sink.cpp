// make_sink (sink.h): the sink a --sink URI names, by its scheme.
#include <string>

#include "relay/sink.h"
#include "relay/sink_ndjson.h"
#include "relay/sinks.h"

namespace whizbang::relay {
namespace {

bool starts_with(const std::string& s, const char* prefix) { return s.rfind(prefix, 0) == 0; }

}  // namespace

std::unique_ptr<Sink> make_sink(const std::string& uri) {
    if (starts_with(uri, "ndjson:")) {
        const std::string path = uri.substr(7);
        if (path.empty()) throw SinkError("ndjson: needs a file name (ndjson:/path/file.ndjson) or - for stdout", false);
        return make_ndjson_sink(path);
    }
    if (starts_with(uri, "http://") || starts_with(uri, "https://")) {
#ifdef WHIZBANG_RELAY_HTTP
        return make_http_sink(uri);
#else
        throw SinkError("this whizbang-relay was built without the HTTP sink (rebuild with libcurl: see docs/relay.md)", false);
#endif
    }
    if (starts_with(uri, "amqp://") || starts_with(uri, "amqps://")) {
#ifdef WHIZBANG_RELAY_AMQP
        return make_amqp_sink(uri);
#else
        throw SinkError("this whizbang-relay was built without the RabbitMQ sink (rebuild with librabbitmq: see docs/relay.md)", false);
#endif
    }
    throw SinkError("unknown sink '" + uri + "': expected ndjson:PATH, ndjson:-, http(s)://… or amqp(s)://…", false);
}

}  // namespace whizbang::relay
