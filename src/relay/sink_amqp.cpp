// The RabbitMQ sink of whizbang-relay (issue 32), on librabbitmq: one connection, one channel in
// confirm mode. publish() sends basic.publish (mandatory, persistent) without waiting; flush()
// waits until the broker confirmed every publish since the last flush. A message the broker
// cannot route comes back as basic.return and is an error, never a silent drop. Any lost or
// closed connection is a SinkError: the relay starts over from its confirmed position with a
// new sink, so this class never reconnects by itself.
#if __has_include(<rabbitmq-c/amqp.h>)
#include <rabbitmq-c/amqp.h>
#include <rabbitmq-c/ssl_socket.h>
#include <rabbitmq-c/tcp_socket.h>
#else
#include <amqp.h>
#include <amqp_ssl_socket.h>
#include <amqp_tcp_socket.h>
#endif
#include <sys/time.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "core/confirm_window.h"
#include "core/delivery_verdict.h"
#include "core/uri_parts.h"
#include "relay/sink_env.h"
#include "relay/sinks.h"

namespace whizbang::relay {
namespace {

namespace core = whizbang::core;

constexpr amqp_channel_t kChannel = 1;
// AMQP short strings (routing key, message_id, type) hold at most 255 bytes.
constexpr size_t kMaxShortString = 255;
// Publishes awaiting their confirm before publish() waits for some (see there).
constexpr size_t kMaxUnconfirmed = 10000;

std::string text_of(amqp_bytes_t b) { return std::string(static_cast<const char*>(b.bytes), b.len); }
amqp_bytes_t bytes_of(const std::string& s) { return amqp_bytes_t{s.size(), const_cast<char*>(s.data())}; }

timeval to_timeval(std::chrono::microseconds us) {
  if (us.count() < 0) us = std::chrono::microseconds(0);
  return timeval{static_cast<time_t>(us.count() / 1000000), static_cast<suseconds_t>(us.count() % 1000000)};
}

// What the URI's query string may say. Unknown options are refused: a misspelt "exchange"
// must not quietly publish to the default exchange.
struct AmqpOptions {
  std::string exchange;  // "" is the default exchange: the routing key names the queue
};

AmqpOptions parse_options(const std::string& query, const std::string& shown) {
  AmqpOptions options;
  auto pairs = core::parse_query(query);
  if (!pairs) throw SinkError("amqp sink " + shown + ": the query string has a broken %-escape", false);
  for (const auto& [name, value] : *pairs) {
    if (name == "exchange") {
      options.exchange = value;
    } else {
      throw SinkError("amqp sink " + shown + ": unknown option \"" + name + "\" (known: exchange)", false);
    }
  }
  return options;
}

class AmqpSink : public Sink {
 public:
  explicit AmqpSink(const std::string& uri)
      : shown_(core::redact_password(uri)),
        timeout_(std::chrono::seconds(env_integer("WHIZBANG_RELAY_AMQP_TIMEOUT", 30, 1, 3600))) {
    const core::SplitUri split = core::split_query(uri);
    options_ = parse_options(split.query, shown_);
    try {
      connect(split.base);
    } catch (...) {
      // A constructor that throws gets no destructor call.
      if (conn_ != nullptr) amqp_destroy_connection(conn_);
      conn_ = nullptr;
      throw;
    }
  }

  ~AmqpSink() override {
    if (conn_ == nullptr) return;
    // A polite goodbye only on a healthy connection (each is an RPC bounded by the RPC timeout);
    // after an error the socket may be dead and the broker cleans up on its own.
    if (healthy_) {
      amqp_channel_close(conn_, kChannel, AMQP_REPLY_SUCCESS);
      amqp_connection_close(conn_, AMQP_REPLY_SUCCESS);
    }
    amqp_destroy_connection(conn_);
  }

  void publish(const RelayMessage& m) override {
    usable();
    if (m.destination.empty() || m.destination.size() > kMaxShortString) {
      throw SinkError("amqp sink " + shown_ + ": message " + m.id + ": Destination must have 1 to 255 bytes to be a routing key", false);
    }
    if (m.type.size() > kMaxShortString || m.id.size() > kMaxShortString) {
      throw SinkError("amqp sink " + shown_ + ": message " + m.id + ": MessageType longer than 255 bytes does not fit the AMQP type property", false);
    }
    amqp_basic_properties_t props{};
    props._flags = AMQP_BASIC_CONTENT_TYPE_FLAG | AMQP_BASIC_DELIVERY_MODE_FLAG | AMQP_BASIC_MESSAGE_ID_FLAG |
                   AMQP_BASIC_TYPE_FLAG | AMQP_BASIC_APP_ID_FLAG;
    props.content_type = amqp_cstring_bytes("application/json");
    props.delivery_mode = 2;  // persistent: a durable queue keeps it across a broker restart
    props.message_id = bytes_of(m.id);
    props.type = bytes_of(m.type);
    props.app_id = amqp_cstring_bytes("whizbang-relay");
    if (m.commit_time_us != 0) {
      props._flags |= AMQP_BASIC_TIMESTAMP_FLAG;
      props.timestamp = m.commit_time_us / 1000000;  // AMQP timestamps are whole seconds
    }
    amqp_table_entry_t header{};
    header.key = amqp_cstring_bytes("whizbang-stream-id");
    header.value.kind = AMQP_FIELD_KIND_UTF8;
    header.value.value.bytes = bytes_of(m.stream);
    // No stream: no headers at all, as the JSON's null has no AMQP string form.
    if (!m.stream.empty()) {
      props._flags |= AMQP_BASIC_HEADERS_FLAG;
      props.headers.num_entries = 1;
      props.headers.entries = &header;
    }

    const int status = amqp_basic_publish(conn_, kChannel, bytes_of(options_.exchange), bytes_of(m.destination),
                                          /*mandatory=*/1, /*immediate=*/0, &props, bytes_of(m.json));
    if (status != AMQP_STATUS_OK) {
      const bool bad_data = status == AMQP_STATUS_BAD_AMQP_DATA || status == AMQP_STATUS_TABLE_TOO_BIG;
      fail("publishing message " + m.id + ": " + amqp_error_string2(status) + (bad_data ? "" : close_reason()), !bad_data);
    }
    window_.published(m.id);
    // Take in whatever the broker sent meanwhile (confirms, a return, a close), without waiting:
    // an unread backlog of confirms would otherwise grow with a large transaction.
    while (read_frame(std::chrono::microseconds(0))) {
    }
    // A transaction of millions of messages must not keep millions unconfirmed (each costs
    // memory here and in the broker): past kMaxUnconfirmed, publishing waits for confirms.
    if (window_.outstanding() >= kMaxUnconfirmed) wait_for_confirms(kMaxUnconfirmed / 2);
  }

  void flush() override {
    usable();
    wait_for_confirms(0);
  }

  std::string describe() const override { return shown_; }

 private:
  [[noreturn]] void fail(const std::string& what, bool transient) {
    healthy_ = false;
    throw SinkError("amqp sink " + shown_ + ": " + what, transient);
  }

  // After an error the channel (or connection) may be closed: every later call fails the same
  // way instead of publishing into nothing.
  void usable() {
    if (!healthy_) throw SinkError("amqp sink " + shown_ + ": unusable after an earlier error", true);
  }

  // Throws for an RPC reply that is not a success; `what` says which step it was.
  void check_reply(amqp_rpc_reply_t r, const std::string& what) {
    switch (r.reply_type) {
      case AMQP_RESPONSE_NORMAL:
        return;
      case AMQP_RESPONSE_NONE:
        fail(what + ": no reply from the broker", true);
      case AMQP_RESPONSE_LIBRARY_EXCEPTION:
        fail(what + ": " + amqp_error_string2(r.library_error), true);
      case AMQP_RESPONSE_SERVER_EXCEPTION:
        if (r.reply.id == AMQP_CONNECTION_CLOSE_METHOD) {
          auto* c = static_cast<amqp_connection_close_t*>(r.reply.decoded);
          amqp_connection_close_ok_t ok{};
          amqp_send_method(conn_, 0, AMQP_CONNECTION_CLOSE_OK_METHOD, &ok);
          fail(what + ": connection closed by the broker: " + std::to_string(c->reply_code) + " " + text_of(c->reply_text),
               core::amqp_reply_code_transient(c->reply_code));
        }
        if (r.reply.id == AMQP_CHANNEL_CLOSE_METHOD) {
          auto* c = static_cast<amqp_channel_close_t*>(r.reply.decoded);
          amqp_channel_close_ok_t ok{};
          amqp_send_method(conn_, kChannel, AMQP_CHANNEL_CLOSE_OK_METHOD, &ok);
          fail(what + ": channel closed by the broker: " + std::to_string(c->reply_code) + " " + text_of(c->reply_text),
               core::amqp_reply_code_transient(c->reply_code));
        }
        fail(what + ": unexpected answer from the broker", true);
    }
    fail(what + ": unknown reply type", true);
  }

  void connect(const std::string& base) {
    std::vector<char> url(base.begin(), base.end());
    url.push_back('\0');
    amqp_connection_info info{};
    amqp_default_connection_info(&info);
    if (amqp_parse_url(url.data(), &info) != AMQP_STATUS_OK) {
      throw SinkError("amqp sink " + shown_ + ": not an AMQP URI (amqp://user:password@host:port/vhost?exchange=NAME)", false);
    }
    conn_ = amqp_new_connection();
    if (conn_ == nullptr) throw SinkError("amqp sink " + shown_ + ": out of memory", true);
    amqp_socket_t* socket = nullptr;
    if (info.ssl) {
      socket = amqp_ssl_socket_new(conn_);
      if (socket == nullptr) fail("cannot create a TLS socket", true);
      amqp_ssl_socket_set_verify_peer(socket, 1);
      amqp_ssl_socket_set_verify_hostname(socket, 1);
      const char* cacert = std::getenv("WHIZBANG_RELAY_AMQP_CACERT");
      if (cacert == nullptr || *cacert == '\0') cacert = "/etc/ssl/certs/ca-certificates.crt";
      if (amqp_ssl_socket_set_cacert(socket, cacert) != AMQP_STATUS_OK) {
        fail(std::string("cannot read the CA certificates ") + cacert + " (WHIZBANG_RELAY_AMQP_CACERT)", false);
      }
    } else {
      socket = amqp_tcp_socket_new(conn_);
      if (socket == nullptr) fail("cannot create a socket", true);
    }
    timeval tv = to_timeval(timeout_);
    amqp_set_handshake_timeout(conn_, &tv);
    amqp_set_rpc_timeout(conn_, &tv);
    const int opened = amqp_socket_open_noblock(socket, info.host, info.port, &tv);
    if (opened != AMQP_STATUS_OK) fail(std::string("cannot connect: ") + amqp_error_string2(opened), true);
    // No heartbeats: librabbitmq answers them only inside its own calls, and the relay may
    // leave the sink idle for longer than any interval; a dead connection shows instead as a
    // failed publish or an unconfirmed flush (WHIZBANG_RELAY_AMQP_TIMEOUT).
    check_reply(amqp_login(conn_, info.vhost, 0, 131072, /*heartbeat=*/0, AMQP_SASL_METHOD_PLAIN, info.user, info.password),
                "logging in");
    amqp_channel_open(conn_, kChannel);
    check_reply(amqp_get_rpc_reply(conn_), "opening a channel");
    if (!options_.exchange.empty()) {
      // Passive: the exchange must exist (the relay declares nothing). A missing one is a
      // configuration error, said now rather than at the first message.
      amqp_exchange_declare(conn_, kChannel, bytes_of(options_.exchange), amqp_cstring_bytes(""), /*passive=*/1,
                            /*durable=*/0, /*auto_delete=*/0, /*internal=*/0, amqp_empty_table);
      check_reply(amqp_get_rpc_reply(conn_), "checking exchange \"" + options_.exchange + "\"");
    }
    amqp_confirm_select(conn_, kChannel);
    check_reply(amqp_get_rpc_reply(conn_), "enabling publisher confirms");
  }

  // Why the broker closed the connection, when it said so before the socket broke (a broker
  // shutting down sends connection.close first): "; the broker closed the connection: 320 …",
  // else "". Only for the error message: the error is transient either way.
  std::string close_reason() {
    for (int i = 0; i < 1000; ++i) {
      amqp_frame_t frame;
      timeval none{0, 0};
      if (amqp_simple_wait_frame_noblock(conn_, &frame, &none) != AMQP_STATUS_OK) return "";
      if (frame.frame_type == AMQP_FRAME_METHOD && frame.payload.method.id == AMQP_CONNECTION_CLOSE_METHOD) {
        auto* c = static_cast<amqp_connection_close_t*>(frame.payload.method.decoded);
        return "; the broker closed the connection: " + std::to_string(c->reply_code) + " " + text_of(c->reply_text);
      }
    }
    return "";
  }

  // Reads frames until at most `outstanding` publishes await their confirm; gives up with a
  // transient error when the broker is silent for the timeout.
  void wait_for_confirms(size_t outstanding) {
    auto deadline = std::chrono::steady_clock::now() + timeout_;
    while (window_.outstanding() > outstanding) {
      const size_t before = window_.outstanding();
      const auto left = std::chrono::duration_cast<std::chrono::microseconds>(deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0 || !read_frame(left)) {
        fail("the broker did not confirm " + std::to_string(window_.outstanding()) + " message(s) within " +
                 std::to_string(timeout_.count()) + "s (WHIZBANG_RELAY_AMQP_TIMEOUT)",
             true);
      }
      // Confirms are coming: the timeout counts from the last one, not from the start.
      if (window_.outstanding() < before) deadline = std::chrono::steady_clock::now() + timeout_;
    }
  }

  // Reads and handles one frame, waiting up to `wait`. Returns false when none came in time.
  bool read_frame(std::chrono::microseconds wait) {
    amqp_frame_t frame;
    timeval tv = to_timeval(wait);
    const int status = amqp_simple_wait_frame_noblock(conn_, &frame, &tv);
    if (status == AMQP_STATUS_TIMEOUT) return false;
    if (status != AMQP_STATUS_OK) fail(std::string("connection lost: ") + amqp_error_string2(status), true);
    if (frame.frame_type != AMQP_FRAME_METHOD) return true;  // stray content of no interest
    switch (frame.payload.method.id) {
      case AMQP_BASIC_ACK_METHOD: {
        auto* ack = static_cast<amqp_basic_ack_t*>(frame.payload.method.decoded);
        window_.ack(ack->delivery_tag, ack->multiple != 0);
        return true;
      }
      case AMQP_BASIC_NACK_METHOD: {
        auto* nack = static_cast<amqp_basic_nack_t*>(frame.payload.method.decoded);
        const auto ids = window_.nack(nack->delivery_tag, nack->multiple != 0);
        std::string list;
        for (const auto& id : ids) list += (list.empty() ? "" : ", ") + id;
        // A nack is the broker's own trouble (RabbitMQ: an internal error of the queue); the
        // same message may be taken after a reconnect.
        fail("the broker refused (basic.nack) message(s) " + list, true);
      }
      case AMQP_BASIC_RETURN_METHOD: {
        auto* ret = static_cast<amqp_basic_return_t*>(frame.payload.method.decoded);
        std::string what = "message returned as unroutable (basic.return " + std::to_string(ret->reply_code) + " " +
                           text_of(ret->reply_text) + ") from exchange \"" + text_of(ret->exchange) + "\" with routing key \"" +
                           text_of(ret->routing_key) + "\"";
        // The returned message follows the method; read it for its id (and so that the
        // connection's frame sequence stays intact).
        amqp_message_t message;
        amqp_rpc_reply_t r = amqp_read_message(conn_, frame.channel, &message, 0);
        if (r.reply_type == AMQP_RESPONSE_NORMAL) {
          if (message.properties._flags & AMQP_BASIC_MESSAGE_ID_FLAG) what += ": message " + text_of(message.properties.message_id);
          amqp_destroy_message(&message);
        }
        // Resending the same message to the same place returns it again: an operator must
        // bind a queue (or fix the destination).
        fail(what, false);
      }
      case AMQP_CHANNEL_CLOSE_METHOD: {
        auto* c = static_cast<amqp_channel_close_t*>(frame.payload.method.decoded);
        const int code = c->reply_code;
        const std::string text = text_of(c->reply_text);
        amqp_channel_close_ok_t ok{};
        amqp_send_method(conn_, kChannel, AMQP_CHANNEL_CLOSE_OK_METHOD, &ok);
        fail("channel closed by the broker: " + std::to_string(code) + " " + text, core::amqp_reply_code_transient(code));
      }
      case AMQP_CONNECTION_CLOSE_METHOD: {
        auto* c = static_cast<amqp_connection_close_t*>(frame.payload.method.decoded);
        const int code = c->reply_code;
        const std::string text = text_of(c->reply_text);
        amqp_connection_close_ok_t ok{};
        amqp_send_method(conn_, 0, AMQP_CONNECTION_CLOSE_OK_METHOD, &ok);
        fail("connection closed by the broker: " + std::to_string(code) + " " + text, core::amqp_reply_code_transient(code));
      }
      default:
        return true;  // connection.blocked / unblocked and the like: confirms simply wait
    }
  }

  std::string shown_;
  std::chrono::seconds timeout_;
  AmqpOptions options_;
  amqp_connection_state_t conn_ = nullptr;
  bool healthy_ = true;
  core::ConfirmWindow window_;
};

}  // namespace

std::unique_ptr<Sink> make_amqp_sink(const std::string& uri) { return std::make_unique<AmqpSink>(uri); }

}  // namespace whizbang::relay
