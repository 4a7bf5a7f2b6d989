// Multi-connection stress test of the whizbang inbox (DESIGN §3.2, §3.4).
//
// Run by test/scripts/inbox_stress.sh inside a throw-away cluster; connects with the libpq
// environment (PGHOST, PGPORT, PGUSER, ... as pg_virtualenv sets them).
//
// What runs, concurrently:
//  - 4 producer connections store 20,000 distinct messages over 200 streams with
//    store_inbox_messages, in batches of 50 (every other batch stored pre-leased to one worker's
//    instance, DESIGN §3.2). Each stream belongs to one producer, which numbers its messages
//    1, 2, 3 ... in the Envelope ("seq"): the intended stream order. 10% of the messages are
//    delivered again: half mixed into the same producer's later batches (store_inbox_messages
//    must return no row for them), half at the end by a random producer through inbox_receive
//    (the outcome must be 'duplicate'). Producers pause between batches and wait while more
//    than 2,000 messages are unfinished.
//  - 4 worker connections loop claim_work('inbox', 10..50 rows, lease 2 s, p_max_per_stream
//    1..100) -> per row one transaction that inserts the effect (stress.effects, unique
//    message_id, ON CONFLICT DO NOTHING; the INSERT first locks the stream's stress.progress
//    row) and calls complete_work with the lease token; it commits only when the outcome is
//    'completed'. About 5% of deliveries fail retryably (fail_work), 1% fail for good
//    (dead-lettered at once); 40 "poison" messages always fail (dead-lettered when their
//    attempts run out), 4 "hang" messages are abandoned at every delivery (their lease lapses;
//    claim_work dead-letters them once max_attempts = 4 deliveries are used up) and 6 "slow"
//    messages take longer than a lease (renew_leases keeps them). After a non-completed
//    outcome a worker stops working on that stream in the batch and releases the rest of its
//    rows (release_work) at once. Retries are due after 0.75..1 s.
//  - One of the workers "crashes" twice (at 20% and 55% of the messages): it claims up to 30
//    rows and stops renewing; the first time it also drops its connection in the middle of a
//    completing transaction. As soon as a row was re-claimed (token changed) or is gone, it
//    tries the late completion (effect + complete_work with its old token): the answer must be
//    lease_lost, or not_found once another worker completed the row; never completed.
//
// What is asserted at the end (each is counted and printed; any failure exits 1):
//  1. Exactly once: every message is in stress.effects exactly once or in wh_dead_letters
//     exactly once, never both; wh_inbox and wh_inbox are empty; the dedup table holds
//     each id once and counted every delivery (observation_count); no unexpected SQL error
//     (a deadlock or a timeout would be one).
//  2. Stream order: per stream, the effects in commit order (commit_no is drawn under the
//     stream's row lock, so it is the commit order) have strictly increasing seq, and the seq
//     each transaction saw as the last committed one is the previous effect. From the client's
//     record of every claim / renewal / outcome: no row of a stream was handed out while a row
//     of the same stream was held under another token, no row was handed out before its lease
//     lapsed / its retry time, attempts count deliveries (release refunds one). A failed or
//     released row gives back the rest of its holder's run in the stream (refunded too).
//  3. No duplicate processed: no redelivery created work; no complete_work answered
//     'completed' for a message whose effect was already committed; no row was handed out
//     again after a committed completion or dead-lettering; the crashed worker's late
//     completions never succeeded.
//
// STRESS_SABOTAGE=order|dup|lost|fence makes the client misbehave on purpose, to show that the
// assertions can fail: order = work the rows of a claim in reverse and go on after failures;
// dup = forget some dedup records before the final redeliveries; lost = delete some effects
// and dead letters after the run; fence = late completions without the lease token.
// STRESS_SEED repeats a run's random choices (timing still differs); STRESS_MESSAGES,
// STRESS_STREAMS, STRESS_PRODUCE_PAUSE_MS, STRESS_MAX_BACKLOG, STRESS_MAX_PER_STREAM,
// STRESS_PRELEASE=0 and STRESS_LIMIT_SECONDS change the run.
#include <libpq-fe.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cinttypes>
#include <condition_variable>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>
#include <unistd.h>

namespace {

using Clock = std::chrono::steady_clock;

long env_long(const char* name, long fallback) {
    const char* v = std::getenv(name);
    return (v && *v) ? std::strtol(v, nullptr, 10) : fallback;
}
std::string env_str(const char* name, const char* fallback) {
    const char* v = std::getenv(name);
    return (v && *v) ? std::string(v) : std::string(fallback);
}

// ---------------------------------------------------------------------------------------------
// Configuration
struct Config {
    int producers = 4, workers = 4;
    int streams = 200, messages = 20000, batch = 50;
    int redeliver_pct = 10;
    int lease_seconds = 2, max_attempts = 4;
    int stall_pct = 0;  // % of rows before which a worker stalls past its lease without renewing
    double fail_p = 0.05, fatal_p = 0.01;
    int poison = 40, hang = 4, slow = 6;
    int max_per_stream = 0;  // 0: a random choice per claim
    bool prelease = true;    // store every other batch pre-leased to a worker
    int produce_pause_ms = 100;  // >= 10 s of production, so storing and claiming overlap
    int max_backlog = 2000;      // producers wait while more messages than this are unfinished
    int work_limit_s = 75;
    uint64_t seed = 0;
    std::string sabotage;
} cfg;

Clock::time_point g_start = Clock::now();
double since_start() { return std::chrono::duration<double>(Clock::now() - g_start).count(); }

void logf(const char* fmt, ...) {
    static std::mutex mu;
    std::lock_guard<std::mutex> lock(mu);
    std::fprintf(stdout, "[%6.2fs] ", since_start());
    va_list ap;
    va_start(ap, fmt);
    std::vfprintf(stdout, fmt, ap);
    va_end(ap);
    std::fputc('\n', stdout);
    std::fflush(stdout);
}

// ---------------------------------------------------------------------------------------------
// Unexpected errors: every one fails the test.
std::atomic<long> g_errors{0};
std::mutex g_error_mu;
std::vector<std::string> g_error_samples;
void record_error(const std::string& what) {
    ++g_errors;
    std::lock_guard<std::mutex> lock(g_error_mu);
    if (g_error_samples.size() < 20) g_error_samples.push_back(what);
}

// ---------------------------------------------------------------------------------------------
// libpq
class Res {
  public:
    Res() = default;
    explicit Res(PGresult* r) : r_(r) {}
    Res(Res&& o) noexcept : r_(o.r_) { o.r_ = nullptr; }
    Res& operator=(Res&& o) noexcept {
        if (this != &o) {
            if (r_) PQclear(r_);
            r_ = o.r_;
            o.r_ = nullptr;
        }
        return *this;
    }
    ~Res() {
        if (r_) PQclear(r_);
    }
    bool ok() const {
        if (!r_) return false;
        auto s = PQresultStatus(r_);
        return s == PGRES_COMMAND_OK || s == PGRES_TUPLES_OK;
    }
    int rows() const { return r_ ? PQntuples(r_) : 0; }
    std::string get(int row, int col) const { return PQgetvalue(r_, row, col); }
    bool null(int row, int col) const { return PQgetisnull(r_, row, col); }
    long long num(int row, int col) const { return std::strtoll(PQgetvalue(r_, row, col), nullptr, 10); }
    std::string error() const {
        if (!r_) return "no result";
        const char* state = PQresultErrorField(r_, PG_DIAG_SQLSTATE);
        return std::string(state ? state : "?????") + " " + PQresultErrorMessage(r_);
    }

  private:
    PGresult* r_ = nullptr;
};

class Pg {
  public:
    explicit Pg(std::string label) : label_(std::move(label)) { connect(); }
    ~Pg() { close(); }
    Pg(const Pg&) = delete;
    Pg& operator=(const Pg&) = delete;

    void connect() {
        c_ = PQconnectdb("application_name=inbox_stress");
        if (PQstatus(c_) != CONNECTION_OK) {
            std::fprintf(stderr, "%s: cannot connect: %s\n", label_.c_str(), PQerrorMessage(c_));
            std::exit(2);
        }
        // Nothing may hang the run: a statement that waits this long is a failure.
        must("SET statement_timeout = '20s'");
        must("SET client_min_messages = warning");
        for (const auto& [name, sql] : prepared_) prepare_now(name, sql);
    }
    // Drops the connection without ending the transaction: the server rolls it back.
    void close() {
        if (c_) PQfinish(c_);
        c_ = nullptr;
    }
    void prepare(const std::string& name, const std::string& sql) {
        prepared_[name] = sql;
        prepare_now(name, sql);
    }
    Res exec(const std::string& sql, const std::vector<std::string>& params = {}) {
        std::vector<const char*> v;
        for (const auto& p : params) v.push_back(p.c_str());
        return Res(PQexecParams(c_, sql.c_str(), static_cast<int>(v.size()), nullptr, v.data(), nullptr, nullptr, 0));
    }
    Res run(const std::string& name, const std::vector<std::string>& params = {}) {
        std::vector<const char*> v;
        for (const auto& p : params) v.push_back(p.c_str());
        return Res(PQexecPrepared(c_, name.c_str(), static_cast<int>(v.size()), v.data(), nullptr, nullptr, 0));
    }
    // A prepared statement that must succeed; an error is recorded (and fails the test).
    Res must_run(const std::string& name, const std::vector<std::string>& params = {}) {
        Res r = run(name, params);
        if (!r.ok()) record_error(label_ + " " + name + ": " + r.error());
        return r;
    }
    Res must(const std::string& sql, const std::vector<std::string>& params = {}) {
        Res r = exec(sql, params);
        if (!r.ok()) {
            std::fprintf(stderr, "%s: %s\n  failed: %s\n", label_.c_str(), sql.c_str(), r.error().c_str());
            std::exit(2);
        }
        return r;
    }

  private:
    void prepare_now(const std::string& name, const std::string& sql) {
        Res r(PQprepare(c_, name.c_str(), sql.c_str(), 0, nullptr));
        if (!r.ok()) {
            std::fprintf(stderr, "%s: prepare %s failed: %s\n", label_.c_str(), name.c_str(), r.error().c_str());
            std::exit(2);
        }
    }
    std::string label_;
    PGconn* c_ = nullptr;
    std::map<std::string, std::string> prepared_;
};

std::string uuid4(std::mt19937_64& rng) {
    uint64_t a = rng(), b = rng();
    a = (a & 0xFFFFFFFFFFFF0FFFULL) | 0x0000000000004000ULL;  // version 4
    b = (b & 0x3FFFFFFFFFFFFFFFULL) | 0x8000000000000000ULL;  // variant
    char s[40];
    std::snprintf(s, sizeof s, "%08x-%04x-%04x-%04x-%012llx", static_cast<unsigned>(a >> 32),
                  static_cast<unsigned>((a >> 16) & 0xFFFF), static_cast<unsigned>(a & 0xFFFF),
                  static_cast<unsigned>(b >> 48), static_cast<unsigned long long>(b & 0xFFFFFFFFFFFFULL));
    return s;
}

std::string join_array(const std::vector<std::string>& items) {
    std::string s = "{";
    for (std::size_t i = 0; i < items.size(); ++i) {
        if (i) s += ',';
        s += items[i];
    }
    return s + "}";
}

// ---------------------------------------------------------------------------------------------
// The messages
struct Msg {
    std::string id;
    int stream = 0, seq = 0, producer = 0;
    bool poison = false;  // fails retryably at every delivery
    bool hang = false;    // abandoned at every delivery
    bool slow = false;    // takes longer than a lease to process: needs renew_leases
    int redeliver = 0;    // 0: no; 1: mixed into a later batch of its producer; 2: final phase
};
std::vector<Msg> g_msgs;
std::vector<std::string> g_stream_ids;
std::unordered_map<std::string, int> g_index;  // message id -> index

int msg_index(const std::string& id) {
    auto it = g_index.find(id);
    return it == g_index.end() ? -1 : it->second;
}

// ---------------------------------------------------------------------------------------------
// Events recorded by the workers, analysed after the run (no locking needed while running).
struct ClaimEv {
    int msg;
    long long token;
    long long now_us;     // p_now of the claim (its transaction start): leases are compared with it
    long long end_us;     // clock_timestamp() after claim_work returned: the claim decided before
    long long expiry_us;
    int attempts, worker;
};
struct ResEv {
    int msg;
    long long token, now_us, sched_us;
    char kind;  // C completed, R retry_scheduled, D dead_lettered (fail_work), L released, N renewed
};

// ---------------------------------------------------------------------------------------------
// Shared counters
std::atomic<bool> g_stop{false};
std::atomic<bool> g_production_done{false};
std::atomic<long> g_stored{0}, g_completed{0}, g_dead_by_fail{0};
std::atomic<long> st_leased_batches{0}, st_preleased_handed{0};
std::atomic<long> st_batches{0}, st_redelivered_mixed{0}, st_redelivered_final{0}, st_redelivery_rows{0},
    st_final_not_duplicate{0}, st_store_mismatch{0};
std::atomic<long> st_claims{0}, st_empty_claims{0}, st_rows_claimed{0}, st_multi_row_streams{0}, st_claim_mismatch{0};
std::atomic<long> st_retry{0}, st_fatal{0}, st_poison_fail{0}, st_abandoned{0}, st_released{0}, st_release_lost{0};
std::atomic<long> st_slow{0};
std::atomic<long> st_renew_calls{0}, st_renewed{0}, st_renew_lost{0};
std::atomic<long> st_complete_lost{0}, st_complete_not_found{0}, st_fail_lost{0}, st_fail_not_found{0};
std::atomic<long> st_stale_effect_conflicts{0}, st_dup_processed{0}, st_order_live{0};
std::atomic<long> st_crashes{0}, st_crash_rows{0}, st_late_completed{0}, st_late_lease_lost{0}, st_late_not_found{0},
    st_late_unreclaimed{0}, st_dropped_txn{0};
std::atomic<long> st_max_attempts_seen{0};
std::atomic<long long> st_claim_us{0}, st_empty_claim_us{0}, st_max_claim_us{0};
std::atomic<long> st_claims_over_lease{0};
std::atomic<long> st_stalls{0};
std::mutex g_ev_mu;
std::vector<ClaimEv> g_claims;
std::vector<ResEv> g_res;

void bump_max(std::atomic<long>& a, long v) {
    long cur = a.load();
    while (v > cur && !a.compare_exchange_weak(cur, v)) {
    }
}

// ---------------------------------------------------------------------------------------------
// Producers
const char* kStoreSql = "SELECT message_id, stream_id, was_newly_created FROM whizbang.store_inbox_messages($1::jsonb)";
// Stored pre-leased to a worker's instance (DESIGN §3.2): rows of idle streams come back first
// at that instance's next claim_work, with the lease token of the store.
const char* kStoreLeasedSql =
    "SELECT message_id, stream_id, was_newly_created"
    "  FROM whizbang.store_inbox_messages($1::jsonb, $2::uuid, now() + make_interval(secs => $3::int))";
std::vector<std::string> g_instances;  // per worker
const char* kReceiveSql = "SELECT message_id, stream_id, outcome FROM whizbang.inbox_receive($1::jsonb)";

std::string message_json(const Msg& m) {
    char buf[400];
    std::snprintf(buf, sizeof buf,
                  "{\"MessageId\":\"%s\",\"HandlerName\":\"stress\",\"MessageType\":\"Stress.Event\","
                  "\"StreamId\":\"%s\",\"IsEvent\":true,\"Envelope\":{\"seq\":%d,\"stream\":%d,\"p\":%d}}",
                  m.id.c_str(), g_stream_ids[m.stream].c_str(), m.seq, m.stream, m.producer);
    return buf;
}

// Per producer: the batches (indices into g_msgs; redeliveries flagged by being already sent).
struct Plan {
    std::vector<std::vector<int>> batches;       // original + mixed redeliveries
    std::vector<std::vector<char>> is_redelivery;
};
std::vector<Plan> g_plans;
std::vector<std::vector<int>> g_final_batches;  // inbox_receive redeliveries, after all stores
std::mutex g_barrier_mu;
std::condition_variable g_barrier_cv;
int g_producers_stored = 0;

void producer(int p, double* produce_seconds) {
    Pg db("producer" + std::to_string(p));
    db.prepare("store", kStoreSql);
    db.prepare("store_leased", kStoreLeasedSql);
    db.prepare("receive", kReceiveSql);
    const Plan& plan = g_plans[p];
    auto t0 = Clock::now();
    for (std::size_t b = 0; b < plan.batches.size() && !g_stop; ++b) {
        std::string json = "[";
        std::set<std::string> expect_new;
        for (std::size_t k = 0; k < plan.batches[b].size(); ++k) {
            const Msg& m = g_msgs[plan.batches[b][k]];
            if (k) json += ',';
            json += message_json(m);
            if (!plan.is_redelivery[b][k]) expect_new.insert(m.id);
            else ++st_redelivered_mixed;
        }
        json += "]";
        // Every other batch is stored pre-leased to one worker (the producer's "own" worker).
        const bool leased = cfg.prelease && b % 2 == 1;
        Res r = leased ? db.must_run("store_leased", {json, g_instances[p % cfg.workers], std::to_string(cfg.lease_seconds)})
                       : db.must_run("store", {json});
        if (!r.ok()) continue;
        if (leased) ++st_leased_batches;
        std::set<std::string> got;
        for (int i = 0; i < r.rows(); ++i) {
            std::string id = r.get(i, 0);
            int idx = msg_index(id);
            if (idx < 0 || r.get(i, 1) != g_stream_ids[g_msgs[idx].stream] || r.get(i, 2) != "t") ++st_store_mismatch;
            if (!expect_new.count(id)) ++st_redelivery_rows;  // a redelivery was stored as new
            got.insert(id);
        }
        for (const auto& id : expect_new)
            if (!got.count(id)) ++st_store_mismatch;  // a new message was not reported as stored
        g_stored += static_cast<long>(expect_new.size());
        ++st_batches;
        if (cfg.produce_pause_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(cfg.produce_pause_ms));
        // Back-pressure: a long queue makes every claim slow (see the report), so producers wait
        // while more than max_backlog stored messages are unfinished.
        while (!g_stop && g_stored - g_completed - g_dead_by_fail > cfg.max_backlog)
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    *produce_seconds = std::chrono::duration<double>(Clock::now() - t0).count();
    {
        std::unique_lock<std::mutex> lock(g_barrier_mu);
        ++g_producers_stored;
        g_barrier_cv.notify_all();
        g_barrier_cv.wait(lock, [] { return g_producers_stored >= cfg.producers || g_stop; });
    }
    if (p == 0 && cfg.sabotage == "dup") {
        // Sabotage: forget the dedup records of a few final-phase redeliveries whose original was
        // completed already, so they come back as new work and are processed a second time.
        std::vector<std::string> victims;
        for (const auto& batch : g_final_batches)
            for (int i : batch)
                if (victims.size() < 5) victims.push_back(g_msgs[i].id);
        db.must("DELETE FROM whizbang.wh_message_deduplication WHERE message_id = ANY($1::uuid[])"
                "   AND NOT EXISTS (SELECT 1 FROM whizbang.wh_inbox i WHERE i.message_id = wh_message_deduplication.message_id)",
                {join_array(victims)});
        logf("SABOTAGE dup: forgot dedup records of up to %zu completed messages", victims.size());
    }
    // Final phase: cross-producer redeliveries through inbox_receive, each must be 'duplicate'.
    for (std::size_t b = p; b < g_final_batches.size() && !g_stop; b += cfg.producers) {
        std::string json = "[";
        for (std::size_t k = 0; k < g_final_batches[b].size(); ++k) {
            if (k) json += ',';
            json += message_json(g_msgs[g_final_batches[b][k]]);
        }
        json += "]";
        Res r = db.must_run("receive", {json});
        if (!r.ok()) continue;
        if (r.rows() != static_cast<int>(g_final_batches[b].size())) ++st_store_mismatch;
        for (int i = 0; i < r.rows() && i < static_cast<int>(g_final_batches[b].size()); ++i) {
            const Msg& m = g_msgs[g_final_batches[b][i]];
            if (r.get(i, 0) != m.id || r.get(i, 1) != g_stream_ids[m.stream]) ++st_store_mismatch;
            if (r.get(i, 2) != "duplicate") ++st_final_not_duplicate;
            ++st_redelivered_final;
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Workers
const char* kClaimSql =
    "SELECT message_id, stream_id, attempts, lease_token, (extract(epoch FROM lease_expiry) * 1000000)::bigint,"
    "       envelope->>'seq', envelope->>'stream', (extract(epoch FROM clock_timestamp()) * 1000000)::bigint"
    "  FROM whizbang.claim_work($1::uuid, 'inbox', $2::int, $3::int, p_max_per_stream => $4::int)";
// The effect of a message. The stream's progress row is locked first (the INSERT reads it), so
// commit_no is drawn under that lock: per stream, commit_no order is commit order. prev_seq is
// the seq of the stream's last committed effect, as this transaction saw it.
const char* kEffectSql =
    "WITH p AS (SELECT last_seq FROM stress.progress WHERE stream_no = $2::int FOR UPDATE)"
    " INSERT INTO stress.effects (message_id, stream_no, seq, prev_seq, worker, lease_token, attempts)"
    " SELECT $1::uuid, $2::int, $3::int, p.last_seq, $4::int, $5::bigint, $6::int FROM p"
    " ON CONFLICT (message_id) DO NOTHING RETURNING commit_no, prev_seq";
// The completion, and (only when it completed) the stream's progress.
const char* kCompleteSql =
    "WITH c AS MATERIALIZED (SELECT outcome FROM whizbang.complete_work('inbox', ARRAY[$1::uuid], ARRAY[$2::bigint])),"
    " u AS (UPDATE stress.progress SET last_seq = $4::int"
    "        WHERE stream_no = $3::int AND (SELECT c.outcome FROM c) = 'completed' RETURNING 1)"
    " SELECT c.outcome, (extract(epoch FROM now()) * 1000000)::bigint, (SELECT count(*) FROM u) FROM c";
const char* kCompleteUnfencedSql =
    "WITH c AS MATERIALIZED (SELECT outcome FROM whizbang.complete_work('inbox', ARRAY[$1::uuid],"
    " CASE WHEN $2::bigint < 0 THEN ARRAY[$2::bigint] END)),"
    " u AS (UPDATE stress.progress SET last_seq = $4::int"
    "        WHERE stream_no = $3::int AND (SELECT c.outcome FROM c) = 'completed' RETURNING 1)"
    " SELECT c.outcome, (extract(epoch FROM now()) * 1000000)::bigint, (SELECT count(*) FROM u) FROM c";
const char* kFailSql =
    "SELECT outcome, (extract(epoch FROM scheduled_for) * 1000000)::bigint, (extract(epoch FROM now()) * 1000000)::bigint"
    "  FROM whizbang.fail_work('inbox', ARRAY[$1::uuid], ARRAY[$2::text], ARRAY[$3::bigint], ARRAY[$4::boolean])";
const char* kRenewSql =
    "SELECT message_id, outcome, (extract(epoch FROM now()) * 1000000)::bigint"
    "  FROM whizbang.renew_leases('inbox', $1::uuid[], $2::bigint[], $3::int)";
const char* kReleaseSql =
    "SELECT message_id, outcome, (extract(epoch FROM now()) * 1000000)::bigint"
    "  FROM whizbang.release_work('inbox', $1::uuid[], $2::bigint[])";
// Who holds the rows now, from whizbang.leases (either lease store): a row not listed is unleased or gone.
const char* kWatchSql =
    "SELECT message_id, lease_token FROM whizbang.leases WHERE source = 'inbox' AND message_id = ANY($1::uuid[])";

struct Row {
    int msg;
    long long token, expiry_us;
    int attempts;
};

class Worker {
  public:
    explicit Worker(int w) : w_(w), db_("worker" + std::to_string(w)), rng_(cfg.seed * 7919 + 1000 + w) {
        instance_ = g_instances[w];
        prepare();
    }

    void loop() {
        const long total = cfg.messages;
        const std::vector<long> crash_points = {total / 5, total * 11 / 20};
        std::size_t crashes = 0;
        while (!g_stop) {
            if (w_ == cfg.workers - 1 && crashes < crash_points.size() && g_completed >= crash_points[crashes]) {
                if (crash(crashes == 0)) ++crashes;
                continue;
            }
            std::vector<Row> rows = claim(10 + static_cast<int>(rng_() % 41));
            if (rows.empty()) {
                std::this_thread::sleep_for(std::chrono::milliseconds(5 + rng_() % 10));
                continue;
            }
            process(rows);
        }
        flush();
    }

  private:
    void prepare() {
        db_.prepare("claim", kClaimSql);
        db_.prepare("effect", kEffectSql);
        db_.prepare("complete", kCompleteSql);
        db_.prepare("complete_unfenced", kCompleteUnfencedSql);
        db_.prepare("fail", kFailSql);
        db_.prepare("renew", kRenewSql);
        db_.prepare("release", kReleaseSql);
        db_.prepare("watch", kWatchSql);
    }

    std::vector<Row> claim(int max_rows) {
        std::vector<Row> rows;
        const auto t0 = Clock::now();
        // Up to p_max_per_stream rows of one stream per claim: mostly a few (a large value makes
        // claims slow on a long queue, see the report), sometimes the default 100.
        static const int kPerStream[] = {1, 2, 5, 10, 100};
        const int per_stream_max = cfg.max_per_stream > 0 ? cfg.max_per_stream : kPerStream[rng_() % 5];
        Res r = db_.must_run("claim", {instance_, std::to_string(max_rows), std::to_string(cfg.lease_seconds),
                                       std::to_string(per_stream_max)});
        const long long us = std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - t0).count();
        if (!r.ok()) return rows;
        ++st_claims;
        st_claim_us += us;
        {
            long long cur = st_max_claim_us.load();
            while (us > cur && !st_max_claim_us.compare_exchange_weak(cur, us)) {
            }
        }
        if (us >= cfg.lease_seconds * 1000000LL) ++st_claims_over_lease;  // handed out leases that had lapsed
        if (r.rows() == 0) {
            st_empty_claim_us += us;
            ++st_empty_claims;
            return rows;
        }
        if (r.rows() > max_rows) ++st_claim_mismatch;
        std::map<int, int> per_stream;
        long long fresh = 0;  // the claim's own token is the newest; older ones were given at store
        for (int i = 0; i < r.rows(); ++i) fresh = std::max(fresh, r.num(i, 3));
        for (int i = 0; i < r.rows(); ++i) {
            if (r.num(i, 3) != fresh) ++st_preleased_handed;
            int idx = msg_index(r.get(i, 0));
            if (idx < 0) {
                ++st_claim_mismatch;
                continue;
            }
            const Msg& m = g_msgs[idx];
            if (r.get(i, 1) != g_stream_ids[m.stream] || std::atoi(r.get(i, 5).c_str()) != m.seq ||
                std::atoi(r.get(i, 6).c_str()) != m.stream)
                ++st_claim_mismatch;
            Row row{idx, r.num(i, 3), r.num(i, 4), static_cast<int>(r.num(i, 2))};
            bump_max(st_max_attempts_seen, row.attempts);
            claims_.push_back({idx, row.token, row.expiry_us - cfg.lease_seconds * 1000000LL, r.num(i, 7),
                               row.expiry_us, row.attempts, w_});
            if (++per_stream[m.stream] == 2) ++st_multi_row_streams;
            rows.push_back(row);
        }
        st_rows_claimed += static_cast<long>(rows.size());
        return rows;
    }

    // One row, one transaction: effect + completion commit together or not at all.
    // Returns the outcome word ("error" on an unexpected error).
    std::string succeed(const Row& row, bool fenced = true, bool drop_connection = false) {
        const Msg& m = g_msgs[row.msg];
        const std::string stream = std::to_string(m.stream), seq = std::to_string(m.seq);
        auto fail = [&](const Res& r, const char* what) {
            record_error("worker" + std::to_string(w_) + " " + what + ": " + r.error());
            db_.exec("ROLLBACK");
            return std::string("error");
        };
        Res r = db_.exec("BEGIN");
        if (!r.ok()) return fail(r, "BEGIN");
        r = db_.run("effect", {m.id, stream, seq, std::to_string(w_), std::to_string(row.token),
                               std::to_string(row.attempts)});
        if (!r.ok()) return fail(r, "insert effect");
        const bool inserted = r.rows() == 1;
        const int prev = inserted ? static_cast<int>(r.num(0, 1)) : 0;
        r = db_.run(fenced ? "complete" : "complete_unfenced", {m.id, std::to_string(row.token), stream, seq});
        if (!r.ok() || r.rows() != 1) return fail(r, "complete_work");
        const std::string outcome = r.get(0, 0);
        const long long now_us = r.num(0, 1);
        if (drop_connection) {  // crash with the completion done but not committed
            db_.close();
            ++st_dropped_txn;
            db_.connect();
            return "dropped";
        }
        if (outcome != "completed") {
            Res rb = db_.exec("ROLLBACK");
            if (!inserted) ++st_stale_effect_conflicts;  // a stale delivery whose effect exists: rolled back
            if (outcome == "lease_lost") ++st_complete_lost;
            else if (outcome == "not_found") ++st_complete_not_found;
            else record_error("complete_work answered \"" + outcome + "\"");
            return outcome;
        }
        if (!inserted) ++st_dup_processed;              // completed although its effect was committed before
        if (inserted && m.seq <= prev) ++st_order_live;  // committed after a later message of its stream
        if (r.num(0, 2) != 1) return fail(r, "update progress");
        r = db_.exec("COMMIT");
        if (!r.ok()) {
            record_error("COMMIT: " + r.error());
            return "error";
        }
        res_.push_back({row.msg, row.token, now_us, 0, 'C'});
        ++g_completed;
        return outcome;
    }

    std::string fail_row(const Row& row, bool retryable, const char* error) {
        const Msg& m = g_msgs[row.msg];
        Res r = db_.must_run("fail", {m.id, error, std::to_string(row.token), retryable ? "true" : "false"});
        if (!r.ok() || r.rows() != 1) return "error";
        const std::string outcome = r.get(0, 0);
        if (outcome == "retry_scheduled") {
            res_.push_back({row.msg, row.token, r.num(0, 2), r.num(0, 1), 'R'});
            ++st_retry;
        } else if (outcome == "dead_lettered") {
            res_.push_back({row.msg, row.token, r.num(0, 2), 0, 'D'});
            ++g_dead_by_fail;
        } else if (outcome == "lease_lost") {
            ++st_fail_lost;
        } else if (outcome == "not_found") {
            ++st_fail_not_found;
        } else {
            record_error("fail_work answered \"" + outcome + "\"");
        }
        return outcome;
    }

    // Renews the leases of `rows`; returns the streams whose lease was lost.
    std::set<int> renew(const std::vector<Row>& rows) {
        std::set<int> lost;
        if (rows.empty()) return lost;
        std::vector<std::string> ids, tokens;
        for (const Row& r : rows) {
            ids.push_back(g_msgs[r.msg].id);
            tokens.push_back(std::to_string(r.token));
        }
        ++st_renew_calls;
        Res r = db_.must_run("renew", {join_array(ids), join_array(tokens), std::to_string(cfg.lease_seconds)});
        for (int i = 0; i < r.rows(); ++i) {
            int idx = msg_index(r.get(i, 0));
            if (idx < 0) continue;
            long long token = 0;
            for (const Row& row : rows)
                if (row.msg == idx) token = row.token;
            if (r.get(i, 1) == "renewed") {
                ++st_renewed;
                res_.push_back({idx, token, r.num(i, 2), 0, 'N'});
            } else {
                ++st_renew_lost;
                lost.insert(g_msgs[idx].stream);
            }
        }
        return lost;
    }

    void release(const std::vector<Row>& rows) {
        if (rows.empty()) return;
        std::vector<std::string> ids, tokens;
        for (const Row& r : rows) {
            ids.push_back(g_msgs[r.msg].id);
            tokens.push_back(std::to_string(r.token));
        }
        Res r = db_.must_run("release", {join_array(ids), join_array(tokens)});
        for (int i = 0; i < r.rows(); ++i) {
            int idx = msg_index(r.get(i, 0));
            if (idx < 0) continue;
            long long token = 0;
            for (const Row& row : rows)
                if (row.msg == idx) token = row.token;
            if (r.get(i, 1) == "released") {
                ++st_released;
                res_.push_back({idx, token, r.num(i, 2), 0, 'L'});
            } else {
                ++st_release_lost;
            }
        }
    }

    void process(std::vector<Row>& rows) {
        const bool sabotage_order = cfg.sabotage == "order";
        if (sabotage_order) std::reverse(rows.begin(), rows.end());
        std::vector<char> handled(rows.size(), 0);
        // Stops work on a stream for this batch: its remaining rows are released at once, so
        // they wait for their turn without holding the stream.
        auto stop_stream = [&](int stream, std::size_t from) {
            std::vector<Row> rest;
            for (std::size_t j = from; j < rows.size(); ++j)
                if (!handled[j] && g_msgs[rows[j].msg].stream == stream) {
                    handled[j] = 1;
                    rest.push_back(rows[j]);
                }
            release(rest);
        };
        auto lease_base = Clock::now();
        const auto renew_after = std::chrono::milliseconds(cfg.lease_seconds * 1000 / 2);
        std::uniform_real_distribution<double> unit(0.0, 1.0);
        for (std::size_t i = 0; i < rows.size(); ++i) {
            if (handled[i]) continue;
            if (Clock::now() - lease_base > renew_after) {
                std::vector<Row> keep;
                for (std::size_t j = i; j < rows.size(); ++j)
                    if (!handled[j]) keep.push_back(rows[j]);
                for (int s : renew(keep)) stop_stream(s, i);
                lease_base = Clock::now();
                if (handled[i]) continue;
            }
            handled[i] = 1;
            const Row& row = rows[i];
            const Msg& m = g_msgs[row.msg];
            if (cfg.stall_pct > 0 && static_cast<int>(rng_() % 100) < cfg.stall_pct) {
                // A stalled worker (a GC pause, a slow call): its lease lapses, another worker
                // may take the stream over, and this one then goes on with its old tokens. Its
                // completions must never land ahead of an older row of the stream.
                ++st_stalls;
                std::this_thread::sleep_for(std::chrono::milliseconds(cfg.lease_seconds * 1000 + 300));
            }
            if (m.hang) {  // stuck on this message: its lease lapses, the rest of its stream is released
                ++st_abandoned;
                stop_stream(m.stream, i + 1);
                continue;
            }
            if (m.slow) {  // 3 x 0.75 s of work, longer than the lease: renewed in between
                ++st_slow;
                bool lost = false;
                for (int step = 0; step < 3 && !lost; ++step) {
                    std::this_thread::sleep_for(std::chrono::milliseconds(750));
                    std::vector<Row> keep{row};
                    for (std::size_t j = i + 1; j < rows.size(); ++j)
                        if (!handled[j]) keep.push_back(rows[j]);
                    for (int s : renew(keep)) {
                        if (s == m.stream) lost = true;
                        stop_stream(s, i + 1);
                    }
                }
                lease_base = Clock::now();
                if (lost) continue;
            }
            const double x = unit(rng_);
            std::string outcome;
            if (m.poison) {
                ++st_poison_fail;
                outcome = fail_row(row, true, "poison message");
            } else if (x < cfg.fail_p) {
                outcome = fail_row(row, true, "transient failure");
            } else if (x < cfg.fail_p + cfg.fatal_p) {
                ++st_fatal;
                outcome = fail_row(row, false, "permanent failure");
            } else {
                outcome = succeed(row);
            }
            // After anything but completed / dead_lettered, later rows of the stream must wait.
            if (outcome != "completed" && outcome != "dead_lettered" && !sabotage_order) stop_stream(m.stream, i + 1);
        }
    }

    // Claims a batch and stops working on it (no renewal). The first crash also drops the
    // connection in the middle of a completing transaction. Once a row was re-claimed (its token
    // changed) or is gone, the old holder tries to complete it: never 'completed'.
    bool crash(bool drop_connection) {
        // A crash with a good number of rows in hand: claims for up to 1 s until it holds 30.
        std::vector<Row> rows;
        const auto until = Clock::now() + std::chrono::seconds(1);
        while (rows.size() < 30 && Clock::now() < until && !g_stop) {
            std::vector<Row> more = claim(static_cast<int>(30 - rows.size()));
            rows.insert(rows.end(), more.begin(), more.end());
            if (more.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(20));
        }
        if (rows.empty()) return false;
        ++st_crashes;
        st_crash_rows += static_cast<long>(rows.size());
        logf("worker%d crashes holding %zu rows (first token %lld)%s", w_, rows.size(), rows[0].token,
             drop_connection ? ", connection dropped mid-completion" : "");
        if (drop_connection) succeed(rows[0], true, true);
        std::vector<std::string> ids;
        for (const Row& r : rows) ids.push_back(g_msgs[r.msg].id);
        const std::string id_array = join_array(ids);
        std::vector<char> tried(rows.size(), 0);
        std::size_t left = rows.size();
        const bool fenced = cfg.sabotage != "fence";
        auto deadline = Clock::now() + std::chrono::seconds(30);
        while (left > 0 && !g_stop && Clock::now() < deadline) {
            std::this_thread::sleep_for(std::chrono::milliseconds(2));
            Res r = db_.must_run("watch", {id_array});
            if (!r.ok()) break;
            std::map<std::string, long long> current;  // message id -> token (0: none)
            for (int i = 0; i < r.rows(); ++i) current[r.get(i, 0)] = r.null(i, 1) ? 0 : r.num(i, 1);
            for (std::size_t k = 0; k < rows.size(); ++k) {
                if (tried[k]) continue;
                auto it = current.find(g_msgs[rows[k].msg].id);
                if (it != current.end() && it->second == rows[k].token) continue;  // still ours: wait
                tried[k] = 1;
                --left;
                late_complete(rows[k], fenced);
            }
        }
        for (std::size_t k = 0; k < rows.size(); ++k)  // never re-claimed: completing is allowed then
            if (!tried[k] && !g_stop) {
                ++st_late_unreclaimed;
                late_complete(rows[k], fenced);
            }
        logf("worker%d back after its crash: late completions completed=%ld lease_lost=%ld not_found=%ld", w_,
             st_late_completed.load(), st_late_lease_lost.load(), st_late_not_found.load());
        return true;
    }

    void late_complete(const Row& row, bool fenced) {
        std::string outcome = succeed(row, fenced);
        if (outcome == "completed") ++st_late_completed;
        else if (outcome == "lease_lost") ++st_late_lease_lost;
        else if (outcome == "not_found") ++st_late_not_found;
    }

    void flush() {
        std::lock_guard<std::mutex> lock(g_ev_mu);
        g_claims.insert(g_claims.end(), claims_.begin(), claims_.end());
        g_res.insert(g_res.end(), res_.begin(), res_.end());
    }

    int w_;
    Pg db_;
    std::mt19937_64 rng_;
    std::string instance_;
    std::vector<ClaimEv> claims_;
    std::vector<ResEv> res_;
};

// ---------------------------------------------------------------------------------------------
// Planning
void plan_messages() {
    std::mt19937_64 rng(cfg.seed);
    for (int s = 0; s < cfg.streams; ++s) g_stream_ids.push_back(uuid4(rng));
    // Each producer's messages: its streams (s % producers == p), interleaved at random,
    // numbered 1, 2, ... per stream in the order the producer sends them.
    g_plans.resize(cfg.producers);
    std::vector<int> next_seq(cfg.streams, 0);
    std::vector<std::vector<int>> sequence(cfg.producers);
    for (int i = 0; i < cfg.messages; ++i) {
        Msg m;
        m.id = uuid4(rng);
        m.stream = i % cfg.streams;
        m.producer = m.stream % cfg.producers;
        g_msgs.push_back(m);
    }
    for (int p = 0; p < cfg.producers; ++p) {
        for (int i = 0; i < cfg.messages; ++i)
            if (g_msgs[i].producer == p) sequence[p].push_back(i);
        std::shuffle(sequence[p].begin(), sequence[p].end(), rng);
    }
    // Sequence numbers in send order.
    for (int p = 0; p < cfg.producers; ++p)
        for (int i : sequence[p]) g_msgs[i].seq = ++next_seq[g_msgs[i].stream];
    for (int i = 0; i < cfg.messages; ++i) g_index[g_msgs[i].id] = i;
    // Poison and hang messages, and the redeliveries.
    std::vector<int> all(cfg.messages);
    for (int i = 0; i < cfg.messages; ++i) all[i] = i;
    std::shuffle(all.begin(), all.end(), rng);
    int k = 0;
    for (int n = 0; n < cfg.poison; ++n) g_msgs[all[k++]].poison = true;
    for (int n = 0; n < cfg.hang; ++n) g_msgs[all[k++]].hang = true;
    for (int n = 0; n < cfg.slow; ++n) g_msgs[all[k++]].slow = true;
    std::shuffle(all.begin(), all.end(), rng);
    const int redeliveries = cfg.messages * cfg.redeliver_pct / 100;
    for (int n = 0; n < redeliveries; ++n) g_msgs[all[n]].redeliver = (n % 2 == 0) ? 1 : 2;
    // Batches: originals in send order; a mixed redelivery goes 1..6 batches after its original.
    std::vector<int> finals;
    for (int p = 0; p < cfg.producers; ++p) {
        Plan& plan = g_plans[p];
        const int nb = static_cast<int>((sequence[p].size() + cfg.batch - 1) / cfg.batch);
        plan.batches.resize(nb);
        plan.is_redelivery.resize(nb);
        for (std::size_t pos = 0; pos < sequence[p].size(); ++pos) {
            const int b = static_cast<int>(pos / cfg.batch);
            plan.batches[b].push_back(sequence[p][pos]);
            plan.is_redelivery[b].push_back(0);
        }
        for (std::size_t pos = 0; pos < sequence[p].size(); ++pos) {
            const int i = sequence[p][pos];
            if (g_msgs[i].redeliver == 2) finals.push_back(i);
            if (g_msgs[i].redeliver != 1) continue;
            const int b = static_cast<int>(pos / cfg.batch) + 1 + static_cast<int>(rng() % 6);
            if (b >= nb) {
                g_msgs[i].redeliver = 2;
                finals.push_back(i);
                continue;
            }
            // Anywhere in the batch: the order of the new messages does not change.
            const std::size_t at = rng() % (plan.batches[b].size() + 1);
            plan.batches[b].insert(plan.batches[b].begin() + at, i);
            plan.is_redelivery[b].insert(plan.is_redelivery[b].begin() + at, 1);
        }
    }
    std::shuffle(finals.begin(), finals.end(), rng);
    for (std::size_t i = 0; i < finals.size(); i += cfg.batch)
        g_final_batches.emplace_back(finals.begin() + i, finals.begin() + std::min(finals.size(), i + cfg.batch));
}

// ---------------------------------------------------------------------------------------------
// Analysis of the recorded events (assertions 2 and 3, client side).
struct EventCheck {
    long same_token = 0, early_redelivery = 0, after_final = 0, attempts_wrong = 0, stream_overlap = 0,
         two_outcomes = 0;
    std::vector<std::string> samples;
    void note(const std::string& s) {
        if (samples.size() < 12) samples.push_back(s);
    }
};

EventCheck analyse_events() {
    EventCheck ec;
    const long long lease_us = cfg.lease_seconds * 1000000LL;
    // What became of each lease (message, token): renewals and at most one final outcome.
    struct Lease {
        const ClaimEv* claim = nullptr;
        long long lease_end = 0;  // expiry, extended by renewals
        char kind = 0;            // final outcome (0: none, the lease lapsed or was lost)
        long long final_us = 0;   // when the outcome's transaction started
        long long sched_us = 0;   // retry_scheduled: the retry time
    };
    std::map<std::pair<int, long long>, Lease> leases;
    std::vector<std::vector<Lease*>> per_msg(cfg.messages);
    for (const auto& c : g_claims) {
        Lease& l = leases[{c.msg, c.token}];
        if (l.claim) {
            ++ec.same_token;
            ec.note(g_msgs[c.msg].id + ": handed out twice with token " + std::to_string(c.token));
            continue;
        }
        l.claim = &c;
        l.lease_end = c.expiry_us;
        per_msg[c.msg].push_back(&l);
    }
    for (const auto& r : g_res) {
        auto it = leases.find({r.msg, r.token});
        if (it == leases.end()) {
            ++ec.two_outcomes;
            ec.note(g_msgs[r.msg].id + ": outcome " + std::string(1, r.kind) + " for token " + std::to_string(r.token) +
                    " that never handed it out");
            continue;
        }
        Lease& l = it->second;
        if (r.kind == 'N') {
            l.lease_end = std::max(l.lease_end, r.now_us + lease_us);
            continue;
        }
        if (l.kind) {
            ++ec.two_outcomes;
            ec.note(g_msgs[r.msg].id + ": two outcomes for token " + std::to_string(r.token));
        }
        l.kind = r.kind;
        l.final_us = r.now_us;
        l.sched_us = r.sched_us;
    }
    // A row that goes back to the queue ends its holder's run behind it (DESIGN §3.4): when a
    // row failed (R) or was released (L), the server gave back the later rows of its stream
    // under the same token that had no outcome yet, at that moment, with their delivery refunded.
    // The worker's own release of them then answers lease_lost, so they count as released here.
    std::map<std::pair<int, long long>, std::vector<Lease*>> runs;  // (stream, token) -> leases
    for (auto& [key, l] : leases) runs[{g_msgs[key.first].stream, key.second}].push_back(&l);
    for (auto& [key, run] : runs) {
        std::sort(run.begin(), run.end(), [](const Lease* a, const Lease* b) {
            return g_msgs[a->claim->msg].seq < g_msgs[b->claim->msg].seq;
        });
        long long ended_at = -1;
        for (Lease* l : run) {
            if (ended_at >= 0 && l->kind == 0) {
                l->kind = 'L';
                l->final_us = ended_at;
            } else if ((l->kind == 'R' || l->kind == 'L') && ended_at < 0) {
                ended_at = l->final_us;
            }
        }
    }
    auto kind_name = [](char k) { return k ? std::string(1, k) : std::string("none"); };
    // Claim times: claim_work compares leases and retry times with its p_now (exact), but it sees
    // an outcome (completed, failed, released) once that outcome has committed, which can be
    // after its p_now (each statement inside takes a fresh snapshot). So an outcome certainly
    // was not visible to a claim when the claim had returned before the outcome's transaction began.
    for (int m = 0; m < cfg.messages; ++m) {
        auto& ls = per_msg[m];
        std::sort(ls.begin(), ls.end(), [](const Lease* a, const Lease* b) { return a->claim->token < b->claim->token; });
        for (std::size_t k = 0; k < ls.size(); ++k) {
            const ClaimEv& c = *ls[k]->claim;
            if (c.attempts > cfg.max_attempts) {
                ++ec.attempts_wrong;
                ec.note(g_msgs[m].id + ": handed out with attempts " + std::to_string(c.attempts));
            }
            if (k == 0) {
                if (c.attempts != 1) {
                    ++ec.attempts_wrong;
                    ec.note(g_msgs[m].id + ": first delivery has attempts " + std::to_string(c.attempts));
                }
                continue;
            }
            const Lease& p = *ls[k - 1];
            if (p.kind == 'C' || p.kind == 'D') {
                ++ec.after_final;
                ec.note(g_msgs[m].id + ": handed out again (token " + std::to_string(c.token) + ") after it was " +
                        (p.kind == 'C' ? "completed" : "dead-lettered") + " with token " + std::to_string(p.claim->token));
                continue;
            }
            bool early = false;
            // A claim takes its leases between its p_now and its return. A lease that ended
            // without an outcome lapsed at lease_end, or was voided later by a takeover of its
            // stream's head: the row was handed out too early only if the claim had returned
            // before then. (The shared-memory store's claims, which lock nothing and may take
            // several rounds, do take rows that a takeover freed after their p_now.)
            if (p.kind == 0) early = c.end_us < p.lease_end;             // the previous lease had not lapsed
            else if (p.kind == 'R') early = c.now_us < p.sched_us;       // before its retry time
            if (p.kind == 'R' || p.kind == 'L') early = early || c.end_us < p.final_us;  // before it was let go
            if (early) {
                ++ec.early_redelivery;
                ec.note(g_msgs[m].id + ": handed out (token " + std::to_string(c.token) + ", p_now " +
                        std::to_string(c.now_us) + ", returned " + std::to_string(c.end_us) +
                        ") while the previous lease was not over (token " + std::to_string(p.claim->token) +
                        ", lease end " + std::to_string(p.lease_end) + ", outcome " + kind_name(p.kind) + " at " +
                        std::to_string(p.final_us) + ", retry at " + std::to_string(p.sched_us) + ")");
            }
            const int want = p.claim->attempts + (p.kind == 'L' ? 0 : 1);
            if (c.attempts != want) {
                ++ec.attempts_wrong;
                ec.note(g_msgs[m].id + ": attempts " + std::to_string(c.attempts) + " after " +
                        std::to_string(p.claim->attempts) + " (previous outcome " + kind_name(p.kind) + ")");
            }
        }
    }
    // One lease holder per stream: no row of a stream may be handed out while a row of the same
    // stream is held under another token, i.e. its lease had not lapsed at the claim's p_now and
    // its outcome (if any) began only after the claim had returned.
    std::vector<std::vector<const Lease*>> per_stream(cfg.streams);
    for (const auto& [key, l] : leases) per_stream[g_msgs[key.first].stream].push_back(&l);
    for (int s = 0; s < cfg.streams; ++s) {
        for (const Lease* b : per_stream[s])
            for (const Lease* a : per_stream[s]) {
                if (a->claim->token >= b->claim->token) continue;
                // As above: without an outcome, a's lease surely overlapped b's only if b had returned
                // before a's lease lapsed.
                const bool live = a->kind == 0 ? a->lease_end > b->claim->end_us
                                               : a->lease_end > b->claim->now_us && b->claim->end_us < a->final_us;
                // And a's row was surely leased before b's ended: a claim takes its leases in rounds
                // under one token (since 0.14.0 also to fill up from further streams), so a claim
                // that began before b's may take a later row of the stream in a later round, after
                // b's row was finished; only if a had returned before b's outcome (or b's lease
                // lapsed) did both leases surely exist at once.
                const bool a_before_b_ended = a->claim->end_us < (b->kind != 0 ? b->final_us : b->lease_end);
                if (!live || !a_before_b_ended) continue;
                ++ec.stream_overlap;
                ec.note("stream " + std::to_string(s) + ": seq " + std::to_string(g_msgs[b->claim->msg].seq) +
                        " handed out (token " + std::to_string(b->claim->token) + ", p_now " +
                        std::to_string(b->claim->now_us) + ", returned " + std::to_string(b->claim->end_us) +
                        ", outcome " + kind_name(b->kind) + " at " + std::to_string(b->final_us) +
                        ") while seq " + std::to_string(g_msgs[a->claim->msg].seq) + " was held (token " +
                        std::to_string(a->claim->token) + ", p_now " + std::to_string(a->claim->now_us) + ", returned " +
                        std::to_string(a->claim->end_us) + ", lease end " + std::to_string(a->lease_end) + ", outcome " +
                        kind_name(a->kind) + " at " + std::to_string(a->final_us) + ")");
            }
    }
    return ec;
}

}  // namespace

int main() {
    cfg.seed = static_cast<uint64_t>(env_long("STRESS_SEED", static_cast<long>(std::random_device{}() & 0x7FFFFFFF)));
    cfg.messages = static_cast<int>(env_long("STRESS_MESSAGES", cfg.messages));
    cfg.streams = static_cast<int>(env_long("STRESS_STREAMS", cfg.streams));
    cfg.work_limit_s = static_cast<int>(env_long("STRESS_LIMIT_SECONDS", cfg.work_limit_s));
    cfg.produce_pause_ms = static_cast<int>(env_long("STRESS_PRODUCE_PAUSE_MS", cfg.produce_pause_ms));
    cfg.max_backlog = static_cast<int>(env_long("STRESS_MAX_BACKLOG", cfg.max_backlog));
    cfg.sabotage = env_str("STRESS_SABOTAGE", "");
    cfg.max_per_stream = static_cast<int>(env_long("STRESS_MAX_PER_STREAM", 0));
    cfg.prelease = env_long("STRESS_PRELEASE", 1) != 0;
    cfg.lease_seconds = static_cast<int>(env_long("STRESS_LEASE_SECONDS", cfg.lease_seconds));
    cfg.stall_pct = static_cast<int>(env_long("STRESS_STALL_PCT", 0));
    // Nothing may keep the run from ending: a hung connection is a failure, not a hang of CI.
    std::thread([] {
        std::this_thread::sleep_for(std::chrono::seconds(cfg.work_limit_s + 30));
        std::fprintf(stdout, "inbox_stress: FAIL (watchdog: still running after %d s)\n", cfg.work_limit_s + 30);
        std::fflush(stdout);
        _exit(3);
    }).detach();

    logf("seed %" PRIu64 ": %d messages over %d streams, %d producers, %d workers, %d%% redelivered, lease %d s,"
         " max_attempts %d%s%s",
         cfg.seed, cfg.messages, cfg.streams, cfg.producers, cfg.workers, cfg.redeliver_pct, cfg.lease_seconds,
         cfg.max_attempts, cfg.sabotage.empty() ? "" : ", SABOTAGE ", cfg.sabotage.c_str());
    plan_messages();

    Pg admin("admin");
    admin.must("CREATE EXTENSION IF NOT EXISTS whizbang");
    admin.must("INSERT INTO whizbang.wh_settings (setting_key, setting_value) VALUES"
               " ('max_attempts', $1), ('retry_base_seconds', '1'), ('retry_max_seconds', '1')",
               {std::to_string(cfg.max_attempts)});
    admin.must("DROP SCHEMA IF EXISTS stress CASCADE");
    admin.must("CREATE SCHEMA stress");
    admin.must("CREATE TABLE stress.expected (message_id uuid PRIMARY KEY, stream_no int NOT NULL, seq int NOT NULL,"
               " kind text NOT NULL)");
    admin.must("CREATE TABLE stress.progress (stream_no int PRIMARY KEY, last_seq int NOT NULL)");
    admin.must("CREATE TABLE stress.effects (commit_no bigserial PRIMARY KEY, message_id uuid NOT NULL UNIQUE,"
               " stream_no int NOT NULL, seq int NOT NULL, prev_seq int NOT NULL, worker int NOT NULL,"
               " lease_token bigint NOT NULL, attempts int NOT NULL, done_at timestamptz NOT NULL DEFAULT clock_timestamp())");
    admin.must("INSERT INTO stress.progress SELECT g, 0 FROM generate_series(0, $1::int - 1) g",
               {std::to_string(cfg.streams)});
    {
        std::vector<std::string> ids, streams, seqs, kinds;
        for (const Msg& m : g_msgs) {
            ids.push_back(m.id);
            streams.push_back(std::to_string(m.stream));
            seqs.push_back(std::to_string(m.seq));
            kinds.push_back(m.hang ? "hang" : m.poison ? "poison" : m.slow ? "slow" : "normal");
        }
        admin.must("INSERT INTO stress.expected SELECT * FROM unnest($1::uuid[], $2::int[], $3::int[], $4::text[])",
                   {join_array(ids), join_array(streams), join_array(seqs), join_array(kinds)});
    }
    long redeliveries = 0;
    for (const Msg& m : g_msgs) redeliveries += m.redeliver != 0;

    {
        std::mt19937_64 rng(cfg.seed + 17);
        for (int w = 0; w < cfg.workers; ++w) g_instances.push_back(uuid4(rng));
    }
    std::vector<std::unique_ptr<Worker>> workers;
    for (int w = 0; w < cfg.workers; ++w) workers.emplace_back(new Worker(w));
    logf("set up; starting %d producers and %d workers", cfg.producers, cfg.workers);
    const auto run_start = Clock::now();
    std::vector<double> produce_seconds(cfg.producers, 0);
    std::vector<std::thread> threads;
    for (int w = 0; w < cfg.workers; ++w) threads.emplace_back([&workers, w] { workers[w]->loop(); });
    std::vector<std::thread> producers;
    for (int p = 0; p < cfg.producers; ++p) producers.emplace_back(producer, p, &produce_seconds[p]);

    // Monitor: stop the workers when every message is completed or dead-lettered.
    bool timed_out = false;
    double production_done_at = 0;
    std::thread joiner([&] {
        for (auto& t : producers) t.join();
        production_done_at = std::chrono::duration<double>(Clock::now() - run_start).count();
        g_production_done = true;
    });
    auto last_report = Clock::now();
    while (true) {
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
        const double elapsed = std::chrono::duration<double>(Clock::now() - run_start).count();
        Res r = admin.must("SELECT (SELECT count(*) FROM whizbang.wh_inbox), (SELECT count(*) FROM whizbang.wh_dead_letters)");
        const long queued = r.num(0, 0), dead = r.num(0, 1);
        if (Clock::now() - last_report > std::chrono::seconds(5)) {
            logf("stored %ld, completed %ld, dead-lettered %ld, queued %ld", g_stored.load(), g_completed.load(), dead,
                 queued);
            last_report = Clock::now();
        }
        if (g_production_done && queued == 0) break;
        if (elapsed > cfg.work_limit_s) {
            timed_out = true;
            logf("TIME LIMIT: %ld rows still queued after %d s", queued, cfg.work_limit_s);
            break;
        }
    }
    const double work_seconds = std::chrono::duration<double>(Clock::now() - run_start).count();
    g_stop = true;
    g_barrier_cv.notify_all();
    joiner.join();
    for (auto& t : threads) t.join();
    workers.clear();
    logf("run finished in %.2f s (production %.2f s)", work_seconds, production_done_at);

    if (cfg.sabotage == "lost") {  // happens "before" the checks: rows vanish behind whizbang's back
        admin.must("DELETE FROM whizbang.wh_dead_letters WHERE dead_letter_id IN"
                   " (SELECT dead_letter_id FROM whizbang.wh_dead_letters ORDER BY dead_letter_id LIMIT 3)");
        admin.must("DELETE FROM stress.effects WHERE commit_no IN (SELECT commit_no FROM stress.effects ORDER BY commit_no LIMIT 3)");
        logf("SABOTAGE lost: deleted 3 dead letters and 3 effects");
    }

    // ---- Assertions ---------------------------------------------------------------------
    std::vector<std::string> failures;
    auto check = [&](bool ok, const std::string& what) {
        std::printf("  %s %s\n", ok ? "ok  " : "FAIL", what.c_str());
        if (!ok) failures.push_back(what);
    };
    auto one = [&](const char* sql) { return admin.must(sql).num(0, 0); };

    std::printf("\n1. every message completed exactly once or dead-lettered\n");
    const long effects = one("SELECT count(*) FROM stress.effects");
    const long effect_ids = one("SELECT count(DISTINCT message_id) FROM stress.effects");
    const long dead = one("SELECT count(*) FROM whizbang.wh_dead_letters");
    const long dead_ids = one("SELECT count(DISTINCT (message_id, consumer)) FROM whizbang.wh_dead_letters");
    const long both = one("SELECT count(*) FROM stress.effects e JOIN whizbang.wh_dead_letters d USING (message_id)");
    const long missing = one("SELECT count(*) FROM stress.expected x WHERE NOT EXISTS (SELECT 1 FROM stress.effects e"
                             " WHERE e.message_id = x.message_id) AND NOT EXISTS (SELECT 1 FROM whizbang.wh_dead_letters d"
                             " WHERE d.message_id = x.message_id)");
    const long strangers = one("SELECT (SELECT count(*) FROM stress.effects e WHERE NOT EXISTS (SELECT 1 FROM stress.expected x"
                               " WHERE x.message_id = e.message_id)) + (SELECT count(*) FROM whizbang.wh_dead_letters d"
                               " WHERE NOT EXISTS (SELECT 1 FROM stress.expected x WHERE x.message_id = d.message_id))");
    const long inbox_left = one("SELECT count(*) FROM whizbang.wh_inbox");
    const long work_left = one("SELECT count(*) FROM whizbang.wh_inbox");
    const long dedup_ids = one("SELECT count(*) FROM whizbang.wh_message_deduplication WHERE consumer = ''");
    const long observations = one("SELECT coalesce(sum(observation_count), 0) FROM whizbang.wh_message_deduplication WHERE consumer = ''");
    const long dead_exhausted = admin.must("SELECT count(*) FROM whizbang.wh_dead_letters WHERE attempts >= $1::int",
                                           {std::to_string(cfg.max_attempts)}).num(0, 0);
    const long dead_hang = one("SELECT count(*) FROM whizbang.wh_dead_letters d JOIN stress.expected x USING (message_id)"
                               " WHERE x.kind = 'hang'");
    const long dead_poison = one("SELECT count(*) FROM whizbang.wh_dead_letters d JOIN stress.expected x USING (message_id)"
                                 " WHERE x.kind = 'poison'");
    const long hang_done = one("SELECT count(*) FROM stress.effects e JOIN stress.expected x USING (message_id)"
                               " WHERE x.kind IN ('hang', 'poison')");
    check(effects == effect_ids, "effects: " + std::to_string(effects) + " rows, " + std::to_string(effect_ids) + " distinct messages");
    check(dead == dead_ids, "dead letters: " + std::to_string(dead) + " rows, " + std::to_string(dead_ids) + " distinct messages");
    check(both == 0, "messages both completed and dead-lettered: " + std::to_string(both));
    check(missing == 0, "messages neither completed nor dead-lettered: " + std::to_string(missing));
    check(strangers == 0, "completed or dead-lettered ids that were never sent: " + std::to_string(strangers));
    check(effect_ids + dead_ids == cfg.messages,
          "completed " + std::to_string(effect_ids) + " + dead-lettered " + std::to_string(dead_ids) + " = " +
              std::to_string(effect_ids + dead_ids) + " of " + std::to_string(cfg.messages));
    check(effects == g_completed, "committed completions counted by the workers: " + std::to_string(g_completed.load()));
    check(inbox_left == 0 && work_left == 0,
          "left in wh_inbox / wh_inbox: " + std::to_string(inbox_left) + " / " + std::to_string(work_left));
    check(dedup_ids == cfg.messages, "dedup records: " + std::to_string(dedup_ids));
    check(observations == cfg.messages + redeliveries,
          "deliveries observed " + std::to_string(observations) + " = sent " + std::to_string(cfg.messages + redeliveries));
    check(dead_hang == cfg.hang && dead_poison == cfg.poison && hang_done == 0,
          "hang messages dead-lettered " + std::to_string(dead_hang) + "/" + std::to_string(cfg.hang) +
              ", poison messages dead-lettered " + std::to_string(dead_poison) + "/" + std::to_string(cfg.poison));
    check(g_errors == 0, "unexpected SQL errors: " + std::to_string(g_errors.load()));
    check(st_renewed > 0, "leases renewed (slow messages, " + std::to_string(st_slow.load()) +
                              " deliveries): " + std::to_string(st_renewed.load()));
    check(st_store_mismatch == 0 && st_claim_mismatch == 0,
          "rows returned for the wrong message/stream/seq: store " + std::to_string(st_store_mismatch.load()) +
              ", claim " + std::to_string(st_claim_mismatch.load()));
    check(!timed_out, "finished within " + std::to_string(cfg.work_limit_s) + " s");

    std::printf("\n2. no completion out of stream order\n");
    const long order_bad = one("SELECT count(*) FROM (SELECT seq, lag(seq) OVER w AS prev FROM stress.effects"
                               " WINDOW w AS (PARTITION BY stream_no ORDER BY commit_no)) x WHERE x.prev >= x.seq");
    const long chain_bad = one("SELECT count(*) FROM (SELECT prev_seq, coalesce(lag(seq) OVER w, 0) AS prev FROM stress.effects"
                               " WINDOW w AS (PARTITION BY stream_no ORDER BY commit_no)) x WHERE x.prev <> x.prev_seq");
    const long seq_check = one("SELECT count(*) FROM stress.effects e JOIN stress.expected x USING (message_id)"
                               " WHERE e.seq <> x.seq OR e.stream_no <> x.stream_no");
    EventCheck ec = analyse_events();
    check(order_bad == 0, "effects committed after a later message of their stream: " + std::to_string(order_bad));
    check(chain_bad == 0, "effects whose transaction did not see the previous effect of the stream as last: " +
                              std::to_string(chain_bad));
    check(st_order_live == 0, "order inversions seen at commit by the workers: " + std::to_string(st_order_live.load()));
    check(seq_check == 0, "effects with a wrong stream/seq: " + std::to_string(seq_check));
    check(ec.stream_overlap == 0, "a stream claimed while another holder's lease on it was live: " + std::to_string(ec.stream_overlap));
    check(ec.early_redelivery == 0, "rows handed out before the previous lease ended / before their retry time: " +
                                        std::to_string(ec.early_redelivery));
    check(ec.attempts_wrong == 0, "claims with a wrong attempts count: " + std::to_string(ec.attempts_wrong));

    std::printf("\n3. no duplicate processed\n");
    check(st_redelivery_rows == 0, "redeliveries that store_inbox_messages returned as new: " +
                                       std::to_string(st_redelivery_rows.load()) + " of " +
                                       std::to_string(st_redelivered_mixed.load()));
    check(st_final_not_duplicate == 0 && st_redelivered_final > 0,
          "inbox_receive redeliveries not 'duplicate': " + std::to_string(st_final_not_duplicate.load()) + " of " +
              std::to_string(st_redelivered_final.load()));
    check(st_redelivered_mixed + st_redelivered_final == redeliveries,
          "redeliveries sent: " + std::to_string(st_redelivered_mixed + st_redelivered_final) + " of " +
              std::to_string(redeliveries));
    check(st_dup_processed == 0, "complete_work 'completed' for an already completed message: " +
                                     std::to_string(st_dup_processed.load()));
    check(ec.after_final == 0, "rows handed out again after a committed completion / dead-lettering: " +
                                   std::to_string(ec.after_final));
    check(ec.same_token == 0 && ec.two_outcomes == 0,
          "one token handed out twice / given two outcomes: " + std::to_string(ec.same_token) + " / " +
              std::to_string(ec.two_outcomes));
    check(st_crashes == 2 && st_late_completed == st_late_unreclaimed && st_late_lease_lost > 0,
          "crashes " + std::to_string(st_crashes.load()) + " holding " + std::to_string(st_crash_rows.load()) +
              " rows; late completions: lease_lost " + std::to_string(st_late_lease_lost.load()) + ", not_found " +
              std::to_string(st_late_not_found.load()) + ", completed " + std::to_string(st_late_completed.load()) +
              " (allowed only for rows nobody re-claimed: " + std::to_string(st_late_unreclaimed.load()) + ")");
    for (const auto& s : ec.samples) std::printf("    %s\n", s.c_str());
    {
        std::lock_guard<std::mutex> lock(g_error_mu);
        for (const auto& s : g_error_samples) std::printf("    error: %s", s.c_str());
    }
    if (timed_out || missing > 0) {
        Res r = admin.must("SELECT x.stream_no, x.seq, x.kind, coalesce(l.attempts, w.attempts),"
                           "       l.message_id IS NOT NULL AS leased, w.scheduled_for > now() AS scheduled, w.stream_seq"
                           "  FROM whizbang.wh_inbox w JOIN stress.expected x USING (message_id)"
                           "  LEFT JOIN whizbang.leases l"
                           "    ON l.source = 'inbox' AND l.consumer = w.consumer AND l.message_id = w.message_id"
                           " ORDER BY x.stream_no, x.seq LIMIT 15");
        for (int i = 0; i < r.rows(); ++i)
            std::printf("    left: stream %s seq %s (%s) attempts %s leased %s scheduled %s stream_seq %s\n",
                        r.get(i, 0).c_str(), r.get(i, 1).c_str(), r.get(i, 2).c_str(), r.get(i, 3).c_str(),
                        r.get(i, 4).c_str(), r.get(i, 5).c_str(), r.get(i, 6).c_str());
    }

    const double produce_max = *std::max_element(produce_seconds.begin(), produce_seconds.end());
    std::printf("\nfigures\n");
    std::printf("  store:    %d messages + %ld redeliveries in %ld batches (%ld stored pre-leased to a worker), %.2f s"
                " (%.0f messages/s incl. pauses of %d ms)\n",
                cfg.messages, redeliveries, st_batches.load(), st_leased_batches.load(), produce_max,
                cfg.messages / std::max(produce_max, 1e-9), cfg.produce_pause_ms);
    std::printf("  claim:    %ld calls (%ld empty), %ld rows handed out (%ld pre-leased at store), %ld times 2+ rows of"
                " one stream in one claim, max attempts seen %ld\n",
                st_claims.load(), st_empty_claims.load(), st_rows_claimed.load(), st_preleased_handed.load(),
                st_multi_row_streams.load(), st_max_attempts_seen.load());
    std::printf("  claim latency: mean %.1f ms (empty claims %.1f ms), max %.1f ms, %.1f s in claim_work over all workers,"
                " %ld claims took longer than the lease\n",
                st_claim_us / 1000.0 / std::max(1L, st_claims.load()),
                st_empty_claim_us / 1000.0 / std::max(1L, st_empty_claims.load()), st_max_claim_us / 1000.0,
                st_claim_us / 1e6, st_claims_over_lease.load());
    std::printf("  outcomes: completed %ld, retry_scheduled %ld, dead_lettered by fail_work %ld (permanent %ld, poison"
                " deliveries %ld), abandoned (hang) %ld, released %ld (lease_lost %ld)\n",
                g_completed.load(), st_retry.load(), g_dead_by_fail.load(), st_fatal.load(), st_poison_fail.load(),
                st_abandoned.load(), st_released.load(), st_release_lost.load());
    if (cfg.stall_pct > 0) std::printf("  stalls past the lease (no renewal): %ld\n", st_stalls.load());
    std::printf("  leases:   slow deliveries %ld, renew calls %ld (renewed %ld, lost %ld); complete lease_lost %ld, not_found %ld; fail"
                " lease_lost %ld, not_found %ld; stale deliveries whose effect existed (rolled back) %ld\n",
                st_slow.load(), st_renew_calls.load(), st_renewed.load(), st_renew_lost.load(), st_complete_lost.load(),
                st_complete_not_found.load(), st_fail_lost.load(), st_fail_not_found.load(),
                st_stale_effect_conflicts.load());
    std::printf("  dead letters: %ld (attempts exhausted %ld, hang %ld, poison %ld)\n", dead, dead_exhausted, dead_hang,
                dead_poison);
    std::printf("  end to end: %.2f s, %.0f messages finished/s, %.0f claimed rows/s\n", work_seconds,
                (effect_ids + dead_ids) / work_seconds, st_rows_claimed / work_seconds);

    const bool pass = failures.empty();
    std::printf("\ninbox_stress: %s seed=%" PRIu64 " messages=%d completed=%ld dead_lettered=%ld redeliveries=%ld"
                " duplicates_processed=%ld order_violations=%ld lost=%ld seconds=%.1f%s%s\n",
                pass ? "PASS" : "FAIL", cfg.seed, cfg.messages, effect_ids, dead_ids, redeliveries,
                st_dup_processed.load() + st_redelivery_rows.load() + st_final_not_duplicate.load() + ec.after_final,
                order_bad + st_order_live.load() + ec.stream_overlap, missing, work_seconds,
                cfg.sabotage.empty() ? "" : " sabotage=", cfg.sabotage.c_str());
    std::fflush(stdout);
    return pass ? 0 : 1;
}
