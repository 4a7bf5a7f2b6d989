#include "relay/relay.h"

#include <signal.h>
#include <time.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <future>
#include <random>

#include "core/backoff.h"
#include "core/confirm_tracker.h"
#include "core/error.h"
#include "core/outbox_fields.h"
#include "core/replication_decode.h"
#include "relay/connection.h"
#include "relay/log.h"

namespace whizbang::relay {
namespace {

namespace rep = core::replication;
using Clock = std::chrono::steady_clock;

constexpr const char* kPrefix = "whizbang.outbox";
// A busy stream may never pause long enough to flush "when nothing more is waiting": flush
// anyway after this many messages or this long since the first unflushed commit.
constexpr std::uint64_t kFlushEveryMessages = 10000;
constexpr auto kFlushEvery = std::chrono::milliseconds(500);
// Pauses before connecting again: 1 s doubling to 30 s, with jitter (core/backoff.h).
constexpr std::int64_t kBackoffBaseSeconds = 1, kBackoffMaxSeconds = 30;

volatile std::sig_atomic_t g_stop = 0;

void on_stop_signal(int) { g_stop = 1; }

bool stopping() { return g_stop != 0; }

// Sleeps `us`, or less when a stop signal comes.
void pause_us(std::int64_t us) {
    timespec ts{static_cast<time_t>(us / 1000000), static_cast<long>((us % 1000000) * 1000)};
    while (!stopping() && nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

// One connection's stream, from START_REPLICATION until it ends. The tracker and the sink
// outlive it.
class Session {
public:
    Session(ReplicationConnection& conn, Sink& sink, rep::ConfirmTracker& tracker, const core::RelayOptions& options)
        : conn_(conn),
          sink_(sink),
          tracker_(tracker),
          interval_(std::chrono::seconds(options.status_interval_s)),
          slot_(options.slot) {}

    // Streams until a stop signal (returns) or an error (throws ConnectionLost, SinkError, Fatal).
    void run() {
        std::string data;
        report();
        while (!stopping()) {
            if (conn_.read(data) == 1) {
                try {
                    handle(data);
                } catch (const Fatal&) {
                    settle();
                    throw;
                } catch (const rep::ProtocolError&) {
                    settle();
                    throw;
                }
                if (flush_due()) flush();
            } else {
                // Nothing more is waiting now: the moment to flush what committed.
                if (tracker_.commit_waiting() || (tracker_.unacknowledged() && !tracker_.in_transaction())) flush();
                if (tracker_.confirmable() != reported_ || Clock::now() - reported_at_ >= interval_) report();
                const auto left = interval_ - (Clock::now() - reported_at_);
                const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(left).count();
                conn_.wait(static_cast<int>(std::max<long long>(ms, 1)));
            }
            if (Clock::now() - reported_at_ >= interval_) report();
        }
        // Stopping: what the sink acknowledges is confirmed before the relay ends.
        if (tracker_.commit_waiting() || tracker_.unacknowledged()) flush();
        report();
    }

    bool received_data() const { return received_; }

private:
    void handle(const std::string& data) {
        received_ = true;
        const auto message = rep::decode_copy_data(data);
        if (const auto* k = std::get_if<rep::Keepalive>(&message)) {
            tracker_.keepalive(k->wal_end);
            // The server asks for a reply (it is near wal_sender_timeout): the answer itself
            // asks for none.
            if (k->reply_requested) report();
            return;
        }
        const auto& x = std::get<rep::XLogData>(message);
        const auto out = rep::decode_pgoutput(x.payload);
        if (const auto* b = std::get_if<rep::Begin>(&out)) {
            tracker_.begin();
            begin_ = *b;
        } else if (const auto* c = std::get_if<rep::Commit>(&out)) {
            if (tracker_.in_transaction() && c->commit_lsn != begin_.final_lsn)
                throw rep::ProtocolError("Commit at " + rep::format_lsn(c->commit_lsn) + " ends the transaction that began for " +
                                         rep::format_lsn(begin_.final_lsn));
            const bool had_unacknowledged = tracker_.unacknowledged();
            tracker_.commit(c->end_lsn);
            if (had_unacknowledged && first_waiting_ == Clock::time_point{}) first_waiting_ = Clock::now();
        } else if (const auto* m = std::get_if<rep::LogicalMessage>(&out)) {
            publish(*m);
        }
    }

    void publish(const rep::LogicalMessage& m) {
        // Only whizbang's transactional messages: a non-transactional one was emitted whether
        // or not its transaction committed, so it is no outbox message.
        if (!m.transactional || m.prefix != kPrefix) return;
        if (!tracker_.in_transaction()) throw rep::ProtocolError("a transactional message outside Begin and Commit");
        core::OutboxFields f;
        try {
            f = core::read_outbox_fields(m.content);
        } catch (const core::InputError& e) {
            throw Fatal(kExitBadStream,
                        std::string("the whizbang.outbox message at ") + rep::format_lsn(m.lsn) + " (transaction committing at " +
                            rep::format_lsn(begin_.final_lsn) + ") is not an outbox message: " + e.what() +
                            ". It was not emitted by whizbang.emit_outbox_messages. Nothing after it is relayed; to go on "
                            "without that transaction (its messages are then not delivered): SELECT "
                            "pg_replication_slot_advance('" + slot_ + "', '" + rep::format_lsn(begin_.final_lsn) +
                            "'::pg_lsn + 1)");
        }
        RelayMessage r;
        r.id = std::move(f.message_id);
        r.destination = std::move(f.destination);
        r.type = std::move(f.message_type);
        r.stream = std::move(f.stream_id);
        r.json = core::single_line(m.content);
        r.commit_lsn = begin_.final_lsn;
        r.commit_time_us = static_cast<std::uint64_t>(rep::unix_us_from_postgres(begin_.commit_time));
        sink_.publish(r);
        tracker_.published();
        ++unflushed_;
    }

    bool flush_due() const {
        return tracker_.commit_waiting() &&
               (unflushed_ >= kFlushEveryMessages || (first_waiting_ != Clock::time_point{} && Clock::now() - first_waiting_ >= kFlushEvery));
    }

    // The sink's flush() may take long (a broker that is slow to confirm, a disk that is slow
    // to sync). Meanwhile the server hears from the relay every status interval, with the
    // position unchanged: a relay silent for wal_sender_timeout is cut off, and would then get
    // everything unconfirmed again. The sink is used by the one thread at a time.
    void flush() {
        auto done = std::async(std::launch::async, [this] { sink_.flush(); });
        while (done.wait_for(interval_) == std::future_status::timeout) report();
        done.get();  // rethrows what flush() threw
        tracker_.flushed();
        unflushed_ = 0;
        first_waiting_ = {};
    }

    // Before the relay stops at a message it cannot relay: what committed before it is
    // handed over and confirmed, so that the operator's fix starts right at the bad one. A
    // failure here is not reported over the error that stops the relay.
    void settle() noexcept {
        try {
            if (tracker_.commit_waiting()) flush();
            report();
        } catch (...) {
        }
    }

    void report() {
        conn_.send_status(tracker_.confirmable(), false);
        reported_ = tracker_.confirmable();
        reported_at_ = Clock::now();
    }

    ReplicationConnection& conn_;
    Sink& sink_;
    rep::ConfirmTracker& tracker_;
    const Clock::duration interval_;
    const std::string slot_;  // slot names are [a-z0-9_]: safe inside the hint's SQL literal
    rep::Begin begin_;
    rep::Lsn reported_ = 0;
    Clock::time_point reported_at_{};
    Clock::time_point first_waiting_{};
    std::uint64_t unflushed_ = 0;
    bool received_ = false;
};

}  // namespace

void install_signal_handlers() {
    struct sigaction sa {};
    sa.sa_handler = on_stop_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = 0;  // no SA_RESTART: poll and nanosleep return at once with EINTR
    sigaction(SIGINT, &sa, nullptr);
    sigaction(SIGTERM, &sa, nullptr);
    signal(SIGPIPE, SIG_IGN);
}

ExitCode run_relay(const core::RelayOptions& options) {
    std::unique_ptr<Sink> sink;
    std::unique_ptr<rep::ConfirmTracker> tracker;
    std::mt19937_64 rng(std::random_device{}());
    std::uniform_real_distribution<double> unit(0.0, 1.0);
    int failures = 0;
    bool first = true;
    while (!stopping()) {
        try {
            if (!sink) {
                sink = make_sink(options.sink);
                log_info("sink " + sink->describe());
            }
            ReplicationConnection conn(options.dbname);
            // Only a first connection that fails ends the relay (a wrong --dbname should not
            // retry for ever); once it connected, losses are retried.
            first = false;
            const SlotState slot = conn.check_slot(options.slot, options.publication);
            // Never report less than the slot has: the server may already be past what this
            // process confirmed (another relay ran meanwhile, or pg_replication_slot_advance).
            if (!tracker || tracker->confirmable() < slot.confirmed_flush)
                tracker = std::make_unique<rep::ConfirmTracker>(slot.confirmed_flush);
            tracker->restart();
            conn.start(options.slot, options.publication);
            log_info("streaming slot \"" + options.slot + "\" from " + rep::format_lsn(slot.confirmed_flush) + " (publication \"" +
                     options.publication + "\", server " + std::to_string(conn.server_version()) + ")");
            Session session(conn, *sink, *tracker, options);
            try {
                session.run();
            } catch (...) {
                if (session.received_data()) failures = 0;  // it streamed: the next pause starts short
                throw;
            }
            log_info("stopped; confirmed up to " + rep::format_lsn(tracker->confirmable()));
            return kExitStopped;
        } catch (const ConnectionLost& e) {
            if (first) throw Fatal(kExitConnect, e.what());
            log_error(std::string(e.what()) + "; connecting again");
        } catch (const SinkError& e) {
            if (!e.transient()) throw Fatal(kExitSinkFailed, std::string("sink: ") + e.what());
            log_error(std::string("sink: ") + e.what() + "; starting over from the slot's confirmed position");
            sink.reset();  // a fresh sink: the old one's state (a connection, a buffer) is not trusted
        } catch (const rep::ProtocolError& e) {
            throw Fatal(kExitBadStream, std::string("replication stream: ") + e.what());
        }
        ++failures;
        const std::int64_t us = core::retry_delay_us(failures, kBackoffBaseSeconds, kBackoffMaxSeconds, unit(rng));
        log_info("next attempt in " + std::to_string(us / 1000) + " ms");
        pause_us(us);
    }
    log_info("stopped");
    return kExitStopped;
}

}  // namespace whizbang::relay
