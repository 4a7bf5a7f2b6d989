// Load driver for the whizbang retention benchmark (bench/purge starts it; see bench/README.md):
// what purging N expired dedup records costs, and what it costs the stores running meanwhile.
//
// For each size N (--sizes): a staging table is loaded once by COPY with N expired records
// (consumer 'expired', UUIDv7 ids, first_seen_at spread over 90 to 60 days ago) and
// --recent-rows recent ones (consumer 'recent', the last day). Then, for each purge method:
//
//   alone     (--alone) the tables are loaded from the staging table (INSERT ... SELECT in
//             first_seen_at order, VACUUM (ANALYZE), CHECKPOINT) and the purge runs with nothing
//             else; then a plain VACUUM of the dedup table, the clean-up the purge leaves behind.
//   pair      loaded again the same way; --conns clients store new messages with
//             whizbang.store_inbox_messages (batches of --batch, ~1 KB envelopes, every payload
//             built before its clock starts): --warm-seconds untimed, then --seconds timed, the
//             baseline. Then, with no checkpoint in between, the same clients store again while
//             the purge runs: from the release until the purge has ended, and at least
//             --min-during seconds (a purge of generations is over in a moment). ratio = msgs/s during
//             the purge / msgs/s of the baseline.
//
// Purge methods (--methods):
//   maintenance  SELECT * FROM whizbang.perform_maintenance(now(), --purge-batch) on a third
//                connection: every batch in one transaction
//   worker       the background worker (the cluster runs with shared_preload_libraries =
//                'whizbang', whizbang.maintenance_databases = this database and a naptime of a
//                day, so it only runs when woken): pg_reload_conf() wakes it, it runs one round
//                with a commit after every batch of whizbang.maintenance_batch_size rows and the
//                server's whizbang.maintenance_batch_delay between batches; the end is read from
//                pg_stat_activity (the worker stays idle after its last batch)
//   worker0      the same with whizbang.maintenance_batch_delay = 0 (ALTER SYSTEM before the
//                wake-up, RESET after it)
//   delete       DELETE FROM whizbang.wh_message_deduplication WHERE first_seen_at < now() -
//                <dedup_retention_days> days on a third connection: the plain statement
//
// It uses the shared machinery of common.h: timed_window releases the store clients and the
// purge together and measures the CPU of the server backends, of the driver and of everything
// else, and the WAL; the store call and its checks are the inbox driver's. Besides, every
// 100 ms a monitor connection samples pg_stat_activity (what the store backends and the purge
// wait for, whether autovacuum runs), and the checkpoints of each window are counted.
//
// Checks: before each cell the loaded counts; warm-up store calls verify every row; every timed
// call its row count and both ends; after the purge: no expired record left, every recent
// record and every stored message's record kept, the rows the purge reported, the message and
// work rows of every stored message.
//
// Output: progress on stderr, a text summary on stdout, a TSV (--tsv) and a markdown fragment
// (--md). Connection parameters come from the usual PG* environment variables (or --dsn).

#include <atomic>

#include "common.h"

namespace {

using namespace bench;

// ---------------------------------------------------------------------------------------------
// Options

struct Options : RunOptions {
    std::vector<long> sizes{1000000, 10000000};
    std::vector<std::string> methods{"maintenance", "worker", "worker0", "delete"};
    long recent_rows = 100000;
    int batch = 100;           // messages per store call
    int purge_batch = 10000;   // p_batch_size of perform_maintenance
    bool alone = true;         // also the purge with nothing else running
    long max_pool = 6000000;   // pre-built messages per client for one window (memory cap)
    double wait_idle = 120;    // seconds to wait for other work to fall below 25% before a cell
    int warm_batches = 10;     // per client before the baseline, every row checked
    double warm_seconds = 2;   // stores before the baseline (the first --warm-batches checked row by row)
    long rounds_up_to = 1000000;  // larger sizes run once
    // The window during the purge lasts until the purge ends and at least this long: a purge of
    // generations ends in a fraction of a second, too short a window to measure the stores by.
    double min_during = 2;
    Options() { seconds = 10; rounds = 1; }
};

[[noreturn]] void usage(const char* msg) {
    std::fprintf(stderr,
                 "error: %s\n"
                 "usage: purge_driver [--sizes=1000000,10000000] [--methods=maintenance,worker,worker0,delete] "
                 "[--recent-rows=100000] [--batch=100] [--purge-batch=10000] [--alone=1] [--max-pool=6000000] "
                 "[--wait-idle=120] [--warm-batches=10] [--warm-seconds=2] [--min-during=2] [--conns=2] [--rounds=1] [--rounds-up-to=1000000] [--seconds=10] [--max-other=20] "
                 "[--envelope-bytes=1000] [--dsn=CONNINFO] [--tsv=FILE] [--md=FILE]\n",
                 msg);
    std::exit(2);
}

Options parse_options(int argc, char** argv) {
    Options o;
    parse_key_values(argc, argv, [&](const std::string& key, const std::string& val) {
        if (parse_run_option(key, val, o)) return true;
        if (key == "--sizes") {
            o.sizes.clear();
            for (auto& s : split(val, ',')) o.sizes.push_back(std::stol(s));
        } else if (key == "--methods") o.methods = split(val, ',');
        else if (key == "--recent-rows") o.recent_rows = std::stol(val);
        else if (key == "--batch") o.batch = std::stoi(val);
        else if (key == "--purge-batch") o.purge_batch = std::stoi(val);
        else if (key == "--alone") o.alone = val != "0";
        else if (key == "--max-pool") o.max_pool = std::stol(val);
        else if (key == "--wait-idle") o.wait_idle = std::stod(val);
        else if (key == "--warm-batches") o.warm_batches = std::stoi(val);
        else if (key == "--warm-seconds") o.warm_seconds = std::stod(val);
        else if (key == "--min-during") o.min_during = std::stod(val);
        else if (key == "--rounds-up-to") o.rounds_up_to = std::stol(val);
        else return false;
        return true;
    }, usage);
    if (o.conns < 1 || o.rounds < 1 || o.seconds <= 0 || o.batch < 1 || o.purge_batch < 1 || o.recent_rows < 0 ||
        o.max_pool < 1 || o.warm_batches < 1 || o.warm_seconds < 0 || o.min_during < 0 || o.envelope_bytes < 200)
        usage("counts and seconds must be positive, --envelope-bytes at least 200");
    for (long s : o.sizes)
        if (s < 1) usage("sizes must be positive");
    for (auto& m : o.methods)
        if (m != "maintenance" && m != "worker" && m != "worker0" && m != "delete") usage(("unknown method " + m).c_str());
    return o;
}

constexpr const char* kDedup = "whizbang.wh_message_deduplication";
constexpr const char* kStage = "bench.purge_stage";

// ---------------------------------------------------------------------------------------------
// Loading (untimed)

// timestamptz text of a moment `back_us` microseconds before `now_us` (Unix, UTC).
std::string ts_text(long long us) {
    std::time_t secs = static_cast<std::time_t>(us / 1000000);
    std::tm tm{};
    gmtime_r(&secs, &tm);
    char b[64];
    std::snprintf(b, sizeof b, "%04d-%02d-%02d %02d:%02d:%02d.%06d+00", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
                  tm.tm_hour, tm.tm_min, tm.tm_sec, static_cast<int>(us % 1000000));
    return b;
}

long long now_us() {
    return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::system_clock::now().time_since_epoch())
        .count();
}

// The staging table for size n: n expired records and `recent` recent ones, loaded by COPY over
// the given connections in chunks (ids and rows generated on the client).
void load_stage(PGconn* admin, const std::vector<PGconn*>& conns, long n, long recent) {
    auto t0 = Clock::now();
    exec_admin(admin, "CREATE SCHEMA IF NOT EXISTS bench");
    exec_admin(admin, std::string("DROP TABLE IF EXISTS ") + kStage);
    exec_admin(admin, std::string("CREATE UNLOGGED TABLE ") + kStage + " (LIKE " + kDedup + " INCLUDING DEFAULTS)");
    const long long day = 86400LL * 1000000LL, now = now_us();
    const long total = n + recent, chunk = 200000;
    std::atomic<long> next{0}, done{0};
    std::mutex err_mu;
    std::string error;
    std::vector<std::thread> ts;
    for (std::size_t c = 0; c < conns.size(); ++c)
        ts.emplace_back([&, c] {
            IdGenerator ids(true, 0x5eedULL + c);
            std::string rows;
            for (;;) {
                long from = next.fetch_add(chunk);
                if (from >= total) break;
                long to = std::min(total, from + chunk);
                rows.clear();
                for (long i = from; i < to; ++i) {
                    // Expired: 90 to 60 days back, in row order; recent: the last day.
                    bool expired = i < n;
                    long long at = expired ? now - 90 * day + static_cast<long long>(30.0 * day * i / n)
                                           : now - day + static_cast<long long>(1.0 * day * (i - n) / std::max(1L, recent));
                    rows += expired ? "expired\t" : "recent\t";
                    rows += uuid_text(ids.next());
                    rows += '\t';
                    rows += ts_text(at);
                    rows += '\n';
                }
                try {
                    copy_in(conns[c], std::string("COPY ") + kStage + " (consumer, message_id, first_seen_at) FROM STDIN", rows);
                } catch (const std::exception& e) {
                    std::lock_guard<std::mutex> lk(err_mu);
                    error = e.what();
                    break;
                }
                long d = done.fetch_add(to - from) + (to - from);
                if (d / 1000000 != (d - (to - from)) / 1000000 || d == total)
                    std::fprintf(stderr, "  staging: %ld of %ld records copied (%.0f s)\n", d, total,
                                 seconds_since(t0, Clock::now()));
            }
        });
    for (auto& t : ts) t.join();
    if (!error.empty()) throw std::runtime_error("staging: " + error);
    std::fprintf(stderr, "  staged %ld expired + %ld recent records by COPY in %.1f s\n", n, recent,
                 seconds_since(t0, Clock::now()));
}

struct Loaded {
    long expired = 0, recent = 0;
    long last_expired_block = 0;  // the highest block holding an expired record
    double secs = 0;
    long pages = 0;
};

// The tables of a cell: every whizbang inbox table emptied, the dedup table filled from the
// staging table in first_seen_at order (as the records would have been written), then
// VACUUM (ANALYZE) and CHECKPOINT.
Loaded load_tables(PGconn* admin, long n, long recent) {
    Loaded l;
    auto t0 = Clock::now();
    exec_admin(admin, std::string("TRUNCATE whizbang.wh_inbox, whizbang.wh_inbox_work, whizbang.wh_inbox_streams, ") +
                          "whizbang.wh_inbox_preleased, whizbang.wh_dead_letters, " + kDedup);
    // A table in generations (0.12.0) takes records only where a generation exists: a store at
    // each hour of the staged records makes the ones they need (a no-op on a single table).
    exec_admin(admin, std::string("SELECT count(whizbang.dedup_insert(gen_random_uuid(), 'bench_generation_seed', NULL, NULL, h)) "
                                  "FROM (SELECT DISTINCT date_trunc('hour', first_seen_at) AS h FROM ") + kStage + ") s");
    exec_admin(admin, std::string("DELETE FROM ") + kDedup + " WHERE consumer = 'bench_generation_seed'");
    exec_admin(admin, std::string("INSERT INTO ") + kDedup + " (consumer, message_id, first_seen_at) SELECT consumer, "
                      "message_id, first_seen_at FROM " + kStage + " ORDER BY first_seen_at, message_id");
    auto t1 = Clock::now();
    PgResult r(PQexec(admin, (std::string("SELECT count(*) FILTER (WHERE consumer = 'expired'), count(*) FILTER (WHERE "
                                          "consumer = 'recent'), coalesce(max((ctid::text::point)[0]) FILTER (WHERE "
                                          "consumer = 'expired'), 0)::bigint FROM ") + kDedup).c_str()));
    if (PQresultStatus(r.r) != PGRES_TUPLES_OK) throw std::runtime_error("load check: " + one_line(PQerrorMessage(admin)));
    l.expired = std::atol(PQgetvalue(r.r, 0, 0));
    l.recent = std::atol(PQgetvalue(r.r, 0, 1));
    l.last_expired_block = std::atol(PQgetvalue(r.r, 0, 2));
    if (l.expired != n || l.recent != recent)
        throw std::runtime_error("load: the dedup table holds " + std::to_string(l.expired) + " expired / " +
                                 std::to_string(l.recent) + " recent records, expected " + std::to_string(n) + " / " +
                                 std::to_string(recent));
    exec_admin(admin, std::string("VACUUM (ANALYZE) ") + kDedup + ", whizbang.wh_inbox, whizbang.wh_inbox_work");
    exec_admin(admin, "CHECKPOINT");
    l.pages = std::atol(exec_admin(admin, std::string("SELECT pg_relation_size('") + kDedup + "') / 8192").c_str());
    l.secs = seconds_since(t0, Clock::now());
    std::fprintf(stderr, "  loaded %ld expired + %ld recent records (%ld pages) in %.1f s (INSERT %.1f s, then checks, "
                         "VACUUM (ANALYZE), CHECKPOINT)\n",
                 n, recent, l.pages, l.secs, seconds_since(t0, t1));
    return l;
}

// ---------------------------------------------------------------------------------------------
// Store clients

struct Client : LoadWorker {
    MessageFactory factory;
    std::vector<Uuid> ids;
    std::vector<std::string> batches;
    std::size_t next = 0;

    Client(PGconn* c, std::uint64_t seed, int envelope_bytes) : LoadWorker(c), factory(seed, envelope_bytes) {}

    void reset_pool() {
        ids.clear();
        ids.shrink_to_fit();
        batches.clear();
        batches.shrink_to_fit();
        next = 0;
    }

    void generate(int batch, std::size_t nbatches) {
        batches.reserve(batches.size() + nbatches);
        ids.reserve(ids.size() + nbatches * batch);
        for (std::size_t k = 0; k < nbatches; ++k) batches.push_back(inbox_batch_json(factory, batch, ids));
    }
};

using Clients = std::vector<std::unique_ptr<Client>>;

// Fills each client's pool with `msgs` messages (whole batches, at least 10).
void build_pools(Clients& cs, int batch, long msgs) {
    for_each_worker(cs, [&](Client& c, std::size_t) {
        c.reset_pool();
        c.generate(batch, std::max<std::size_t>(10, static_cast<std::size_t>(msgs / batch)));
    });
}

// One timed store loop: calls until `stop` says so or the pool is used up.
template <typename Stop>
void store_loop(Client& w, int batch, Stop stop) {
    for (;;) {
        auto t0 = Clock::now();
        if (stop(t0)) break;
        if (w.next >= w.batches.size()) {
            w.exhausted = true;
            break;
        }
        std::string problem = store_inbox_call(w.conn, "store", w.batches[w.next], "", w.ids.data() + w.next * batch, batch, false);
        auto t1 = Clock::now();
        ++w.next;
        w.note(problem);
        if (problem.rfind("ERROR:", 0) == 0) break;
        w.lat_ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
        w.timed_msgs += batch;
        w.sent_msgs += batch;
        ++w.timed_calls;
    }
}

// ---------------------------------------------------------------------------------------------
// The monitor: pg_stat_activity every 100 ms on its own connection

class Monitor {
public:
    explicit Monitor(PGconn* c) : conn_(c) {}

    // Samples until stop(): what each watched pid does, and whether autovacuum runs.
    void start(const std::vector<int>& store_pids, int purge_pid) {
        stop_ = false;
        store_.clear();
        purge_.clear();
        autovacuum_.clear();
        samples_ = av_samples_ = purge_seen_ = purge_active_ = 0;
        std::string list = "{";
        for (int p : store_pids) list += std::to_string(p) + ",";
        list += std::to_string(purge_pid > 0 ? purge_pid : 0) + "}";
        purge_pid_ = purge_pid;
        thread_ = std::thread([this, list] {
            const std::string q =
                "SELECT pid, state, coalesce(wait_event_type, ''), coalesce(wait_event, ''), backend_type, "
                "left(query, 80) FROM pg_stat_activity WHERE pid = ANY ('" + list + "'::int[]) OR backend_type = "
                "'autovacuum worker'";
            while (!stop_) {
                auto t0 = Clock::now();
                PgResult r(PQexec(conn_, q.c_str()));
                if (PQresultStatus(r.r) == PGRES_TUPLES_OK) {
                    ++samples_;
                    bool av = false;
                    for (int i = 0; i < PQntuples(r.r); ++i) {
                        std::string type = PQgetvalue(r.r, i, 4);
                        if (type == "autovacuum worker") {
                            av = true;
                            autovacuum_[PQgetvalue(r.r, i, 5)]++;
                            continue;
                        }
                        std::string state = PQgetvalue(r.r, i, 1), wt = PQgetvalue(r.r, i, 2), we = PQgetvalue(r.r, i, 3);
                        std::string what = state == "active" ? (wt.empty() ? "CPU" : wt + ":" + we)
                                                             : (state.empty() ? "idle" : state) + (wt.empty() ? "" : " (" + wt + ":" + we + ")");
                        // The purge counts only while it works (its process is idle before and after).
                        if (std::atoi(PQgetvalue(r.r, i, 0)) == purge_pid_) {
                            ++purge_seen_;
                            if (state == "active") {
                                purge_[what]++;
                                ++purge_active_;
                            }
                        } else {
                            store_[what]++;
                        }
                    }
                    if (av) ++av_samples_;
                }
                std::this_thread::sleep_until(t0 + std::chrono::milliseconds(100));
            }
        });
    }

    void stop() {
        stop_ = true;
        if (thread_.joinable()) thread_.join();
    }

    // "CPU 81%, IO:WALSync 9%, ..." — the shares of the samples, largest first.
    static std::string shares(const std::map<std::string, long>& m, int top = 5) {
        long total = 0;
        for (auto& e : m) total += e.second;
        if (!total) return "-";
        std::vector<std::pair<long, std::string>> v;
        for (auto& e : m) v.push_back({e.second, e.first});
        std::sort(v.rbegin(), v.rend());
        std::string s;
        for (int i = 0; i < static_cast<int>(v.size()) && i < top; ++i)
            s += (s.empty() ? "" : ", ") + v[i].second + " " + fmt("%.0f", 100.0 * v[i].first / total) + "%";
        return s;
    }

    std::string store_text() const { return shares(store_); }
    std::string purge_text() const {
        if (!purge_seen_) return "-";
        return "active in " + fmt("%.0f", 100.0 * purge_active_ / purge_seen_) + "% of the samples: " + shares(purge_);
    }
    std::string autovacuum_text() const {
        if (!samples_) return "-";
        std::string s = fmt("%.0f", 100.0 * av_samples_ / samples_) + "% of samples";
        for (auto& e : autovacuum_) s += "; " + one_line(e.first.c_str());
        return s;
    }
    long samples() const { return samples_; }

private:
    PGconn* conn_;
    std::thread thread_;
    std::atomic<bool> stop_{false};
    int purge_pid_ = 0;
    std::map<std::string, long> store_, purge_, autovacuum_;
    long samples_ = 0, av_samples_ = 0, purge_seen_ = 0, purge_active_ = 0;
};

// ---------------------------------------------------------------------------------------------
// Purges

struct Method {
    std::string name, label;
};

// The server's whizbang.maintenance_batch_delay (ms) when the driver started, before it changed
// anything; -1: this build has no such setting.
int g_default_delay_ms = -1;

bool is_worker(const std::string& method) { return method == "worker" || method == "worker0"; }

// The batch delay a worker method runs with: worker the server's, worker0 none.
int worker_delay_ms(const std::string& method) { return method == "worker0" ? 0 : std::max(0, g_default_delay_ms); }

std::vector<Method> method_table(const Options& o, int retention_days) {
    const std::string delay = g_default_delay_ms < 0 ? std::string("(no batch delay in this build)")
                                                     : "maintenance_batch_delay " + std::to_string(g_default_delay_ms) + " ms";
    return {{"maintenance", "perform_maintenance(now(), " + std::to_string(o.purge_batch) + "): one transaction"},
            {"worker", "background worker: a transaction per batch, " + delay},
            {"worker0", "background worker: a transaction per batch, maintenance_batch_delay 0"},
            {"delete", "plain DELETE ... WHERE first_seen_at < now() - " + std::to_string(retention_days) +
                           " days"}};
}

struct Purge {
    double secs = 0;       // start to end of the purge
    long rows = 0;         // dedup records it deleted (as it reports them; worker: counted)
    double cpu_s = -1;     // CPU of the process that purged (backend or background worker)
    double aux_cpu_s = 0;  // worker: CPU of the polling backend (counted with the other work)
    double fn_ms = -1;     // perform_maintenance's own duration_ms of the dedup task
    std::string problem;   // "" or what went wrong
};

// The background worker of this database (pid), or 0.
int worker_pid(PGconn* c) {
    std::string p = exec_admin(c, "SELECT pid FROM pg_stat_activity WHERE backend_type = 'whizbang maintenance' AND "
                                  "datname = current_database()");
    return std::atoi(p.c_str());
}

// Runs the purge on `c` (worker: wakes the worker and waits for its round to end, polling on
// `c`). `last_block`: the highest block holding an expired record.
Purge run_purge(const Options& o, const std::string& method, PGconn* c, int retention_days, long last_block) {
    Purge p;
    const int pid = PQbackendPID(c);
    try {
        if (method == "maintenance") {
            double c0 = process_cpu_seconds(pid);
            auto t0 = Clock::now();
            PgResult r(PQexec(c, ("SELECT task_name, rows_affected, duration_ms, status FROM whizbang.perform_maintenance(now(), " +
                                  std::to_string(o.purge_batch) + ")").c_str()));
            p.secs = seconds_since(t0, Clock::now());
            double c1 = process_cpu_seconds(pid);
            if (c0 >= 0 && c1 >= 0) p.cpu_s = c1 - c0;
            if (PQresultStatus(r.r) != PGRES_TUPLES_OK) {
                p.problem = "ERROR: " + one_line(PQresultErrorMessage(r.r));
                return p;
            }
            for (int i = 0; i < PQntuples(r.r); ++i) {
                std::string task = PQgetvalue(r.r, i, 0), status = PQgetvalue(r.r, i, 3);
                long rows = std::atol(PQgetvalue(r.r, i, 1));
                if (status != "ok") p.problem += task + " " + status + "; ";
                if (task == "purge_old_deduplication") {
                    p.rows = rows;
                    p.fn_ms = std::atof(PQgetvalue(r.r, i, 2));
                } else if (rows != 0) {
                    p.problem += task + " touched " + std::to_string(rows) + " rows; ";
                }
            }
        } else if (method == "delete") {
            double c0 = process_cpu_seconds(pid);
            auto t0 = Clock::now();
            PgResult r(PQexec(c, (std::string("DELETE FROM ") + kDedup + " WHERE first_seen_at < now() - interval '" +
                                  std::to_string(retention_days) + " days'").c_str()));
            p.secs = seconds_since(t0, Clock::now());
            double c1 = process_cpu_seconds(pid);
            if (c0 >= 0 && c1 >= 0) p.cpu_s = c1 - c0;
            if (PQresultStatus(r.r) != PGRES_COMMAND_OK) {
                p.problem = "ERROR: " + one_line(PQresultErrorMessage(r.r));
                return p;
            }
            p.rows = std::atol(PQcmdTuples(r.r));
        } else {
            const int wpid = worker_pid(c);
            if (!wpid) {
                p.problem = "no whizbang maintenance worker in this database (needs shared_preload_libraries = 'whizbang' "
                            "and whizbang.maintenance_databases)";
                return p;
            }
            // The batch delay of this method, in effect from the reload that wakes the worker.
            const int delay_ms = worker_delay_ms(method);
            if (g_default_delay_ms >= 0)
                exec_admin(c, method == "worker0" ? "ALTER SYSTEM SET whizbang.maintenance_batch_delay = 0"
                                                  : "ALTER SYSTEM RESET whizbang.maintenance_batch_delay");
            double a0 = process_cpu_seconds(pid), w0 = process_cpu_seconds(wpid);
            const std::string t0 = exec_admin(c, "SELECT clock_timestamp()");
            exec_admin(c, "SELECT pg_reload_conf()");
            // The round has ended when the worker has been idle, since a state change after the
            // wake-up, for 200 ms longer than its sleep between two batches, and the last block
            // of expired records holds none. (Its naptime is a day.)
            const double idle_needed = delay_ms / 1000.0 + 0.2;
            const std::string poll = "SELECT state, extract(epoch FROM clock_timestamp() - state_change), "
                                     "extract(epoch FROM state_change - '" + t0 + "'::timestamptz) FROM pg_stat_activity WHERE pid = " +
                                     std::to_string(wpid);
            const std::string probe = std::string("SELECT count(*) FROM ") + kDedup + " WHERE ctid >= '(" +
                                      std::to_string(last_block) + ",0)' AND ctid < '(" + std::to_string(last_block + 1) +
                                      ",0)' AND consumer = 'expired'";
            auto start = Clock::now();
            for (;;) {
                std::this_thread::sleep_for(std::chrono::milliseconds(10));
                PgResult r(PQexec(c, poll.c_str()));
                if (PQresultStatus(r.r) != PGRES_TUPLES_OK || PQntuples(r.r) != 1) {
                    p.problem = "the worker is gone: " + one_line(PQerrorMessage(c));
                    return p;
                }
                double idle_for = std::atof(PQgetvalue(r.r, 0, 1)), since_wake = std::atof(PQgetvalue(r.r, 0, 2));
                if (std::string(PQgetvalue(r.r, 0, 0)) == "idle" && since_wake > 0 && idle_for >= idle_needed &&
                    exec_admin(c, probe) == "0") {
                    p.secs = since_wake;
                    break;
                }
                if (seconds_since(start, Clock::now()) > 7200) {
                    p.problem = "the worker's round did not end within 2 hours";
                    return p;
                }
            }
            double a1 = process_cpu_seconds(pid), w1 = process_cpu_seconds(wpid);
            if (w0 >= 0 && w1 >= 0) p.cpu_s = w1 - w0;
            if (a0 >= 0 && a1 >= 0) p.aux_cpu_s = a1 - a0;
            p.rows = -1;  // counted by worker_rows() once the clients have stopped
            // Back to the server's setting for the next reload (not reloaded now: that would
            // start another round).
            if (g_default_delay_ms >= 0) exec_admin(c, "ALTER SYSTEM RESET whizbang.maintenance_batch_delay");
        }
    } catch (const std::exception& e) {
        p.problem = std::string("ERROR: ") + e.what();
    }
    return p;
}

// The worker reports its rows only to the server log: the expired records it left, subtracted.
void worker_rows(PGconn* admin, Purge& p, long expected) {
    if (p.rows >= 0) return;
    p.rows = expected - std::atol(exec_admin(admin, std::string("SELECT count(*) FROM ") + kDedup +
                                                        " WHERE consumer = 'expired'").c_str());
}

// After a purge: nothing expired left, every recent record and every stored message kept.
std::string after_check(PGconn* admin, long recent, long stored, long want_rows, const Purge& p) {
    std::string out;
    auto add = [&](const std::string& s) { out += (out.empty() ? "" : "; ") + s; };
    if (!p.problem.empty()) add(p.problem);
    if (p.rows != want_rows) add("purge reported " + std::to_string(p.rows) + " rows, expected " + std::to_string(want_rows));
    PgResult r(PQexec(admin, (std::string("SELECT count(*) FILTER (WHERE consumer = 'expired'), count(*) FILTER (WHERE "
                                          "consumer = 'recent'), count(*) FILTER (WHERE consumer = ''), (SELECT count(*) "
                                          "FROM whizbang.wh_inbox), (SELECT count(*) FROM whizbang.wh_inbox_work) FROM ") +
                              kDedup).c_str()));
    if (PQresultStatus(r.r) != PGRES_TUPLES_OK) {
        add("check failed: " + one_line(PQerrorMessage(admin)));
        return out;
    }
    long e = std::atol(PQgetvalue(r.r, 0, 0)), rc = std::atol(PQgetvalue(r.r, 0, 1)), s = std::atol(PQgetvalue(r.r, 0, 2)),
         i = std::atol(PQgetvalue(r.r, 0, 3)), w = std::atol(PQgetvalue(r.r, 0, 4));
    if (e) add(std::to_string(e) + " expired records left");
    if (rc != recent) add(std::to_string(rc) + " recent records left of " + std::to_string(recent));
    if (s != stored || i != stored || w != stored)
        add("stored messages: " + std::to_string(s) + " dedup / " + std::to_string(i) + " message / " + std::to_string(w) +
            " work rows, expected " + std::to_string(stored));
    return out;
}

// Dedup table statistics as the cumulative statistics system has them (after the purging
// backend flushed its counters; a background worker that never flushes leaves them unchanged).
struct TableStats {
    long n_tup_del = 0, n_dead_tup = 0, autovacuum_count = 0;
};

TableStats table_stats(PGconn* admin) {
    exec_admin(admin, "SELECT pg_stat_clear_snapshot()");
    PgResult r(PQexec(admin, "SELECT n_tup_del, n_dead_tup, autovacuum_count FROM pg_stat_user_tables WHERE relid = "
                             "'whizbang.wh_message_deduplication'::regclass"));
    TableStats s;
    if (PQresultStatus(r.r) == PGRES_TUPLES_OK && PQntuples(r.r) == 1) {
        s.n_tup_del = std::atol(PQgetvalue(r.r, 0, 0));
        s.n_dead_tup = std::atol(PQgetvalue(r.r, 0, 1));
        s.autovacuum_count = std::atol(PQgetvalue(r.r, 0, 2));
    }
    return s;
}

long checkpoints(PGconn* admin) {
    return std::atol(exec_admin(admin, "SELECT checkpoints_timed + checkpoints_req FROM pg_stat_bgwriter").c_str());
}

// Share of all cores busy over two seconds (from /proc/stat), in percent.
double busy_pct() {
    double b0 = machine_busy_seconds();
    auto t0 = Clock::now();
    std::this_thread::sleep_for(std::chrono::seconds(2));
    double b1 = machine_busy_seconds();
    double s = seconds_since(t0, Clock::now());
    if (b0 < 0 || b1 < 0 || s <= 0) return -1;
    return 100.0 * (b1 - b0) / (s * std::max(1L, sysconf(_SC_NPROCESSORS_ONLN)));
}

// Waits (up to --wait-idle seconds) until other work takes less than 25% of the cores; returns
// the last reading.
double wait_quiet(const Options& o) {
    auto t0 = Clock::now();
    double b = busy_pct();
    while (b >= 25 && seconds_since(t0, Clock::now()) < o.wait_idle) {
        std::fprintf(stderr, "  machine busy (%.0f%% of the cores), waiting for quiet\n", b);
        std::this_thread::sleep_for(std::chrono::seconds(3));
        b = busy_pct();
    }
    return b;
}

// ---------------------------------------------------------------------------------------------
// Cells

// One measured window of the store clients (baseline or during a purge).
struct StoreWindow {
    double secs = 0, msgs_per_s = 0, p50 = 0, p99 = 0;
    long msgs = 0;
    double store_cpu_us = -1;  // CPU of the store backends per message
    double client_pct = -1, other_pct = -1;
    double wal_bytes = 0;
    long checkpoints = 0;
    std::string waits, autovacuum;
    bool exhausted = false;
};

struct Cell {
    long size = 0;
    std::string method, label;
    int round = 1;
    bool alone = false;
    double quiet_pct = -1;  // machine busy before the cell
    double load_s = 0;
    Purge purge;
    double purge_cpu_pct = -1;  // purge CPU as a share of all cores during the purge
    double purge_wal = -1;      // WAL of the purge (alone: measured; with clients: estimated)
    std::string purge_waits;
    StoreWindow base, during;
    double vacuum_s = -1, vacuum_wal = -1;  // alone: the plain VACUUM afterwards
    TableStats stats_after;
    long stats_del = 0;  // n_tup_del counted for the purge
    std::string plan_before, plan_after;  // maintenance: the purge statement's plans
    std::string check = "ok";
    bool valid = false;
};

void fill_window(StoreWindow& sw, Clients& cs, const Window& w, double store_cpu_s, double extra_other_pct) {
    std::vector<double> lat;
    for (auto& c : cs) {
        sw.msgs += c->timed_msgs;
        lat.insert(lat.end(), c->lat_ms.begin(), c->lat_ms.end());
        sw.exhausted = sw.exhausted || c->exhausted;
    }
    sw.secs = w.secs;
    if (sw.secs > 0) sw.msgs_per_s = sw.msgs / sw.secs;
    sw.p50 = percentile(lat, 0.50);
    sw.p99 = percentile(lat, 0.99);
    if (sw.msgs > 0 && store_cpu_s >= 0) sw.store_cpu_us = store_cpu_s * 1e6 / sw.msgs;
    sw.client_pct = w.client_cpu_pct;
    sw.other_pct = w.other_cpu_pct >= 0 ? std::max(0.0, w.other_cpu_pct + extra_other_pct) : -1;
    sw.wal_bytes = w.wal_bytes;
}

struct Conns {
    PGconn* admin;
    PGconn* purger;
    PGconn* monitor;
    Clients clients;
};

double cores() { return static_cast<double>(std::max(1L, sysconf(_SC_NPROCESSORS_ONLN))); }

// The purge alone: load, purge, checks, then VACUUM of the dedup table.
Cell run_alone(const Options& o, const Method& m, long n, int retention_days, Conns& k) {
    Cell cell;
    cell.size = n;
    cell.method = m.name;
    cell.label = m.label;
    cell.alone = true;
    Loaded l = load_tables(k.admin, n, o.recent_rows);
    cell.load_s = l.secs;
    cell.quiet_pct = wait_quiet(o);
    exec_admin(k.admin, "CHECKPOINT");
    TableStats s0 = table_stats(k.admin);
    long ck0 = checkpoints(k.admin);
    std::string lsn0 = exec_admin(k.admin, "SELECT pg_current_wal_insert_lsn()");
    const int wpid = is_worker(m.name) ? worker_pid(k.admin) : 0;
    Monitor mon(k.monitor);
    mon.start({}, wpid ? wpid : PQbackendPID(k.purger));
    double busy0 = machine_busy_seconds();
    auto t0 = Clock::now();
    cell.purge = run_purge(o, m.name, k.purger, retention_days, l.last_expired_block);
    double wall = seconds_since(t0, Clock::now());
    double busy1 = machine_busy_seconds();
    mon.stop();
    cell.purge_wal = std::atof(exec_admin(k.admin, "SELECT pg_wal_lsn_diff(pg_current_wal_insert_lsn(), '" + lsn0 + "')").c_str());
    worker_rows(k.admin, cell.purge, n);
    cell.during.checkpoints = checkpoints(k.admin) - ck0;
    cell.during.autovacuum = mon.autovacuum_text();
    cell.during.other_pct = -1;
    if (busy0 >= 0 && busy1 >= 0 && wall > 0 && cell.purge.cpu_s >= 0)
        cell.during.other_pct = std::max(0.0, 100.0 * ((busy1 - busy0) - cell.purge.cpu_s) / (wall * cores()));
    cell.purge_waits = mon.purge_text();
    if (cell.purge.secs > 0 && cell.purge.cpu_s >= 0) cell.purge_cpu_pct = 100.0 * cell.purge.cpu_s / (cell.purge.secs * cores());
    exec_admin(k.purger, "SELECT pg_stat_force_next_flush()");
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    cell.stats_after = table_stats(k.admin);
    cell.stats_del = cell.stats_after.n_tup_del - s0.n_tup_del;
    std::string check = after_check(k.admin, o.recent_rows, 0, n, cell.purge);
    // The clean-up the purge leaves: dead records until VACUUM removes them and their index entries.
    std::string v0 = exec_admin(k.admin, "SELECT pg_current_wal_insert_lsn()");
    auto vt = Clock::now();
    exec_admin(k.admin, std::string("VACUUM ") + kDedup);
    cell.vacuum_s = seconds_since(vt, Clock::now());
    cell.vacuum_wal = std::atof(exec_admin(k.admin, "SELECT pg_wal_lsn_diff(pg_current_wal_insert_lsn(), '" + v0 + "')").c_str());
    if (!check.empty()) cell.check = check;
    cell.valid = check.empty();
    return cell;
}

// The pair: baseline window, then the window during the purge.
std::string purge_plan(PGconn* c, int retention_days, int batch);

Cell run_pair(const Options& o, const Method& m, long n, int retention_days, double purge_estimate_s, Conns& k) {
    Cell cell;
    cell.size = n;
    cell.method = m.name;
    cell.label = m.label;
    Clients& cs = k.clients;
    for (auto& c : cs) {
        c->reset_counts();
        c->reset_pool();
    }
    Loaded l = load_tables(k.admin, n, o.recent_rows);
    cell.load_s = l.secs;
    cell.quiet_pct = wait_quiet(o);

    // Warm-up, --warm-seconds after the load's checkpoint (so the windows do not start with the
    // full-page images of the first writes after it): the first batches checked row by row.
    build_pools(cs, o.batch, std::min(o.max_pool, static_cast<long>(20000 * std::max(0.5, o.warm_seconds))));
    std::vector<double> warm_rate(cs.size(), 0);
    for_each_worker(cs, [&](Client& c, std::size_t i) {
        auto t0 = Clock::now();
        const auto until = t0 + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(o.warm_seconds));
        std::size_t b = 0;
        for (; b < c.batches.size() && c.error.empty(); ++b) {
            if (b >= static_cast<std::size_t>(o.warm_batches) && Clock::now() >= until) break;
            c.note(store_inbox_call(c.conn, "store", c.batches[b], "", c.ids.data() + b * o.batch, o.batch,
                                    b < static_cast<std::size_t>(o.warm_batches)));
            c.sent_msgs += o.batch;
        }
        double s = seconds_since(t0, Clock::now());
        warm_rate[i] = s > 0 ? b * o.batch / s : 0;
    });
    for (auto& c : cs)
        if (!c->error.empty() || c->mismatches) {
            cell.check = "warm-up: " + (c->error.empty() ? c->first_problem : c->error);
            return cell;
        }
    long warm_sent = 0;
    for (auto& c : cs) warm_sent += c->sent_msgs;
    double warm = *std::max_element(warm_rate.begin(), warm_rate.end());
    build_pools(cs, o.batch, std::min(o.max_pool, static_cast<long>(std::max(warm * 2.0, 20000.0) * o.seconds) + o.batch));

    std::vector<PGconn*> store_conns;
    std::vector<int> store_pids;
    for (auto& c : cs) {
        store_conns.push_back(c->conn);
        store_pids.push_back(PQbackendPID(c->conn));
        c->reset_counts();
        c->sent_msgs = 0;
    }

    // (1) The baseline.
    Monitor mon(k.monitor);
    long ck0 = checkpoints(k.admin);
    mon.start(store_pids, 0);
    Window wb = timed_window(k.admin, store_conns, o.seconds, [&](std::size_t i, Clock::time_point deadline) {
        store_loop(*cs[i], o.batch, [&](Clock::time_point t) { return t >= deadline; });
    });
    mon.stop();
    fill_window(cell.base, cs, wb, wb.backend_cpu_s, 0);
    cell.base.checkpoints = checkpoints(k.admin) - ck0;
    cell.base.waits = mon.store_text();
    cell.base.autovacuum = mon.autovacuum_text();
    std::string problems = problems_of(cs);
    long sent = warm_sent;
    for (auto& c : cs) sent += c->sent_msgs;
    if (!problems.empty()) {
        cell.check = "baseline: " + problems;
        return cell;
    }

    // (2) During the purge, with no checkpoint in between: the same state as the baseline's end.
    // The pool: the baseline rate for 1.5x the expected purge time (at least 10 s), capped.
    double per_client = cell.base.msgs_per_s / static_cast<double>(cs.size());
    long pool = std::min(o.max_pool, static_cast<long>(per_client * std::max(10.0, purge_estimate_s * 1.5)) + o.batch);
    auto g0 = Clock::now();
    build_pools(cs, o.batch, pool);
    std::fprintf(stderr, "  baseline %.0f msgs/s; built %ld messages per client for the purge window in %.1f s (expected "
                         "purge %.0f s)\n", cell.base.msgs_per_s, pool, seconds_since(g0, Clock::now()), purge_estimate_s);
    for (auto& c : cs) {
        c->reset_counts();
        c->lat_ms.reserve(c->batches.size());
    }
    if (m.name == "maintenance") cell.plan_before = purge_plan(k.purger, retention_days, o.purge_batch);
    TableStats s0 = table_stats(k.admin);
    ck0 = checkpoints(k.admin);
    const int wpid = is_worker(m.name) ? worker_pid(k.admin) : 0;
    mon.start(store_pids, wpid ? wpid : PQbackendPID(k.purger));
    std::vector<PGconn*> all = store_conns;
    all.push_back(k.purger);
    std::atomic<bool> purge_done{false};
    Purge purge;
    const auto during_start = Clock::now();
    const auto during_min_end = during_start + std::chrono::duration_cast<Clock::duration>(
                                                   std::chrono::duration<double>(o.min_during));
    Window wd = timed_window(k.admin, all, 1e6, [&](std::size_t i, Clock::time_point) {
        if (i == cs.size()) {
            purge = run_purge(o, m.name, k.purger, retention_days, l.last_expired_block);
            purge_done = true;
            return;
        }
        store_loop(*cs[i], o.batch, [&](Clock::time_point t) { return purge_done.load() && t >= during_min_end; });
    });
    mon.stop();
    worker_rows(k.admin, purge, n);
    cell.purge = purge;
    // The purging connection is one of the window's backends: its CPU is the purge's (worker:
    // the polling backend's, counted with the other work, and the worker's CPU is the purge's).
    double purger_cpu = is_worker(m.name) ? purge.aux_cpu_s : std::max(0.0, purge.cpu_s);
    double store_cpu = wd.backend_cpu_s >= 0 ? wd.backend_cpu_s - purger_cpu : -1;
    double extra_other = 0;
    if (wd.secs > 0) {
        if (is_worker(m.name)) extra_other = 100.0 * (purge.aux_cpu_s - std::max(0.0, purge.cpu_s)) / (wd.secs * cores());
    }
    fill_window(cell.during, cs, wd, store_cpu, extra_other);
    cell.during.checkpoints = checkpoints(k.admin) - ck0;
    cell.during.waits = mon.store_text();
    cell.during.autovacuum = mon.autovacuum_text();
    cell.purge_waits = mon.purge_text();
    if (purge.secs > 0 && purge.cpu_s >= 0) cell.purge_cpu_pct = 100.0 * purge.cpu_s / (purge.secs * cores());
    if (cell.base.msgs > 0)
        cell.purge_wal = std::max(0.0, cell.during.wal_bytes - cell.base.wal_bytes / cell.base.msgs * cell.during.msgs);
    exec_admin(k.purger, "SELECT pg_stat_force_next_flush()");
    std::this_thread::sleep_for(std::chrono::milliseconds(1500));  // the store backends flush at most once a second
    cell.stats_after = table_stats(k.admin);
    cell.stats_del = cell.stats_after.n_tup_del - s0.n_tup_del;
    if (m.name == "maintenance") cell.plan_after = purge_plan(k.purger, retention_days, o.purge_batch);

    std::vector<std::string> notes;
    problems = problems_of(cs);
    if (!problems.empty()) notes.push_back(problems);
    for (auto& c : cs) sent += c->sent_msgs;
    if (cell.during.exhausted)
        notes.push_back("the clients' pool ran out after " + fmt("%.1f", cell.during.secs) + " s, before the purge ended (" +
                        fmt("%.1f", purge.secs) + " s): the rate covers only part of the purge");
    std::string check = after_check(k.admin, o.recent_rows, sent, n, purge);
    if (!check.empty()) notes.push_back(check);
    if (cell.base.other_pct > o.max_other || cell.during.other_pct > o.max_other)
        notes.push_back("disturbed: other work took " + fmt("%.0f", cell.base.other_pct) + "% / " +
                        fmt("%.0f", cell.during.other_pct) + "% of the cores");
    if (!notes.empty()) {
        cell.check.clear();
        for (auto& s : notes) cell.check += (cell.check.empty() ? "" : "; ") + s;
    }
    cell.valid = problems.empty() && check.empty() && !cell.during.exhausted && cell.base.msgs > 0 && cell.during.msgs > 0;
    for (auto& c : cs) c->reset_pool();
    return cell;
}

// ---------------------------------------------------------------------------------------------
// Reporting

std::string num(double v, const char* f = "%.2f") { return v >= 0 ? fmt(f, v) : std::string("n/a"); }

double ratio(const Cell& c) { return c.base.msgs_per_s > 0 ? c.during.msgs_per_s / c.base.msgs_per_s : -1; }

// Messages the clients would have stored at the baseline rate in the window, and did not.
double lost(const Cell& c) { return std::max(0.0, c.base.msgs_per_s * c.during.secs - static_cast<double>(c.during.msgs)); }

double median_of(std::vector<double> v) {
    if (v.empty()) return -1;
    std::sort(v.begin(), v.end());
    return v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

void print_cell(const Cell& c) {
    if (c.alone)
        std::printf("%-12s %10ld alone  purge %8.2f s %9ld rows %9.0f rows/s  CPU %6.2f s  WAL %6.0f B/row  other %3.0f%%  "
                    "vacuum %.1f s  %s\n",
                    c.method.c_str(), c.size, c.purge.secs, c.purge.rows, c.purge.secs > 0 ? c.purge.rows / c.purge.secs : 0,
                    c.purge.cpu_s, c.purge.rows ? c.purge_wal / c.purge.rows : 0, c.during.other_pct, c.vacuum_s, c.check.c_str());
    else
        std::printf("%-12s %10ld pair   purge %8.2f s %9ld rows  baseline %7.0f msgs/s  during %7.0f msgs/s  ratio %.3f  "
                    "CPU us/msg %.1f -> %.1f  other %.0f%% -> %.0f%%  %s\n",
                    c.method.c_str(), c.size, c.purge.secs, c.purge.rows, c.base.msgs_per_s, c.during.msgs_per_s, ratio(c),
                    c.base.store_cpu_us, c.during.store_cpu_us, c.base.other_pct, c.during.other_pct, c.check.c_str());
    std::fflush(stdout);
}

void write_tsv(std::ostream& t, const std::vector<Cell>& cells) {
    t << "size\tmethod\tround\tcell\tpurge_s\tpurge_rows\tpurge_rows_per_s\tpurge_cpu_s\tpurge_cpu_pct\tpurge_wal_bytes"
         "\tfn_dedup_ms\tbaseline_s\tbaseline_msgs\tbaseline_msgs_per_s\tduring_s\tduring_msgs\tduring_msgs_per_s\tratio"
         "\tbaseline_cpu_us_per_msg\tduring_cpu_us_per_msg\tbaseline_p50_ms\tduring_p50_ms\tbaseline_p99_ms\tduring_p99_ms"
         "\tbaseline_client_pct\tduring_client_pct\tbaseline_other_pct\tduring_other_pct\tbaseline_wal_bytes\tduring_wal_bytes"
         "\tbaseline_checkpoints\tduring_checkpoints\tvacuum_s\tvacuum_wal_bytes\tn_tup_del_counted\tn_dead_tup_after"
         "\tquiet_pct\tload_s\tbaseline_waits\tduring_waits\tpurge_waits\tautovacuum\tcheck\n";
    for (auto& c : cells) {
        t << c.size << '\t' << c.method << '\t' << c.round << '\t' << (c.alone ? "alone" : "pair") << '\t'
          << fmt("%.3f", c.purge.secs) << '\t' << c.purge.rows << '\t'
          << fmt("%.0f", c.purge.secs > 0 ? c.purge.rows / c.purge.secs : 0) << '\t' << fmt("%.3f", c.purge.cpu_s) << '\t'
          << fmt("%.1f", c.purge_cpu_pct) << '\t' << fmt("%.0f", c.purge_wal) << '\t' << fmt("%.1f", c.purge.fn_ms) << '\t'
          << fmt("%.3f", c.base.secs) << '\t' << c.base.msgs << '\t' << fmt("%.0f", c.base.msgs_per_s) << '\t'
          << fmt("%.3f", c.during.secs) << '\t' << c.during.msgs << '\t' << fmt("%.0f", c.during.msgs_per_s) << '\t'
          << fmt("%.3f", ratio(c)) << '\t' << fmt("%.2f", c.base.store_cpu_us) << '\t' << fmt("%.2f", c.during.store_cpu_us)
          << '\t' << fmt("%.3f", c.base.p50) << '\t' << fmt("%.3f", c.during.p50) << '\t' << fmt("%.3f", c.base.p99) << '\t'
          << fmt("%.3f", c.during.p99) << '\t' << fmt("%.1f", c.base.client_pct) << '\t' << fmt("%.1f", c.during.client_pct)
          << '\t' << fmt("%.1f", c.base.other_pct) << '\t' << fmt("%.1f", c.during.other_pct) << '\t'
          << fmt("%.0f", c.base.wal_bytes) << '\t' << fmt("%.0f", c.during.wal_bytes) << '\t' << c.base.checkpoints << '\t'
          << c.during.checkpoints << '\t' << fmt("%.2f", c.vacuum_s) << '\t' << fmt("%.0f", c.vacuum_wal) << '\t'
          << c.stats_del << '\t' << c.stats_after.n_dead_tup << '\t' << fmt("%.0f", c.quiet_pct) << '\t'
          << fmt("%.1f", c.load_s) << '\t' << c.base.waits << '\t' << c.during.waits << '\t' << c.purge_waits << '\t'
          << c.during.autovacuum << '\t' << c.check << '\n';
    }
}

void write_markdown(const Options& o, const std::vector<Cell>& cells, std::ostream& md) {
    md << "### Purge of expired dedup records while 2 clients store\n\n"
       << "Per size: N expired records (consumer 'expired', UUIDv7 ids, first_seen_at 90 to 60 days back, in that "
          "order) and " << fmt_int(static_cast<double>(o.recent_rows)) << " recent ones (the last day), copied into "
          "`whizbang.wh_message_deduplication` from a staging table (loaded once per size by COPY) before every cell, "
          "then `VACUUM (ANALYZE)` and `CHECKPOINT`. **baseline**: " << o.conns << " clients call "
          "`store_inbox_messages` with batches of " << o.batch << " new messages (~" << o.envelope_bytes
       << " B envelopes, payloads built before the clock starts; " << fmt("%.0f", o.warm_seconds) << " s untimed "
          "first) for " << fmt("%.0f", o.seconds) << " s; then, with no checkpoint in between, **during**: the same "
          "clients again while a third connection (or the background worker) purges, from the release until the purge "
          "has ended and for at least " << fmt("%.0f", o.min_during) << " s. ratio = during msgs/s / baseline msgs/s, the "
          "issue target (23) is >= 0.95. store CPU = CPU time of the " << o.conns << " store backends per message (from "
          "/proc). other % = CPU of everything else (WAL writer, checkpointer, autovacuum, the monitor, other work on "
          "the machine) as a share of all cores; the purge's own CPU is its column (purge CPU % = its CPU over its "
          "time, share of all cores). purge WAL: measured alone; with the clients, the window's WAL minus the "
          "baseline's WAL per message times the messages stored (an estimate). msgs not stored = the baseline rate times "
          "the window minus the messages stored in it: the stores the purge cost. Sizes up to "
       << fmt_int(static_cast<double>(o.rounds_up_to)) << ": " << o.rounds << " round(s), methods interleaved; larger: 1. "
          "The purge alone runs with an empty inbox (its NOT EXISTS look-ups find nothing); with the clients the inbox "
          "holds the messages of the warm-up, the baseline and the window. n_tup_del counted = the deletions the "
          "cumulative statistics recorded for the dedup table (pg_stat_user_tables, read after the purging backend "
          "flushed them): what autovacuum goes by.\n\n";
    for (long n : o.sizes) {
        md << "#### " << fmt_int(static_cast<double>(n)) << " expired records\n\n";
        bool any_alone = false;
        for (auto& c : cells) any_alone = any_alone || (c.size == n && c.alone);
        if (any_alone) {
            md << "Alone (nothing else running), then a plain `VACUUM` of the dedup table (the clean-up the purge "
                  "leaves behind):\n\n"
               << "| purge | s | rows | rows/s | CPU s | CPU us/row | WAL B/row | other % | VACUUM s | VACUUM WAL MB | "
                  "n_tup_del counted | check |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|\n";
            for (auto& c : cells) {
                if (c.size != n || !c.alone) continue;
                md << "| " << c.label << (n <= o.rounds_up_to && o.rounds > 1 ? " (round " + std::to_string(c.round) + ")" : "")
                   << " | " << fmt("%.2f", c.purge.secs) << " | " << fmt_int(static_cast<double>(c.purge.rows))
                   << " | " << fmt_int(c.purge.secs > 0 ? c.purge.rows / c.purge.secs : 0) << " | " << num(c.purge.cpu_s)
                   << " | " << (c.purge.rows && c.purge.cpu_s >= 0 ? fmt("%.2f", c.purge.cpu_s * 1e6 / c.purge.rows) : "n/a")
                   << " | " << (c.purge.rows ? fmt("%.0f", c.purge_wal / c.purge.rows) : "n/a") << " | "
                   << num(c.during.other_pct, "%.0f") << " | " << num(c.vacuum_s) << " | " << num(c.vacuum_wal / 1e6, "%.0f")
                   << " | " << fmt_int(static_cast<double>(c.stats_del)) << " | " << c.check << " |\n";
            }
            md << "\n";
        }
        md << "With " << o.conns << " clients storing:\n\n"
           << "| purge | purge s | rows | rows/s | purge CPU s | purge CPU % | purge WAL B/row (est.) | baseline msgs/s | "
              "during msgs/s | ratio | >= 0.9 | msgs not stored | store CPU us/msg base / during | p99 ms base / during | other % base / during "
              "| WAL B/msg base | checkpoints base / during | check |\n"
           << "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|---|\n";
        for (auto& c : cells) {
            if (c.size != n || c.alone) continue;
            double q = ratio(c);
            md << "| " << c.label << (n <= o.rounds_up_to && o.rounds > 1 ? " (round " + std::to_string(c.round) + ")" : "") << " | "
               << fmt("%.2f", c.purge.secs) << " | " << fmt_int(static_cast<double>(c.purge.rows)) << " | "
               << fmt_int(c.purge.secs > 0 ? c.purge.rows / c.purge.secs : 0) << " | " << num(c.purge.cpu_s) << " | "
               << num(c.purge_cpu_pct, "%.0f") << " | " << (c.purge.rows ? fmt("%.0f", c.purge_wal / c.purge.rows) : "n/a")
               << " | " << fmt_int(c.base.msgs_per_s) << " | " << fmt_int(c.during.msgs_per_s) << " | " << num(q, "%.3f")
               << " | " << (q < 0 ? "n/a" : q >= 0.9 ? "met" : "missed") << " | " << fmt_int(lost(c)) << " | "
               << num(c.base.store_cpu_us, "%.1f")
               << " / " << num(c.during.store_cpu_us, "%.1f") << " | " << fmt("%.2f", c.base.p99) << " / "
               << fmt("%.2f", c.during.p99) << " | " << num(c.base.other_pct, "%.0f") << " / "
               << num(c.during.other_pct, "%.0f") << " | "
               << (c.base.msgs ? fmt("%.0f", c.base.wal_bytes / c.base.msgs) : "n/a") << " | " << c.base.checkpoints
               << " / " << c.during.checkpoints << " | " << c.check << " |\n";
        }
        md << "\nWhere the time went (pg_stat_activity sampled every 100 ms: 'CPU' = active without a wait event; "
              "idle = between calls, the client's turn; autovacuum = samples with an autovacuum worker running):\n\n"
           << "| purge | cell | store backends, baseline | store backends, during | purge | autovacuum during |\n"
           << "|---|---|---|---|---|---|\n";
        for (auto& c : cells) {
            if (c.size != n) continue;
            md << "| " << c.method << " | " << (c.alone ? "alone" : "with clients") << " | "
               << (c.alone ? "-" : c.base.waits) << " | " << (c.alone ? "-" : c.during.waits) << " | " << c.purge_waits
               << " | " << c.during.autovacuum << " |\n";
        }
        md << "\n";
    }
    md << "Load times (staging excluded; INSERT from the staging table, VACUUM (ANALYZE), CHECKPOINT) per cell: ";
    bool first = true;
    for (auto& c : cells) {
        md << (first ? "" : ", ") << c.method << " " << fmt_int(static_cast<double>(c.size)) << (c.alone ? " alone " : " pair ")
           << fmt("%.0f", c.load_s) << " s";
        first = false;
    }
    md << ".\n\n";
    std::vector<long> planned;  // one plan per size: the first round's
    for (auto& c : cells)
        if (!c.plan_before.empty() && std::find(planned.begin(), planned.end(), c.size) == planned.end()) {
            planned.push_back(c.size);
            md << "Plan of the purge's statement (the text of `purge_dedup_plan` in src/pg/maintenance/maintenance.cpp, prepared on "
                  "the purging connection, first block range of a batch, `EXPLAIN EXECUTE`), " << fmt_int(static_cast<double>(c.size))
               << " records: right before the window during the purge (the inbox holding the warm-up's and the "
                  "baseline's messages), then after it:\n\n```\n" << c.plan_before << "---\n" << c.plan_after << "```\n\n";
        }
    md << "#### Targets\n\nMedian over the rounds (range in brackets) of the valid pairs.\n\n"
       << "| purge | rows | rounds | purge s with the clients | ratio during / baseline | target >= 0.9 |\n"
       << "|---|---:|---:|---:|---:|---|\n";
    std::vector<std::pair<long, std::string>> keys;
    for (auto& c : cells)
        if (!c.alone && std::find(keys.begin(), keys.end(), std::make_pair(c.size, c.method)) == keys.end())
            keys.push_back({c.size, c.method});
    for (auto& key : keys) {
        std::vector<double> qs, ss;
        std::string label, bad;
        for (auto& c : cells) {
            if (c.alone || c.size != key.first || c.method != key.second) continue;
            label = c.label;
            if (c.valid) {
                qs.push_back(ratio(c));
                ss.push_back(c.purge.secs);
            } else {
                bad += (bad.empty() ? "" : "; ") + c.check;
            }
        }
        double q = median_of(qs);
        auto range = [](std::vector<double> v, const char* f) {
            if (v.size() < 2) return std::string();
            std::sort(v.begin(), v.end());
            return " (" + fmt(f, v.front()) + "-" + fmt(f, v.back()) + ")";
        };
        md << "| " << label << " | " << fmt_int(static_cast<double>(key.first)) << " | " << qs.size() << " | "
           << num(median_of(ss)) << range(ss, "%.2f") << " | " << num(q, "%.3f") << range(qs, "%.3f") << " | "
           << (q < 0 ? "n/a" : q >= 0.9 ? "met" : "missed") << (bad.empty() ? "" : "; invalid rounds: " + bad) << " |\n";
    }
}

// The generic plan of the purge's statement (the text of src/pg/maintenance/maintenance.cpp's
// purge_dedup_plan), for the first block range of a batch of `batch` rows.
std::string purge_plan(PGconn* c, int retention_days, int batch) {
    const std::string sql =
        "PREPARE bench_purge_dedup(timestamptz, tid, tid) AS "
        "DELETE FROM whizbang.wh_message_deduplication d"
        " WHERE d.ctid OPERATOR(pg_catalog.>=) $2 AND d.ctid OPERATOR(pg_catalog.<) $3"
        "   AND d.first_seen_at OPERATOR(pg_catalog.<) $1"
        "   AND NOT EXISTS (SELECT 1 FROM whizbang.wh_inbox i"
        "                    WHERE i.message_id OPERATOR(pg_catalog.=) d.message_id"
        "                      AND i.consumer OPERATOR(pg_catalog.=) d.consumer)"
        "   AND NOT EXISTS (SELECT 1 FROM whizbang.wh_dead_letters x"
        "                    WHERE x.message_id OPERATOR(pg_catalog.=) d.message_id"
        "                      AND x.consumer OPERATOR(pg_catalog.=) d.consumer"
        "                      AND x.source OPERATOR(pg_catalog.=) 'inbox')";
    std::string out;
    try {
        exec_admin(c, "DEALLOCATE ALL");
        exec_admin(c, sql);
        long rows_per_block = std::atol(exec_admin(c, "SELECT greatest(1, reltuples::bigint / greatest(relpages, 1)) FROM "
                                                      "pg_class WHERE oid = 'whizbang.wh_message_deduplication'::regclass")
                                            .c_str());
        long blocks = std::max(1L, batch / std::max(1L, rows_per_block));
        for (const char* mode : {"force_custom_plan", "force_generic_plan"}) {
            exec_admin(c, std::string("SET plan_cache_mode = ") + mode);
            PgResult r(PQexec(c, ("EXPLAIN EXECUTE bench_purge_dedup(now() - interval '" + std::to_string(retention_days) +
                                  " days', '(0,0)', '(" + std::to_string(blocks) + ",0)')").c_str()));
            out += std::string(mode) + " (" + std::to_string(blocks) + " blocks, inbox reltuples " +
                   exec_admin(c, "SELECT reltuples::bigint FROM pg_class WHERE oid = 'whizbang.wh_inbox'::regclass") + "):\n";
            for (int i = 0; PQresultStatus(r.r) == PGRES_TUPLES_OK && i < PQntuples(r.r); ++i)
                out += std::string(PQgetvalue(r.r, i, 0)) + "\n";
        }
        exec_admin(c, "RESET plan_cache_mode");
        exec_admin(c, "DEALLOCATE bench_purge_dedup");
    } catch (const std::exception& e) {
        out = std::string("(no plan: ") + e.what() + ")\n";
    }
    return out;
}

}  // namespace

int main(int argc, char** argv) {
    Options o = parse_options(argc, argv);
    Conns k;
    k.admin = connect_or_die(o.dsn);
    k.purger = connect_or_die(o.dsn);
    k.monitor = connect_or_die(o.dsn);
    exec_admin(k.admin, "SET client_min_messages = warning");
    for (int i = 0; i < o.conns; ++i) {
        k.clients.push_back(std::make_unique<Client>(connect_or_die(o.dsn), 0x9e3779b97f4a7c15ULL * (i + 1), o.envelope_bytes));
        prepare_or_die(k.clients.back()->conn, "store", kStoreInboxSql);
    }
    const int retention_days = std::atoi(
        exec_admin(k.admin, "SELECT value FROM whizbang.settings WHERE setting_key = 'dedup_retention_days'").c_str());
    if (retention_days < 1 || retention_days > 59) {
        std::fprintf(stderr, "dedup_retention_days is %d: the benchmark's expired records (60-90 days) need 1-59\n", retention_days);
        return 1;
    }
    g_default_delay_ms = std::atoi(
        exec_admin(k.admin, "SELECT coalesce((SELECT setting FROM pg_settings WHERE name = "
                            "'whizbang.maintenance_batch_delay'), '-1')").c_str());
    std::vector<Method> methods;
    for (auto& name : o.methods)
        for (auto& m : method_table(o, retention_days))
            if (m.name == name) methods.push_back(m);
    if (has(o.methods, "worker0") && g_default_delay_ms < 0) {
        std::fprintf(stderr, "method worker0: this whizbang build has no whizbang.maintenance_batch_delay\n");
        return 1;
    }
    if ((has(o.methods, "worker") || has(o.methods, "worker0")) && !worker_pid(k.admin)) {
        std::fprintf(stderr, "method worker: no whizbang maintenance worker runs in this database (the cluster needs "
                             "shared_preload_libraries = 'whizbang' and whizbang.maintenance_databases)\n");
        return 1;
    }

    std::vector<Cell> cells;
    std::map<std::string, std::pair<long, double>> last_during;  // method -> size, purge seconds with the clients
    for (long n : o.sizes) {
        std::fprintf(stderr, "==> %ld expired records\n", n);
        std::vector<PGconn*> load_conns;
        for (auto& c : k.clients) load_conns.push_back(c->conn);
        try {
            load_stage(k.admin, load_conns, n, o.recent_rows);
        } catch (const std::exception& e) {
            std::fprintf(stderr, "cannot stage %ld records: %s\n", n, e.what());
            return 1;
        }
        const int rounds = n <= o.rounds_up_to ? o.rounds : 1;
        for (int round = 1; round <= rounds; ++round)
            for (auto& m : methods) {
                // How long the purge may take with the clients, to size their pools: from the time
                // alone (its CPU part 5x: it gets about a third of the cores), or the last size's,
                // scaled.
                double estimate = -1;
                if (o.alone) {
                    std::fprintf(stderr, "  %s alone, %ld records (round %d)\n", m.name.c_str(), n, round);
                    Cell a;
                    try {
                        a = run_alone(o, m, n, retention_days, k);
                    } catch (const std::exception& e) {
                        a.size = n;
                        a.method = m.name;
                        a.label = m.label;
                        a.alone = true;
                        a.check = e.what();
                    }
                    a.round = round;
                    print_cell(a);
                    cells.push_back(a);
                    // The purge's CPU time stretches about 5x; a worker's sleeps between batches do not.
                    if (a.valid) estimate = std::max(0.0, a.purge.secs - a.purge.cpu_s) + a.purge.cpu_s * 5;
                }
                if (last_during.count(m.name))
                    estimate = std::max(estimate, last_during[m.name].second * n / std::max(1L, last_during[m.name].first));
                if (estimate < 0) estimate = n / 25000.0;
                std::fprintf(stderr, "  %s with %d clients, %ld records (round %d)\n", m.name.c_str(), o.conns, n, round);
                Cell p;
                try {
                    p = run_pair(o, m, n, retention_days, estimate, k);
                } catch (const std::exception& e) {
                    p.size = n;
                    p.method = m.name;
                    p.label = m.label;
                    p.check = e.what();
                }
                p.round = round;
                print_cell(p);
                cells.push_back(p);
                if (p.purge.secs > 0) last_during[m.name] = {n, p.purge.secs};
            }
    }
    exec_admin(k.admin, std::string("DROP TABLE IF EXISTS ") + kStage);
    exec_admin(k.admin, std::string("TRUNCATE whizbang.wh_inbox, whizbang.wh_inbox_work, whizbang.wh_inbox_streams, ") + kDedup);

    if (!o.tsv_path.empty()) {
        std::ofstream t(o.tsv_path);
        write_tsv(t, cells);
    }
    std::ostringstream md;
    write_markdown(o, cells, md);
    if (!o.md_path.empty()) {
        std::ofstream f(o.md_path);
        f << md.str();
    } else {
        std::printf("\n%s", md.str().c_str());
    }
    for (auto& c : k.clients) PQfinish(c->conn);
    PQfinish(k.monitor);
    PQfinish(k.purger);
    PQfinish(k.admin);
    bool bad = false;
    for (auto& c : cells) bad = bad || !c.valid;
    return bad ? 3 : 0;
}
