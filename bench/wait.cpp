// Load driver for the wait-for-work benchmark (issue 12; bench/wait starts it, see bench/README.md).
//
// Three parts, one run, one cluster (started with shared_preload_libraries = 'whizbang', so
// claims lease in shared memory and a committing store wakes waiting claims):
//
//   latency  1 producer, --workers waiting workers, one message at a time. The producer stores
//            one inbox message (store_inbox_messages, payload built before the clock starts) in
//            a transaction, takes the time right after COMMIT returns, and waits until a worker
//            has claimed it before the next one (after a random gap of 0..--gap-ms), so every
//            worker is idle when a message arrives. A worker takes the time when its claim
//            returns, then completes the row. Latency = claim returned - COMMIT returned (it can
//            be slightly negative: the wake-up is sent at commit, before the producer has read
//            the COMMIT's reply). Methods, interleaved by rounds:
//              wait    claim_work(..., p_max_rows => R, p_wait => '5 s') in a loop
//              poll    claim_work(..., p_max_rows => R); empty: sleep --poll-ms (100 ms, pgmq's
//                      read_with_poll default) on the client
//              notify  the producer also runs pg_notify('wb_work', '') in the storing
//                      transaction; each worker LISTENs on its own session, waits on the socket
//                      (poll() on PQsocket, PQconsumeInput, PQnotifies), then claims (no p_wait)
//                      until a claim comes back empty
//            The run of a method ends with one "stop" message per worker (a worker that claims
//            one completes it and leaves), so no claim is cut off.
//   cycle    the claim cycle (claim up to 100 + complete_work, a transaction each) on --conns
//            connections over a pre-filled backlog (the same staged rows before every cell),
//            with p_wait => '5 s' against without it, rounds alternating; msgs/s and the ratio.
//   idle     server CPU of --idle-workers connections each in claim_work(..., p_wait => '30 s')
//            on an empty queue for --idle-seconds (utime + stime of each backend from
//            /proc/<pid>/stat, and its schedstat run time), against the same number polling
//            every --poll-ms.
//
// The wait method needs the p_wait argument (whizbang 0.7.0); against an older extension it is
// left out and the results say so. Output: a text summary on stdout, a TSV (--tsv) and a
// markdown fragment (--md). Connection parameters come from the PG* environment (or --dsn).

#include <poll.h>

#include <unordered_map>

#include "common.h"

namespace {

using namespace bench;

// ---------------------------------------------------------------------------------------------
// Options

struct Options : RunOptions {
    std::vector<std::string> parts{"latency", "cycle", "idle"};
    std::vector<std::string> methods{"wait", "poll", "notify"};
    int messages = 2000;       // timed messages per method, split over the latency rounds
    int warm = 20;             // untimed messages at the start of every method's round
    int latency_rounds = 2;    // the methods take turns, --messages / rounds each time
    int workers = 4;
    int claim_rows = 1;        // p_max_rows of the latency part's claims
    double gap_ms = 2;         // random gap 0..gap before each store
    double wait_s = 5;         // p_wait of the wait method (latency and cycle)
    int poll_ms = 100;         // sleep of the poll method after an empty claim
    long cycle_rows = 150000;  // backlog before each cycle cell
    int cycle_claim = 100;
    int idle_workers = 20;
    double idle_seconds = 10;
    double idle_wait_s = 30;
    bool have_wait = false;    // the installed claim_work takes p_wait
};

[[noreturn]] void usage(const char* msg) {
    std::fprintf(stderr,
                 "error: %s\n"
                 "usage: wait_driver [--parts=latency,cycle,idle] [--methods=wait,poll,notify] [--messages=2000] "
                 "[--warm=20] [--latency-rounds=2] [--workers=4] [--claim-rows=1] [--gap-ms=2] [--wait-seconds=5] "
                 "[--poll-ms=100] [--cycle-rows=150000] [--cycle-claim=100] [--idle-workers=20] [--idle-seconds=10] "
                 "[--idle-wait-seconds=30] [--conns=2] [--rounds=3] [--retries=1] [--max-other=20] [--retry-budget=0.5] "
                 "[--seconds=2] [--envelope-bytes=1000] [--dsn=CONNINFO] [--tsv=FILE] [--md=FILE]\n",
                 msg);
    std::exit(2);
}

Options parse_options(int argc, char** argv) {
    Options o;
    o.rounds = 3;
    parse_key_values(
        argc, argv,
        [&](const std::string& key, const std::string& val) {
            if (key == "--parts") o.parts = split(val, ',');
            else if (key == "--methods") o.methods = split(val, ',');
            else if (key == "--messages") o.messages = std::stoi(val);
            else if (key == "--warm") o.warm = std::stoi(val);
            else if (key == "--latency-rounds") o.latency_rounds = std::stoi(val);
            else if (key == "--workers") o.workers = std::stoi(val);
            else if (key == "--claim-rows") o.claim_rows = std::stoi(val);
            else if (key == "--gap-ms") o.gap_ms = std::stod(val);
            else if (key == "--wait-seconds") o.wait_s = std::stod(val);
            else if (key == "--poll-ms") o.poll_ms = std::stoi(val);
            else if (key == "--cycle-rows") o.cycle_rows = std::stol(val);
            else if (key == "--cycle-claim") o.cycle_claim = std::stoi(val);
            else if (key == "--idle-workers") o.idle_workers = std::stoi(val);
            else if (key == "--idle-seconds") o.idle_seconds = std::stod(val);
            else if (key == "--idle-wait-seconds") o.idle_wait_s = std::stod(val);
            else return parse_run_option(key, val, o);
            return true;
        },
        usage);
    for (auto& p : o.parts)
        if (p != "latency" && p != "cycle" && p != "idle") usage(("unknown part " + p).c_str());
    for (auto& m : o.methods)
        if (m != "wait" && m != "poll" && m != "notify") usage(("unknown method " + m).c_str());
    if (o.workers < 1 || o.latency_rounds < 1 || o.messages < o.latency_rounds || o.claim_rows < 1)
        usage("need --workers >= 1, --latency-rounds >= 1, --messages >= rounds, --claim-rows >= 1");
    return o;
}

// ---------------------------------------------------------------------------------------------
// Statements

// $1 instance, $2 p_max_rows (, $3 p_wait). The poll and notify workers leave p_wait out, so
// they also run against an extension without it.
constexpr const char* kClaimSql =
    "SELECT message_id, lease_token, envelope FROM whizbang.claim_work($1::uuid, 'inbox', p_max_rows => $2::int)";
constexpr const char* kClaimWaitSql =
    "SELECT message_id, lease_token, envelope FROM whizbang.claim_work($1::uuid, 'inbox', p_max_rows => $2::int,"
    " p_wait => $3::interval)";
constexpr const char* kCompleteSql =
    "SELECT message_id, outcome FROM whizbang.complete_work('inbox', $1::uuid[], $2::bigint[])";

std::string interval_text(double s) { return fmt("%.3f", s) + " s"; }

double ms_between(Clock::time_point a, Clock::time_point b) {
    return std::chrono::duration<double, std::milli>(b - a).count();
}

void sleep_ms(double ms) {
    if (ms > 0) std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(ms));
}

long ticks_of(const std::vector<int>& pids) {
    long sum = 0;
    for (int p : pids) {
        long t = proc_stat_ticks(p);
        if (t < 0) return -1;
        sum += t;
    }
    return sum;
}

long stat_metric(PGconn* admin, const char* metric) {
    std::string v = exec_admin(admin, std::string("SELECT coalesce((SELECT value FROM whizbang.stats() WHERE metric = '") +
                                          metric + "'), -1)");
    return std::atol(v.c_str());
}

std::string pending_work(PGconn* admin) { return exec_admin(admin, "SELECT count(*) FROM whizbang.wh_inbox"); }

// ---------------------------------------------------------------------------------------------
// Latency: one message at a time

// What happened to each message of a method's round (by message number).
struct Tracker {
    std::unordered_map<std::string, int> index;  // message id text -> number
    std::vector<Clock::time_point> commit_done, claimed;
    std::vector<int> claims;  // times handed out
    int first_stop = 0;       // numbers from here on are stop messages
    std::mutex mu;
    std::condition_variable cv;

    // Records a claimed row; true when it was a stop message.
    bool record(const std::string& id, Clock::time_point t) {
        std::lock_guard<std::mutex> lk(mu);
        auto it = index.find(id);
        if (it == index.end()) return false;
        int i = it->second;
        if (claims[i]++ == 0) claimed[i] = t;
        cv.notify_all();
        return i >= first_stop;
    }

    bool wait_claimed(int i, double seconds) {
        std::unique_lock<std::mutex> lk(mu);
        return cv.wait_for(lk, std::chrono::duration<double>(seconds), [&] { return claims[i] > 0; });
    }
};

struct LatWorker {
    PGconn* conn = nullptr;
    std::string instance;
    long claims = 0, empty = 0, rows = 0;
    std::string error;
};

// One claim with the method's statement, then complete_work of what it returned. Returns the
// rows claimed (-1 on an error); `stop` when a stop message was among them.
int claim_and_complete(LatWorker& w, const Options& o, bool with_wait, Tracker& tr, bool& stop) {
    const std::string rows = std::to_string(o.claim_rows), wait = interval_text(o.wait_s);
    const char* values[3] = {w.instance.c_str(), rows.c_str(), wait.c_str()};
    std::string ids = "{", tokens = "{";
    int got = 0;
    {
        PgResult r(PQexecPrepared(w.conn, with_wait ? "claim_wait" : "claim", with_wait ? 3 : 2, values, nullptr, nullptr, 0));
        auto t = Clock::now();
        if (PQresultStatus(r.r) != PGRES_TUPLES_OK) {
            w.error = "ERROR: claim: " + one_line(PQresultErrorMessage(r.r));
            return -1;
        }
        got = PQntuples(r.r);
        ++w.claims;
        if (got == 0) ++w.empty;
        for (int i = 0; i < got; ++i) {
            if (tr.record(PQgetvalue(r.r, i, 0), t)) stop = true;
            ids += std::string(i ? "," : "") + PQgetvalue(r.r, i, 0);
            tokens += std::string(i ? "," : "") + PQgetvalue(r.r, i, 1);
        }
    }
    if (got == 0) return 0;
    w.rows += got;
    ids += "}";
    tokens += "}";
    const char* cv[2] = {ids.c_str(), tokens.c_str()};
    PgResult r(PQexecPrepared(w.conn, "complete", 2, cv, nullptr, nullptr, 0));
    if (PQresultStatus(r.r) != PGRES_TUPLES_OK || PQntuples(r.r) != got) {
        w.error = "ERROR: complete: " + one_line(PQresultErrorMessage(r.r));
        return -1;
    }
    for (int i = 0; i < got; ++i)
        if (std::strcmp(PQgetvalue(r.r, i, 1), "completed") != 0) {
            w.error = "complete said '" + std::string(PQgetvalue(r.r, i, 1)) + "'";
            return -1;
        }
    return got;
}

// The LISTEN worker's wait: returns once a notification has arrived (all queued ones are
// consumed) or after `seconds` without one.
void wait_for_notify(PGconn* c, double seconds) {
    const auto until = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
    for (;;) {
        PQconsumeInput(c);
        bool got = false;
        while (PGnotify* n = PQnotifies(c)) {
            PQfreemem(n);
            got = true;
        }
        if (got) return;
        auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - Clock::now()).count();
        if (left <= 0) return;
        pollfd p{PQsocket(c), POLLIN, 0};
        poll(&p, 1, static_cast<int>(left));
    }
}

void latency_worker(const std::string& method, LatWorker& w, const Options& o, Tracker& tr, std::atomic<bool>& abort) {
    bool stop = false;
    while (!stop && !abort.load()) {
        if (method == "wait") {
            if (claim_and_complete(w, o, true, tr, stop) < 0) return;
        } else if (method == "poll") {
            int n = claim_and_complete(w, o, false, tr, stop);
            if (n < 0) return;
            if (n == 0 && !stop) sleep_ms(o.poll_ms);
        } else {  // notify: claim until empty, then wait on the socket
            int n;
            do {
                n = claim_and_complete(w, o, false, tr, stop);
            } while (n > 0 && !stop);
            if (n < 0) return;
            if (!stop) wait_for_notify(w.conn, 10);
        }
    }
}

struct LatencyResult {
    std::string method;
    std::vector<double> lat_ms;      // timed messages
    std::vector<double> commit_ms;   // the producer's COMMIT round trip
    long lost = 0, twice = 0, claims = 0, empty = 0, stored = 0;
    double backend_cpu_s = 0, seconds = 0, other_cpu_pct_max = 0;
    long wakeups = 0;                // claim_wakeups of stats() over the method's rounds (-1: none)
    std::vector<std::string> problems;
};

struct Producer {
    PGconn* conn;
    MessageFactory factory;
    std::mt19937_64 rng;
};

// One round of one method: warm + n timed messages, then one stop message per worker.
void latency_round(const Options& o, const std::string& method, int n, PGconn* admin, Producer& prod,
                   std::vector<std::unique_ptr<LatWorker>>& ws, LatencyResult& res) {
    // Payloads first (one message each), then the tracker.
    const int total = o.warm + n + static_cast<int>(ws.size());
    std::vector<std::string> json(total);
    Tracker tr;
    tr.commit_done.resize(total);
    tr.claimed.resize(total);
    tr.claims.assign(total, 0);
    tr.first_stop = o.warm + n;
    for (int i = 0; i < total; ++i) {
        std::vector<Uuid> id;
        json[i] = inbox_batch_json(prod.factory, 1, id);
        tr.index[uuid_text(id[0])] = i;
    }
    std::string left = pending_work(admin);
    if (left != "0") {
        res.problems.push_back(left + " work rows left before a round; truncated");
        exec_admin(admin, "TRUNCATE whizbang.wh_inbox");
    }
    for (auto& w : ws) {
        w->claims = w->empty = w->rows = 0;
        w->error.clear();
        if (method == "notify") exec_admin(w->conn, "LISTEN wb_work");
    }
    std::vector<int> pids;
    for (auto& w : ws) pids.push_back(PQbackendPID(w->conn));
    const long wake0 = stat_metric(admin, "claim_wakeups");
    const double cpu0 = backends_cpu_seconds(pids), busy0 = machine_busy_seconds(), self0 = self_cpu_seconds();
    const auto t_start = Clock::now();

    std::atomic<bool> abort{false};
    std::atomic<int> live{static_cast<int>(ws.size())};
    std::vector<std::thread> ts;
    for (auto& w : ws)
        ts.emplace_back([&, wp = w.get()] {
            latency_worker(method, *wp, o, tr, abort);
            --live;
        });
    sleep_ms(300);  // every worker in its first claim / wait

    std::uniform_real_distribution<double> gap(0, o.gap_ms);
    const double timeout_s = std::max(o.wait_s, o.poll_ms / 1000.0) + 5;
    for (int i = 0; i < total; ++i) {
        if (i >= tr.first_stop && live.load() == 0) break;
        sleep_ms(gap(prod.rng));
        std::string e = exec_ok(prod.conn, "BEGIN");
        const char* values[2] = {json[i].c_str(), ""};
        PgResult r(PQexecPrepared(prod.conn, "store", 2, values, nullptr, nullptr, 0));
        if (e.empty() && (PQresultStatus(r.r) != PGRES_TUPLES_OK || PQntuples(r.r) != 1))
            e = "ERROR: store: " + one_line(PQresultErrorMessage(r.r));
        if (e.empty() && method == "notify") {
            PgResult nr(PQexec(prod.conn, "SELECT pg_notify('wb_work', '')"));
            if (PQresultStatus(nr.r) != PGRES_TUPLES_OK) e = "ERROR: notify: " + one_line(PQresultErrorMessage(nr.r));
        }
        if (!e.empty()) {
            PQclear(PQexec(prod.conn, "ROLLBACK"));
            res.problems.push_back(e);
            break;
        }
        const auto t0 = Clock::now();
        e = exec_ok(prod.conn, "COMMIT");
        const auto t1 = Clock::now();
        if (!e.empty()) {
            res.problems.push_back(e);
            break;
        }
        {
            std::lock_guard<std::mutex> lk(tr.mu);
            tr.commit_done[i] = t1;
        }
        ++res.stored;
        if (i >= o.warm && i < tr.first_stop) res.commit_ms.push_back(ms_between(t0, t1));
        if (!tr.wait_claimed(i, timeout_s)) ++res.lost;
    }
    abort = true;  // a worker still running (its stop message lost) leaves after its next claim
    for (auto& t : ts) t.join();

    const double secs = seconds_since(t_start, Clock::now());
    const double cpu1 = backends_cpu_seconds(pids), busy1 = machine_busy_seconds(), self1 = self_cpu_seconds();
    const long wake1 = stat_metric(admin, "claim_wakeups");
    res.seconds += secs;
    if (cpu0 >= 0 && cpu1 >= 0) {
        res.backend_cpu_s += cpu1 - cpu0;
        double other = 100.0 * ((busy1 - busy0) - (cpu1 - cpu0) - (self1 - self0)) /
                       (secs * std::max(1L, sysconf(_SC_NPROCESSORS_ONLN)));
        res.other_cpu_pct_max = std::max(res.other_cpu_pct_max, other);
    }
    if (wake0 >= 0 && wake1 >= 0) res.wakeups += wake1 - wake0;
    else res.wakeups = -1;
    for (auto& w : ws) {
        res.claims += w->claims;
        res.empty += w->empty;
        if (!w->error.empty()) res.problems.push_back(w->error);
        if (method == "notify") {
            exec_admin(w->conn, "UNLISTEN *");
            PQconsumeInput(w->conn);
            while (PGnotify* nf = PQnotifies(w->conn)) PQfreemem(nf);
        }
    }
    for (int i = o.warm; i < tr.first_stop; ++i) {
        if (tr.claims[i] > 1) ++res.twice;
        if (tr.claims[i] > 0 && i < static_cast<int>(res.stored)) {
            res.lat_ms.push_back(ms_between(tr.commit_done[i], tr.claimed[i]));
            if (res.lat_ms.back() > 1000)
                std::fprintf(stderr, "  %s: message %d of the round claimed %.0f ms after its commit\n", method.c_str(), i,
                             res.lat_ms.back());
        }
    }
    left = pending_work(admin);
    if (left != "0") res.problems.push_back(left + " work rows left after the round");
}

std::vector<LatencyResult> run_latency(const Options& o, PGconn* admin, const std::vector<std::string>& methods) {
    std::vector<std::unique_ptr<LatWorker>> ws;
    IdGenerator g(false, 0x3a17ULL);
    for (int i = 0; i < o.workers; ++i) {
        auto w = std::make_unique<LatWorker>();
        w->conn = connect_or_die(o.dsn);
        w->instance = uuid_text(g.next());
        prepare_or_die(w->conn, "claim", kClaimSql);
        if (o.have_wait) prepare_or_die(w->conn, "claim_wait", kClaimWaitSql);
        prepare_or_die(w->conn, "complete", kCompleteSql);
        ws.push_back(std::move(w));
    }
    Producer prod{connect_or_die(o.dsn), MessageFactory(0x5eedULL, o.envelope_bytes), std::mt19937_64(0x9a9ULL)};
    prepare_or_die(prod.conn, "store", kStoreInboxSql);

    std::vector<LatencyResult> rs(methods.size());
    for (std::size_t m = 0; m < methods.size(); ++m) rs[m].method = methods[m];
    for (int round = 0; round < o.latency_rounds; ++round) {
        const int n = o.messages / o.latency_rounds + (round < o.messages % o.latency_rounds ? 1 : 0);
        for (std::size_t k = 0; k < methods.size(); ++k) {
            std::size_t m = (k + round) % methods.size();  // the order rotates by one each round
            auto t0 = Clock::now();
            latency_round(o, methods[m], n, admin, prod, ws, rs[m]);
            std::vector<double> v = rs[m].lat_ms;
            std::fprintf(stderr, "  latency %-6s round %d: %d messages in %.1f s; so far p50 %.3f ms, p99 %.3f ms\n",
                         methods[m].c_str(), round + 1, n, seconds_since(t0, Clock::now()), percentile(v, 0.5),
                         percentile(v, 0.99));
        }
    }
    for (auto& w : ws) PQfinish(w->conn);
    PQfinish(prod.conn);
    return rs;
}

// ---------------------------------------------------------------------------------------------
// Claim cycle: claim up to 100 + complete over a backlog, with and without p_wait

const char* kStageInbox = "bench_wait.stage_inbox";

// The backlog, stored once by store_inbox_messages (envelopes built on the server) and kept in
// unlogged copies; every cell starts from the same rows.
void create_stage(PGconn* admin, long n) {
    auto t0 = Clock::now();
    exec_admin(admin, "CREATE SCHEMA IF NOT EXISTS bench_wait");
    exec_admin(admin, "TRUNCATE whizbang.wh_inbox, whizbang.wh_message_deduplication");
    for (long done = 0; done < n; done += 5000) {
        long k = std::min(5000L, n - done);
        exec_admin(admin, "SELECT count(*) FROM whizbang.store_inbox_messages((SELECT jsonb_agg(jsonb_build_object("
                          "'MessageId', gen_random_uuid(), 'HandlerName', 'Orders.Handlers.OrderPlacedHandler',"
                          " 'MessageType', 'Orders.Contracts.OrderPlaced', 'Envelope', jsonb_build_object('Note', "
                          "repeat('x', 1000)))) FROM generate_series(1, " + std::to_string(k) + ")))");
    }
    exec_admin(admin, std::string("DROP TABLE IF EXISTS ") + kStageInbox);
    exec_admin(admin, std::string("CREATE UNLOGGED TABLE ") + kStageInbox + " AS SELECT * FROM whizbang.wh_inbox");
    std::fprintf(stderr, "  staged %ld pending messages for the claim cycle in %.1f s\n", n, seconds_since(t0, Clock::now()));
}

void load_backlog(PGconn* admin, long n) {
    exec_admin(admin, "TRUNCATE whizbang.wh_inbox, whizbang.wh_message_deduplication");
    exec_admin(admin, std::string("INSERT INTO whizbang.wh_inbox SELECT * FROM ") + kStageInbox);
    std::string c = pending_work(admin);
    if (std::atol(c.c_str()) != n) throw std::runtime_error("backlog holds " + c + " work rows, expected " + std::to_string(n));
    exec_admin(admin, "VACUUM (ANALYZE) whizbang.wh_inbox");
    exec_admin(admin, "CHECKPOINT");
}

struct CycleWorker : LoadWorker {
    std::string instance;
    std::vector<std::string> claimed;
    explicit CycleWorker(PGconn* c) : LoadWorker(c) {}
};

CellResult run_cycle_cell(const Options& o, bool with_wait, PGconn* admin, std::vector<std::unique_ptr<CycleWorker>>& ws) {
    CellResult res;
    res.method = with_wait ? "wait" : "nowait";
    res.label = with_wait ? "claim_work(..., " + std::to_string(o.cycle_claim) + ", p_wait => '" + interval_text(o.wait_s) +
                                "') + complete_work"
                          : "claim_work(..., " + std::to_string(o.cycle_claim) + ") + complete_work";
    res.mode = "cycle";
    res.batch = o.cycle_claim;
    res.conns = o.conns;
    load_backlog(admin, o.cycle_rows);
    for (auto& w : ws) {
        w->reset_counts();
        w->claimed.clear();
    }
    const std::string rows = std::to_string(o.cycle_claim), wait = interval_text(o.wait_s);
    // One cycle: claim (autocommit), complete (autocommit). Returns rows, -1 on a problem.
    auto cycle = [&](CycleWorker& w) -> int {
        const char* values[3] = {w.instance.c_str(), rows.c_str(), wait.c_str()};
        PgResult r(PQexecPrepared(w.conn, with_wait ? "claim_wait" : "claim", with_wait ? 3 : 2, values, nullptr, nullptr, 0));
        if (PQresultStatus(r.r) != PGRES_TUPLES_OK) {
            w.note("ERROR: claim: " + one_line(PQresultErrorMessage(r.r)));
            return -1;
        }
        int got = PQntuples(r.r);
        if (got == 0) return 0;
        std::string ids = "{", tokens = "{";
        for (int i = 0; i < got; ++i) {
            ids += std::string(i ? "," : "") + PQgetvalue(r.r, i, 0);
            tokens += std::string(i ? "," : "") + PQgetvalue(r.r, i, 1);
            w.claimed.emplace_back(PQgetvalue(r.r, i, 0));
        }
        ids += "}";
        tokens += "}";
        const char* cv[2] = {ids.c_str(), tokens.c_str()};
        PgResult c(PQexecPrepared(w.conn, "complete", 2, cv, nullptr, nullptr, 0));
        if (PQresultStatus(c.r) != PGRES_TUPLES_OK || PQntuples(c.r) != got) {
            w.note("ERROR: complete: " + one_line(PQresultErrorMessage(c.r)));
            return -1;
        }
        return got;
    };
    for_each_worker(ws, [&](CycleWorker& w, std::size_t) {
        for (int k = 0; k < 5; ++k) w.sent_msgs += std::max(0, cycle(w));
    });
    Window win = timed_window(admin, conns_of(ws), o.seconds, [&](std::size_t i, Clock::time_point deadline) {
        CycleWorker& w = *ws[i];
        while (Clock::now() < deadline) {
            auto t0 = Clock::now();
            int got = cycle(w);
            if (got < 0) break;
            if (got == 0) {
                w.exhausted = true;
                break;
            }
            w.lat_ms.push_back(ms_between(t0, Clock::now()));
            w.sent_msgs += got;
            w.timed_msgs += got;
            ++w.timed_calls;
        }
    });
    fill_result(res, ws, win);
    std::vector<std::string> notes, all;
    std::string p = problems_of(ws);
    if (!p.empty()) notes.push_back(p);
    long handed = 0;
    bool exhausted = false;
    for (auto& w : ws) {
        handed += w->sent_msgs;
        exhausted = exhausted || w->exhausted;
        all.insert(all.end(), w->claimed.begin(), w->claimed.end());
    }
    if (exhausted) notes.push_back("backlog ran out");
    long twice = count_repeats(all);
    if (twice) notes.push_back(std::to_string(twice) + " messages handed out twice");
    long left = std::atol(pending_work(admin).c_str());
    if (left != o.cycle_rows - handed)
        notes.push_back(std::to_string(left) + " work rows left, expected " + std::to_string(o.cycle_rows - handed));
    if (!notes.empty()) {
        res.check.clear();
        for (auto& n : notes) res.check += (res.check.empty() ? "" : "; ") + n;
    }
    res.valid = res.ids > 0 && p.empty() && !exhausted && twice == 0 && left == o.cycle_rows - handed;
    return res;
}

std::vector<CellResult> run_cycle(const Options& o, PGconn* admin, long& budget) {
    create_stage(admin, o.cycle_rows);
    std::vector<std::unique_ptr<CycleWorker>> ws;
    IdGenerator g(false, 0xc7c1eULL);
    for (int i = 0; i < o.conns; ++i) {
        auto w = std::make_unique<CycleWorker>(connect_or_die(o.dsn));
        w->instance = uuid_text(g.next());
        prepare_or_die(w->conn, "claim", std::string(kClaimSql));
        if (o.have_wait) prepare_or_die(w->conn, "claim_wait", kClaimWaitSql);
        prepare_or_die(w->conn, "complete", kCompleteSql);
        ws.push_back(std::move(w));
    }
    std::vector<bool> variants;
    if (o.have_wait) variants.push_back(true);
    variants.push_back(false);
    std::vector<CellResult> all;
    print_cell_header();
    for (int round = 0; round < o.rounds; ++round)
        for (std::size_t k = 0; k < variants.size(); ++k) {
            bool with_wait = variants[(k + round) % variants.size()];  // alternating order
            CellResult r = measure_cell(o.retries, o.max_other, budget, with_wait ? "cycle wait" : "cycle nowait", [&] {
                try {
                    return run_cycle_cell(o, with_wait, admin, ws);
                } catch (const std::exception& e) {
                    return failed_cell(with_wait ? "wait" : "nowait", with_wait ? "p_wait" : "no p_wait", "cycle",
                                       o.cycle_claim, e);
                }
            });
            print_cell(r, round + 1);
            all.push_back(r);
        }
    for (auto& w : ws) PQfinish(w->conn);
    exec_admin(admin, std::string("DROP TABLE IF EXISTS ") + kStageInbox);
    exec_admin(admin, "TRUNCATE whizbang.wh_inbox, whizbang.wh_message_deduplication");
    return aggregate(all, o.max_other);
}

// ---------------------------------------------------------------------------------------------
// Idle workers: server CPU while nothing arrives

struct IdleResult {
    std::string method;
    int workers = 0;
    double seconds = 0;
    long ticks = -1;            // utime + stime over the window, all backends
    double sched_s = -1;        // the same from schedstat (ns run time)
    double machine_busy_pct = -1;
    long calls = 0;             // claims made in the window (poll); waiting: calls still in progress
    std::string check = "ok";
};

std::vector<int> pids_of(const std::vector<PGconn*>& cs) {
    std::vector<int> p;
    for (auto* c : cs) p.push_back(PQbackendPID(c));
    return p;
}

// Reads CPU of the backends around `seconds` of sleep.
void idle_window(const std::vector<int>& pids, double seconds, IdleResult& r) {
    long t0 = ticks_of(pids);
    double s0 = backends_cpu_seconds(pids), b0 = machine_busy_seconds();
    auto c0 = Clock::now();
    sleep_ms(seconds * 1000);
    long t1 = ticks_of(pids);
    double s1 = backends_cpu_seconds(pids), b1 = machine_busy_seconds();
    r.seconds = seconds_since(c0, Clock::now());
    if (t0 >= 0 && t1 >= 0) r.ticks = t1 - t0;
    if (s0 >= 0 && s1 >= 0) r.sched_s = s1 - s0;
    if (b0 >= 0 && b1 >= 0) r.machine_busy_pct = 100.0 * (b1 - b0) / (r.seconds * std::max(1L, sysconf(_SC_NPROCESSORS_ONLN)));
}

IdleResult idle_waiting(const Options& o, PGconn* admin) {
    IdleResult r;
    r.method = "wait";
    r.workers = o.idle_workers;
    std::vector<PGconn*> cs;
    IdGenerator g(false, 0x1d1eULL);
    for (int i = 0; i < o.idle_workers; ++i) {
        cs.push_back(connect_or_die(o.dsn));
        const std::string sql = "SELECT message_id FROM whizbang.claim_work('" + uuid_text(g.next()) +
                                "', 'inbox', p_max_rows => 1, p_wait => '" + interval_text(o.idle_wait_s) + "')";
        if (!PQsendQuery(cs.back(), sql.c_str())) r.check = "could not send a claim: " + one_line(PQerrorMessage(cs.back()));
    }
    auto pids = pids_of(cs);
    std::string list;
    for (int p : pids) list += (list.empty() ? "" : ",") + std::to_string(p);
    // Until every backend shows the wait event of a waiting claim (at most 5 s).
    std::string waiting;
    for (int k = 0; k < 50; ++k) {
        waiting = exec_admin(admin, "SELECT count(*) FROM pg_stat_activity WHERE pid IN (" + list +
                                        ") AND wait_event_type = 'Extension' AND wait_event = 'Extension'");
        if (std::atoi(waiting.c_str()) == o.idle_workers) break;
        sleep_ms(100);
    }
    sleep_ms(500);
    idle_window(pids, o.idle_seconds, r);
    if (std::atoi(waiting.c_str()) != o.idle_workers)
        r.check = waiting + " of " + std::to_string(o.idle_workers) + " backends showed wait_event 'Extension'";
    // All still in their claim? Then cancel them (57014 expected) and read what they returned.
    int returned = 0;
    for (auto* c : cs) {
        PQconsumeInput(c);
        if (!PQisBusy(c)) ++returned;
    }
    r.calls = o.idle_workers - returned;
    if (returned) r.check = std::to_string(returned) + " claims returned before the window ended";
    char err[256];
    for (auto* c : cs) {
        PGcancel* k = PQgetCancel(c);
        if (k) {
            PQcancel(k, err, sizeof err);
            PQfreeCancel(k);
        }
    }
    int rows = 0;
    for (auto* c : cs) {
        while (PGresult* res = PQgetResult(c)) {
            if (PQresultStatus(res) == PGRES_TUPLES_OK) rows += PQntuples(res);
            PQclear(res);
        }
        PQfinish(c);
    }
    if (rows) r.check += "; " + std::to_string(rows) + " rows claimed from an empty queue";
    return r;
}

IdleResult idle_polling(const Options& o) {
    IdleResult r;
    r.method = "poll";
    r.workers = o.idle_workers;
    std::vector<PGconn*> cs;
    IdGenerator g(false, 0x1d1fULL);
    for (int i = 0; i < o.idle_workers; ++i) {
        cs.push_back(connect_or_die(o.dsn));
        prepare_or_die(cs.back(), "claim", kClaimSql);
    }
    std::atomic<bool> stop{false};
    std::atomic<long> calls{0};
    std::vector<std::thread> ts;
    for (auto* c : cs)
        ts.emplace_back([&, c, inst = uuid_text(g.next())] {
            const char* values[2] = {inst.c_str(), "1"};
            while (!stop.load()) {
                PgResult res(PQexecPrepared(c, "claim", 2, values, nullptr, nullptr, 0));
                ++calls;
                if (PQresultStatus(res.r) != PGRES_TUPLES_OK || PQntuples(res.r) != 0) break;
                sleep_ms(o.poll_ms);
            }
        });
    sleep_ms(1000);
    long c0 = calls.load();
    idle_window(pids_of(cs), o.idle_seconds, r);
    r.calls = calls.load() - c0;
    stop = true;
    for (auto& t : ts) t.join();
    for (auto* c : cs) PQfinish(c);
    long want = static_cast<long>(o.idle_workers * r.seconds * 1000 / o.poll_ms);
    if (r.calls < want * 8 / 10) r.check = std::to_string(r.calls) + " claims, expected about " + std::to_string(want);
    return r;
}

// ---------------------------------------------------------------------------------------------
// Output

std::string ms3(double v) { return fmt("%.3f", v); }

struct LatStats {
    double p50 = 0, p95 = 0, p99 = 0, max = 0, min = 0, mean = 0;
};

LatStats stats_of(std::vector<double> v) {
    LatStats s;
    if (v.empty()) return s;
    s.p50 = percentile(v, 0.50);
    s.p95 = percentile(v, 0.95);
    s.p99 = percentile(v, 0.99);
    s.max = *std::max_element(v.begin(), v.end());
    s.min = *std::min_element(v.begin(), v.end());
    double sum = 0;
    for (double x : v) sum += x;
    s.mean = sum / v.size();
    return s;
}

std::string method_label(const Options& o, const std::string& m) {
    if (m == "wait") return "p_wait: claim_work(..., p_wait => '" + interval_text(o.wait_s) + "')";
    if (m == "poll") return "poll: claim_work, " + std::to_string(o.poll_ms) + " ms client sleep when empty";
    return "LISTEN/NOTIFY: socket wait, then claim until empty";
}

std::string ratio(double a, double b) { return b > 0 ? fmt("%.1f", a / b) + "x" : "n/a"; }

void write_results(const Options& o, const std::vector<LatencyResult>& lat, const std::vector<CellResult>& cyc,
                   const std::vector<IdleResult>& idle, std::ostream& md, std::ostream& tsv) {
    const double tick = 1.0 / sysconf(_SC_CLK_TCK);
    std::vector<std::pair<std::string, std::string>> targets;  // (target, result + verdict)
    auto verdict = [](bool ok) { return ok ? std::string("met") : std::string("missed"); };
    if (!o.have_wait)
        md << "**The installed claim_work has no p_wait argument (whizbang before 0.7.0): the p_wait method was not "
              "measured.**\n\n";
    tsv << "part\tmethod\tn\tp50_ms\tp95_ms\tp99_ms\tmax_ms\tmin_ms\tmean_ms\tmsgs_per_s\tbackend_cpu\tother\tcheck\n";

    if (!lat.empty()) {
        md << "### Latency: store's COMMIT returned → claim returned, one message at a time\n\n"
           << "1 producer, " << o.workers << " workers (own connection each, p_max_rows => " << o.claim_rows
           << "), " << o.messages << " timed messages per method in " << o.latency_rounds
           << " round(s), methods interleaved (order rotated each round), " << o.warm
           << " untimed messages at the start of each round; before each store a random gap of 0-" << fmt("%g", o.gap_ms)
           << " ms, and the next message only once the last one was claimed, so every worker is idle when a message "
              "arrives. The producer stores one message (store_inbox_messages, ~" << o.envelope_bytes
           << " B envelope built before the clock) in BEGIN … COMMIT (LISTEN/NOTIFY: plus pg_notify('wb_work', '') in the "
              "same transaction) and takes the time when COMMIT returns; a worker takes the time when its claim returns, "
              "then completes the row. A negative value means the claim returned before the producer had read the "
              "COMMIT's reply. empty claims = claims that returned no row, per message; server CPU = CPU of the "
           << o.workers << " worker backends (from /proc) per message; wake-ups = stats() claim_wakeups per message; over 1 s = messages that waited longer than 1 s.\n\n"
           << "| method | messages | p50 ms | p95 ms | p99 ms | max ms | min ms | mean ms | p50 / p99 vs p_wait | empty "
              "claims / msg | server CPU us / msg | wake-ups / msg | over 1 s | other % (max) | check |\n"
           << "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|\n";
        const LatencyResult* w = nullptr;
        for (auto& r : lat)
            if (r.method == "wait") w = &r;
        LatStats ws = w ? stats_of(w->lat_ms) : LatStats{};
        for (auto& r : lat) {
            LatStats s = stats_of(r.lat_ms);
            std::string check;
            if (r.lost) check += std::to_string(r.lost) + " messages not claimed within the timeout; ";
            if (r.twice) check += std::to_string(r.twice) + " handed out twice; ";
            for (auto& p : r.problems) check += p + "; ";
            if (check.empty()) check = "ok";
            else check.resize(check.size() - 2);
            const double msgs = std::max<long>(1, r.stored);
            md << "| " << method_label(o, r.method) << " | " << r.lat_ms.size() << " | " << ms3(s.p50) << " | " << ms3(s.p95)
               << " | " << ms3(s.p99) << " | " << ms3(s.max) << " | " << ms3(s.min) << " | " << ms3(s.mean) << " | "
               << (r.method == "wait" ? std::string("1x") : w ? ratio(s.p50, ws.p50) + " / " + ratio(s.p99, ws.p99) : "n/a")
               << " | "
               << fmt("%.2f", r.empty / msgs) << " | " << fmt("%.0f", r.backend_cpu_s * 1e6 / msgs) << " | "
               << (r.wakeups >= 0 ? fmt("%.2f", r.wakeups / msgs) : std::string("n/a")) << " | "
               << std::count_if(r.lat_ms.begin(), r.lat_ms.end(), [](double x) { return x > 1000; }) << " | "
               << fmt("%.0f", r.other_cpu_pct_max) << " | " << check << " |\n";
            tsv << "latency\t" << r.method << '\t' << r.lat_ms.size() << '\t' << ms3(s.p50) << '\t' << ms3(s.p95) << '\t'
                << ms3(s.p99) << '\t' << ms3(s.max) << '\t' << ms3(s.min) << '\t' << ms3(s.mean) << "\t\t"
                << fmt("%.1f", r.backend_cpu_s * 1e6 / msgs) << "\t" << fmt("%.0f", r.other_cpu_pct_max) << '\t' << check
                << '\n';
        }
        std::vector<double> cm;
        for (auto& r : lat) cm.insert(cm.end(), r.commit_ms.begin(), r.commit_ms.end());
        md << "\nThe producer's COMMIT round trip (fsync on): median " << ms3(percentile(cm, 0.5)) << " ms, p99 "
           << ms3(percentile(cm, 0.99)) << " ms over all methods.\n";
        if (w) {
            targets.push_back({"latency p50 < 1 ms (p_wait)", ms3(ws.p50) + " ms: " + verdict(ws.p50 < 1)});
            targets.push_back({"latency p99 < 5 ms (p_wait)", ms3(ws.p99) + " ms: " + verdict(ws.p99 < 5)});
        }
    }

    if (!cyc.empty()) {
        md << "\n### Claim cycle: claim up to " << o.cycle_claim << " + complete_work (a transaction each), "
           << o.conns << " connections, " << o.cycle_rows << " pending at the start of each cell\n\n"
           << columns_note(o, "msg", "cycle (claim + complete)")
           << " The backlog is stored once by store_inbox_messages and copied into whizbang's tables before every "
              "cell (then VACUUM (ANALYZE), CHECKPOINT); the two variants alternate, the order swapped each round. "
              "With a backlog the waiting claim never sleeps: the cells measure what p_wait costs a claim that finds "
              "work.\n\n"
           << "| method | msgs/s | range | calls/s | p50 ms | p99 ms | CPU us/msg | client % | other % | WAL B/msg | msgs "
              "| s | check |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|\n";
        for (auto& r : cyc) cell_row(md, r, false);
        auto a = find_cell(cyc, "cycle", "wait", o.cycle_claim), b = find_cell(cyc, "cycle", "nowait", o.cycle_claim);
        if (a && b) {
            double q = a->ids_per_s / b->ids_per_s;
            md << "\nmsgs/s with p_wait / without: **" << fmt("%.3f", q) << "** (server CPU per message: "
               << cpu_rel(b, a) << ").\n";
            targets.push_back({"claim cycle with p_wait within 5% of without (msgs/s)",
                               fmt("%.3f", q) + "x: " + verdict(q >= 0.95) +
                                   (a->check.find("disturbed") != std::string::npos ||
                                            b->check.find("disturbed") != std::string::npos
                                        ? " (rounds disturbed by other work: see the check column)"
                                        : "")});
            if (a->cpu_us_per_id > 0 && b->cpu_us_per_id > 0)
                targets.push_back({"the same by server CPU per message (steadier on a shared machine)",
                                   fmt("%.3f", a->cpu_us_per_id / b->cpu_us_per_id) + "x the CPU without p_wait: " +
                                       verdict(a->cpu_us_per_id / b->cpu_us_per_id <= 1.05)});
        }
        for (auto& r : cyc)
            tsv << "cycle\t" << r.method << '\t' << r.ids << '\t' << ms3(r.p50) << "\t\t" << ms3(r.p99) << "\t\t\t\t"
                << fmt("%.0f", r.ids_per_s) << '\t' << fmt("%.2f", r.cpu_us_per_id) << '\t' << fmt("%.0f", r.other_cpu_pct)
                << '\t' << r.check << '\n';
    }

    if (!idle.empty()) {
        md << "\n### Idle workers: server CPU with nothing to claim\n\n"
           << o.idle_workers << " connections on an empty queue for " << fmt("%g", o.idle_seconds)
           << " s (after they started): wait = each in one claim_work(..., p_wait => '" << interval_text(o.idle_wait_s)
           << "') (the driver checks that every backend shows wait_event 'Extension', then cancels them after the window); "
              "poll = each calls claim_work and sleeps " << o.poll_ms
           << " ms on the client when it is empty. CPU = utime + stime of the backends from /proc/<pid>/stat (ticks of "
           << fmt("%g", tick * 1000) << " ms) between the start and the end of the window, as a share of one core; "
              "schedstat = the same from /proc/<pid>/schedstat (ns). machine busy = all cores, everything.\n\n"
           << "| method | workers | seconds | CPU s (stat) | % of one core (stat) | % of one core (schedstat) | claims "
              "in the window | machine busy % | check |\n|---|---:|---:|---:|---:|---:|---:|---:|---|\n";
        for (auto& r : idle) {
            double pct = r.ticks >= 0 ? 100.0 * r.ticks * tick / r.seconds : -1;
            double spct = r.sched_s >= 0 ? 100.0 * r.sched_s / r.seconds : -1;
            md << "| " << (r.method == "wait" ? "p_wait (one waiting claim each)" : "poll every " + std::to_string(o.poll_ms) + " ms")
               << " | " << r.workers << " | " << fmt("%.1f", r.seconds) << " | " << fmt("%.2f", r.ticks * tick) << " | "
               << fmt("%.2f", pct) << " | " << fmt("%.3f", spct) << " | "
               << (r.method == "wait" ? std::to_string(r.calls) + " (in progress)" : std::to_string(r.calls)) << " | "
               << fmt("%.0f", r.machine_busy_pct) << " | " << r.check << " |\n";
            tsv << "idle\t" << r.method << '\t' << r.workers << "\t\t\t\t\t\t\t\t" << fmt("%.4f", r.ticks * tick) << '\t'
                << fmt("%.0f", r.machine_busy_pct) << '\t' << r.check << '\n';
            if (r.method == "wait")
                targets.push_back({std::to_string(r.workers) + " idle waiting workers for " + fmt("%g", o.idle_seconds) +
                                       " s: < 1% of one core",
                                   fmt("%.2f", pct) + " % (schedstat " + fmt("%.3f", spct) + " %): " +
                                       verdict(pct >= 0 && pct < 1 && r.check == "ok")});
        }
    }

    if (!targets.empty()) {
        md << "\n### Targets (issue 12)\n\n| target | result |\n|---|---|\n";
        for (auto& t : targets) md << "| " << t.first << " | " << t.second << " |\n";
    }
}

}  // namespace

int main(int argc, char** argv) {
    Options o = parse_options(argc, argv);
    PGconn* admin = connect_or_die(o.dsn);
    try {
        exec_admin(admin, "SET client_min_messages = warning");
        o.have_wait = exec_admin(admin, "SELECT count(*) FROM pg_proc WHERE oid = 'whizbang.claim_work'::regproc"
                                        " AND 'p_wait' = ANY (proargnames)") != "0";
        std::fprintf(stderr, "lease store: %s; claim_work %s p_wait\n",
                     exec_admin(admin, "SELECT whizbang.lease_store()").c_str(), o.have_wait ? "takes" : "has no");
        std::vector<std::string> methods;
        for (auto& m : o.methods)
            if (m != "wait" || o.have_wait) methods.push_back(m);

        std::vector<LatencyResult> lat;
        std::vector<CellResult> cyc;
        std::vector<IdleResult> idle;
        long budget = static_cast<long>(o.retry_budget * 2 * o.rounds);
        if (has(o.parts, "latency")) lat = run_latency(o, admin, methods);
        if (has(o.parts, "cycle")) cyc = run_cycle(o, admin, budget);
        if (has(o.parts, "idle")) {
            exec_admin(admin, "TRUNCATE whizbang.wh_inbox");
            if (o.have_wait && has(o.methods, "wait")) idle.push_back(idle_waiting(o, admin));
            if (has(o.methods, "poll")) idle.push_back(idle_polling(o));
        }

        std::ostringstream md, tsv;
        write_results(o, lat, cyc, idle, md, tsv);
        std::printf("\n%s", md.str().c_str());
        if (!o.md_path.empty()) std::ofstream(o.md_path) << md.str();
        if (!o.tsv_path.empty()) std::ofstream(o.tsv_path) << tsv.str();
    } catch (const std::exception& e) {
        std::fprintf(stderr, "wait_driver: %s\n", e.what());
        return 1;
    }
    PQfinish(admin);
    return 0;
}
