// Test driver of the relay's HTTP and AMQP sinks (test/scripts/relay_http.sh,
// relay_rabbitmq.sh): `sink_check URI` reads messages from stdin, one a line as
//   MessageId <TAB> Destination <TAB> MessageType <TAB> StreamId or empty <TAB> JSON
// (the first four with \\t, \\r, \\n and \\\\ escapes),
// publishes each, and flushes at an empty line and at the end of input, printing
// "flushed N" (N = messages so far) once flush() returned. A SinkError ends it with its text on
// stderr and exit status 2 (permanent) or 3 (transient); 1 is a usage or input error.
// Reading line by line lets a test act between flushes (stop a broker, hold an answer back).
#include <cstdio>
#include <iostream>
#include <memory>
#include <string>

#include "relay/sink.h"
#include "relay/sinks.h"

namespace whizbang::relay {

// The relay's make_sink lives in its own program; this driver names only the sinks under test.
std::unique_ptr<Sink> make_sink(const std::string& uri) {
  auto starts = [&](const char* prefix) { return uri.rfind(prefix, 0) == 0; };
#ifdef WHIZBANG_RELAY_HTTP
  if (starts("http://") || starts("https://")) return make_http_sink(uri);
#endif
#ifdef WHIZBANG_RELAY_AMQP
  if (starts("amqp://") || starts("amqps://")) return make_amqp_sink(uri);
#endif
  (void)starts;
  throw SinkError("sink_check: no sink for \"" + uri + "\" in this build", false);
}

}  // namespace whizbang::relay

namespace {

// A commit time every message carries, so that a test can check the AMQP timestamp property.
constexpr uint64_t kCommitTimeUs = 1800000000000000ULL;  // 2027-01-15T08:00:00Z

// The first four fields may carry \t, \r, \n and \\ escapes, so that a test can send a
// Destination with a line break (the JSON field has its own escaping).
std::string unescape(const std::string& field) {
  std::string out;
  for (size_t i = 0; i < field.size(); ++i) {
    if (field[i] != '\\' || i + 1 == field.size()) {
      out += field[i];
      continue;
    }
    const char c = field[++i];
    out += c == 't' ? '\t' : c == 'r' ? '\r' : c == 'n' ? '\n' : c;
  }
  return out;
}

bool parse_line(const std::string& line, whizbang::relay::RelayMessage& m) {
  std::string fields[4];
  size_t from = 0;
  for (auto& field : fields) {
    const size_t tab = line.find('\t', from);
    if (tab == std::string::npos) return false;
    field = unescape(line.substr(from, tab - from));
    from = tab + 1;
  }
  m.id = fields[0];
  m.destination = fields[1];
  m.type = fields[2];
  m.stream = fields[3];
  m.json = line.substr(from);
  m.commit_time_us = kCommitTimeUs;
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  using whizbang::relay::SinkError;
  if (argc != 2) {
    std::fprintf(stderr, "usage: sink_check URI < messages.tsv\n");
    return 1;
  }
  try {
    auto sink = whizbang::relay::make_sink(argv[1]);
    std::string line;
    size_t published = 0, lineno = 0;
    bool pending = false;
    auto flush = [&] {
      sink->flush();
      std::printf("flushed %zu\n", published);
      std::fflush(stdout);
      pending = false;
    };
    while (std::getline(std::cin, line)) {
      ++lineno;
      if (line.empty()) {
        flush();
        continue;
      }
      whizbang::relay::RelayMessage m;
      if (!parse_line(line, m)) {
        std::fprintf(stderr, "sink_check: line %zu: expected 5 tab-separated fields\n", lineno);
        return 1;
      }
      sink->publish(m);
      ++published;
      pending = true;
    }
    if (pending || published == 0) flush();
    return 0;
  } catch (const SinkError& e) {
    std::fprintf(stderr, "sink_check: %s SinkError: %s\n", e.transient() ? "transient" : "permanent", e.what());
    return e.transient() ? 3 : 2;
  }
}
