// What whizbang-relay hands a committed transaction's messages to. One sink per relay run,
// named by a URI on the command line (make_sink). The relay confirms the slot's flush
// position only after flush() returned for the whole transaction, so a sink must not return
// from flush() before its destination acknowledged every message published since the last
// flush() (a file: written and fsync'd; HTTP: a 2xx; RabbitMQ: a publisher confirm).
#pragma once

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>

namespace whizbang::relay {

// One outbox message as emitted by whizbang.emit_outbox_messages: `json` is the emitted
// payload, a JSON object with the store_outbox_messages envelope's fields (MessageId,
// Destination, MessageType, StreamId, IsEvent, Scope, Metadata, Envelope, CreatedAt); the
// other members are read off it so that sinks need not parse JSON.
struct RelayMessage {
  std::string id;           // MessageId, a UUID in canonical text form
  std::string destination;  // Destination
  std::string type;         // MessageType
  std::string stream;       // StreamId, or empty when null
  std::string json;         // the whole emitted object, one line, no trailing newline
  uint64_t commit_lsn = 0;  // the commit LSN of the transaction that emitted it
  uint64_t commit_time_us = 0;  // its commit time, microseconds since the Unix epoch
};

// A destination that refused or could not be reached. The relay does not confirm, and
// either retries (transient) or exits non-zero (permanent: configuration, refused auth).
class SinkError : public std::runtime_error {
 public:
  SinkError(const std::string& what, bool transient) : std::runtime_error(what), transient_(transient) {}
  bool transient() const { return transient_; }

 private:
  bool transient_;
};

class Sink {
 public:
  virtual ~Sink() = default;
  // Hands over one message; may buffer or send at once. Throws SinkError.
  virtual void publish(const RelayMessage& message) = 0;
  // Returns once every message published since the last flush() is acknowledged by the
  // destination. Throws SinkError; after a throw the relay starts over from the slot's
  // confirmed position, so the sink may see those messages again.
  virtual void flush() = 0;
  // A short description for logs ("ndjson:/var/log/out.ndjson", "amqp://host/vhost").
  virtual std::string describe() const = 0;
};

// ndjson:PATH (appends; ndjson:- is stdout), http://… or https://… (POST each message),
// amqp://… or amqps://… (RabbitMQ with publisher confirms). Options a sink takes come from
// the URI's query string. Throws SinkError (not transient) for an unknown scheme or a
// sink this build was made without.
std::unique_ptr<Sink> make_sink(const std::string& uri);

}  // namespace whizbang::relay
