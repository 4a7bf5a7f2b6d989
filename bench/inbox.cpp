// Load driver for the whizbang inbox benchmark (bench/inbox starts it; see bench/README.md).
//
// Three parts, on N long-lived connections (one thread each), in one run on one cluster:
//
//   store    whizbang.store_inbox_messages against (a) the seed's PL/pgSQL loop, (b) one plain
//            set-based statement and (c) COPY of the same rows into the same tables (three, or
//            two once the work state is in wh_inbox: g_work_table), at several batch sizes;
//            every message new, ~1 KB JSON envelopes.
//   cycle    N clients each loop claim 100 + complete 100 over a pre-loaded inbox: whizbang's
//            claim_work + complete_work against (r) SELECT ... FOR UPDATE SKIP LOCKED LIMIT 100
//            + DELETE ... = ANY on a one-table queue (the message row with the work columns,
//            issue 31) and (l) the lease model in plain SQL on the same table.
//   latency  one client: the time of one claim_work(..., 100) call with S pending messages;
//            after each call the claimed messages are completed and 100 new ones stored
//            (untimed), so S stays constant. Median of many calls, per S.
//
// Store and cycle cells use the shared machinery of common.h (as the dedup driver does): every
// payload of a timed window is built before its clock starts; all threads are released
// together; the CPU of the server backends, of the driver and of everything else, and the WAL,
// are measured per window; a window disturbed by other work is measured again; rounds are
// interleaved and the median is reported.
//
// Output: a text table on stdout, a TSV (--tsv) and a markdown fragment (--md).
// Connection parameters come from the usual PG* environment variables (or --dsn).

#include "core/partition.h"
#include "common.h"

namespace {

using namespace bench;

// ---------------------------------------------------------------------------------------------
// Options

struct Options : RunOptions {
    std::vector<std::string> parts{"store", "cycle", "latency"};
    std::vector<std::string> store_methods{"native", "plpgsql", "plain", "copy"};
    std::vector<int> batches{1, 100, 1000};
    std::vector<std::string> cycle_methods{"native", "native2", "sql", "sql_lease"};
    std::vector<long> latency_sizes{1000, 1000000};
    long max_msgs = 250000;     // per connection per store cell (memory cap)
    long cycle_rows = 150000;   // pending messages loaded before each cycle cell
    int claim_rows = 100;
    int latency_calls = 300;
};

[[noreturn]] void usage(const char* msg) {
    std::fprintf(stderr,
                 "error: %s\n"
                 "usage: inbox_driver [--parts=store,cycle,latency] [--store-methods=native,plpgsql,plain,copy] "
                 "[--batches=1,100,1000] [--cycle-methods=native,native2,sql] [--latency-sizes=1000,1000000] "
                 "[--conns=2] [--rounds=3] [--retries=1] [--max-other=20] [--retry-budget=0.5] [--seconds=2] "
                 "[--envelope-bytes=1000] [--max-msgs=250000] [--cycle-rows=150000] [--claim-rows=100] "
                 "[--latency-calls=300] [--dsn=CONNINFO] [--tsv=FILE] [--md=FILE]\n",
                 msg);
    std::exit(2);
}

Options parse_options(int argc, char** argv) {
    Options o;
    parse_key_values(argc, argv, [&](const std::string& key, const std::string& val) {
        if (parse_run_option(key, val, o)) return true;
        if (key == "--parts") o.parts = split(val, ',');
        else if (key == "--store-methods") o.store_methods = split(val, ',');
        else if (key == "--batches") {
            o.batches.clear();
            for (auto& b : split(val, ',')) o.batches.push_back(std::stoi(b));
        } else if (key == "--cycle-methods") o.cycle_methods = split(val, ',');
        else if (key == "--latency-sizes") {
            o.latency_sizes.clear();
            for (auto& s : split(val, ',')) o.latency_sizes.push_back(std::stol(s));
        } else if (key == "--max-msgs") o.max_msgs = std::stol(val);
        else if (key == "--cycle-rows") o.cycle_rows = std::stol(val);
        else if (key == "--claim-rows") o.claim_rows = std::stoi(val);
        else if (key == "--latency-calls") o.latency_calls = std::stoi(val);
        else return false;
        return true;
    }, usage);
    if (o.conns < 1 || o.rounds < 1 || o.seconds <= 0 || o.max_msgs < 1 || o.cycle_rows < 1 || o.claim_rows < 1 ||
        o.latency_calls < 1 || o.envelope_bytes < 200)
        usage("counts and seconds must be positive, --envelope-bytes at least 200");
    for (int b : o.batches)
        if (b < 1) usage("batch sizes must be positive");
    for (long s : o.latency_sizes)
        if (s < o.claim_rows) usage("latency sizes must be at least --claim-rows");
    return o;
}

// ---------------------------------------------------------------------------------------------
// Messages (client side, before timing)

constexpr int kPartitionCount = 10000;  // store_inbox_messages' default

// whizbang's own partition_of (src/core, linked in), for the rows COPY writes; every load is
// checked against whizbang.partition_of afterwards.
int partition_of(const Uuid& u, int count) { return whizbang::core::partition_of(u, count); }

// One batch as every method sends it.
struct Batch {
    std::string json;                 // p_messages (native, plpgsql, plain)
    std::string dedup, inbox, work;   // COPY text rows (copy)
};

// COPY column lists; the other columns take their defaults, as store_inbox_messages leaves them.
constexpr const char* kDedupCols = "(consumer, message_id)";
constexpr const char* kInboxCols =
    "(consumer, message_id, handler_name, message_type, envelope, metadata, is_event, sent_at, received_at)";
constexpr const char* kWorkCols = "(consumer, message_id, partition_number, scheduled_for)";
// One table (the work columns in the message row): the message's columns, then the work's.
constexpr const char* kInboxWorkCols =
    "(consumer, message_id, handler_name, message_type, envelope, metadata, is_event, sent_at, received_at,"
    " partition_number, scheduled_for)";

// b.inbox's lines with the work columns of b.work's (same order, same ids) appended.
std::string one_table_rows(const Batch& b) {
    std::string out;
    out.reserve(b.inbox.size() + b.work.size() / 2);
    std::size_t i = 0, w = 0;
    while (i < b.inbox.size() && w < b.work.size()) {
        std::size_t ie = b.inbox.find('\n', i), we = b.work.find('\n', w);
        // A work line: consumer \t message_id \t partition_number \t scheduled_for.
        std::size_t tab = b.work.find('\t', b.work.find('\t', w) + 1);
        out.append(b.inbox, i, ie - i);
        out.append(b.work, tab, we - tab + 1);
        i = ie + 1;
        w = we + 1;
    }
    return out;
}

// Appends n new messages to `b` in the form(s) `json` / `copy` ask for; their ids to `ids`.
void build_batch(MessageFactory& f, const std::string& consumer, std::size_t n, bool json, bool copy, Batch& b,
                 std::vector<Uuid>& ids) {
    if (json && !copy) {
        b.json = inbox_batch_json(f, n, ids);
        return;
    }
    const std::string ts = now_text();
    if (json) b.json = "[";
    for (std::size_t k = 0; k < n; ++k) {
        Uuid id = f.next_id();
        ids.push_back(id);
        std::string env = f.envelope(id, ts);
        if (json) {
            if (k) b.json.push_back(',');
            b.json += inbox_element(id, env, ts);
        }
        if (copy) {
            const std::string idt = uuid_text(id);
            b.dedup += consumer + "\t" + idt + "\n";
            b.inbox += consumer + "\t" + idt + "\t" + kInboxHandler + "\t" + kInboxType + "\t" + env + "\t" +
                       kInboxMetadata + "\tt\t" + ts + "\t" + ts + "\n";
            b.work += consumer + "\t" + idt + "\t" + std::to_string(partition_of(id, kPartitionCount)) + "\t" + ts + "\n";
        }
    }
    if (json) b.json.push_back(']');
}

// ---------------------------------------------------------------------------------------------
// Tables

struct Tables {
    std::string dedup, inbox, work;  // dedup empty: none (the claim-cycle reference); work empty:
                                     // the work columns are in the message row (one table)
    std::string extra;               // also truncated (whizbang's stream counters)
};

// whizbang's shape: up to 0.13.0 the work state is a table of its own (wh_inbox_work); with
// issue 31 it moves into wh_inbox. Read once at the start (main); the copies of
// bench/inbox_reference.sql follow it, and every statement below is written for both.
bool g_work_table = true;

// Where a message's work columns are.
std::string work_of(const Tables& t) { return t.work.empty() ? t.inbox : t.work; }

Tables native_tables() {
    return {"whizbang.wh_message_deduplication", "whizbang.wh_inbox", g_work_table ? "whizbang.wh_inbox_work" : "",
            "whizbang.wh_inbox_streams"};
}

// The peers' copies (bench/inbox_reference.sql): bench.ib_<m>_dedup / _inbox / _work.
Tables peer_tables(const std::string& m) {
    return {"bench.ib_" + m + "_dedup", "bench.ib_" + m + "_inbox", g_work_table ? "bench.ib_" + m + "_work" : "", ""};
}

// The claim-cycle references' one-table queue: the message row with the work columns.
const Tables kCycleTables{"", "bench.ib_cycle_inbox", "", ""};

std::string truncate_sql(const Tables& t) {
    std::string s = "TRUNCATE " + t.inbox + (t.work.empty() ? "" : ", " + t.work);
    if (!t.dedup.empty()) s += ", " + t.dedup;
    if (!t.extra.empty()) s += ", " + t.extra;
    return s;
}

// Rows on record must be what was sent: every message once in each table (the dedup table:
// `want_dedup` rows, when it differs), every message with its work row, every partition
// whizbang's.
std::string table_check(PGconn* admin, const Tables& t, long want, long want_dedup = -1) {
    if (want_dedup < 0) want_dedup = want;
    const std::string work_table = work_of(t);  // one table: every message is its own work row
    std::string q = "SELECT (SELECT count(*) FROM " + t.inbox + "), (SELECT count(*) FROM " + work_table + "), " +
                    (t.dedup.empty() ? std::string("-1") : "(SELECT count(*) FROM " + t.dedup + ")") +
                    ", (SELECT count(*) FROM " + work_table +
                    " w WHERE w.partition_number <> whizbang.partition_of(coalesce(w.stream_id, w.message_id), " +
                    std::to_string(kPartitionCount) + ")), (SELECT count(*) FROM " + t.inbox + " i WHERE NOT EXISTS (SELECT 1 FROM " +
                    work_table + " w WHERE w.message_id = i.message_id AND w.consumer = i.consumer))";
    PgResult r(PQexec(admin, q.c_str()));
    if (PQresultStatus(r.r) != PGRES_TUPLES_OK) return "table check failed: " + one_line(PQerrorMessage(admin));
    long inbox = std::atol(PQgetvalue(r.r, 0, 0)), work = std::atol(PQgetvalue(r.r, 0, 1)),
         dedup = std::atol(PQgetvalue(r.r, 0, 2)), bad_part = std::atol(PQgetvalue(r.r, 0, 3)),
         orphans = std::atol(PQgetvalue(r.r, 0, 4));
    std::string out;
    auto add = [&](const std::string& s) { out += (out.empty() ? "" : "; ") + s; };
    if (inbox != want || work != want || (dedup >= 0 && dedup != want_dedup))
        add("tables hold " + std::to_string(inbox) + " messages / " + std::to_string(work) + " work rows / " +
            std::to_string(dedup) + " dedup rows, expected " + std::to_string(want) + " / " + std::to_string(want) +
            " / " + std::to_string(want_dedup));
    if (bad_part) add(std::to_string(bad_part) + " work rows with a partition other than whizbang.partition_of");
    if (orphans) add(std::to_string(orphans) + " messages without a work row");
    return out;
}

// The rows of the messages of `json` (a p_messages array) must be in the tables exactly as
// sent (run after the warm-up of every store cell: all methods write the same rows). Only
// columns every version of the tables has are compared; whizbang's dedup row may also carry
// the envelope's fingerprint, which the baselines (like the seed) do not compute.
std::string content_check(PGconn* admin, const Tables& t, const std::string& json, long want) {
    std::string q =
        "SELECT count(*) FROM jsonb_array_elements($1::jsonb) e"
        " JOIN " + t.inbox + " i ON i.consumer = '' AND i.message_id = (e->>'MessageId')::uuid"
        " JOIN " + work_of(t) + " w ON w.consumer = i.consumer AND w.message_id = i.message_id"
        " JOIN " + t.dedup + " d ON d.consumer = i.consumer AND d.message_id = i.message_id"
        " WHERE i.envelope = e->'Envelope' AND i.handler_name = e->>'HandlerName'"
        "   AND i.message_type = e->>'MessageType' AND i.metadata = e->'Metadata' AND i.scope IS NULL"
        "   AND i.stream_id IS NULL AND i.is_event AND i.sent_at = (e->>'SentAt')::timestamptz"
        "   AND i.received_at <= now() AND w.stream_id IS NULL AND w.stream_seq IS NULL"
        "   AND w.partition_number = whizbang.partition_of(i.message_id, " + std::to_string(kPartitionCount) + ")"
        "   AND w.scheduled_for <= now() AND w.attempts = 0 AND w.lease_instance IS NULL AND w.lease_token IS NULL"
        "   AND w.lease_expiry IS NULL AND w.processed_at IS NULL AND w.last_error IS NULL"
        "   AND d.observation_count = 1 AND d.conflict_count = 0";
    const char* values[1] = {json.c_str()};
    PgResult r(PQexecParams(admin, q.c_str(), 1, nullptr, values, nullptr, nullptr, 0));
    if (PQresultStatus(r.r) != PGRES_TUPLES_OK) return "content check failed: " + one_line(PQerrorMessage(admin));
    long got = std::atol(PQgetvalue(r.r, 0, 0));
    if (got != want)
        return "content check: " + std::to_string(got) + " of " + std::to_string(want) +
               " messages of the first batch stored exactly as sent";
    return "";
}

// ---------------------------------------------------------------------------------------------
// Store methods

enum class StoreKind { Function, Copy };

struct StoreMethod {
    std::string name, label;
    Tables tables;
    StoreKind kind = StoreKind::Function;
    std::string sql;  // $1 p_messages (jsonb text), $2 consumer
};

std::vector<StoreMethod> store_method_table() {
    std::vector<StoreMethod> m;
    m.push_back({"native", "native store_inbox_messages", native_tables(), StoreKind::Function, kStoreInboxSql});
    m.push_back({"plpgsql", "(a) PL/pgSQL loop (seed)", peer_tables("plpgsql"), StoreKind::Function,
                 "SELECT message_id, stream_id, was_newly_created"
                 " FROM bench.store_inbox_messages_plpgsql($1::jsonb, NULL, NULL, now(), 10000, $2::text)"});
    // One table: the message row carries partition_number and scheduled_for (no work insert).
    const std::string work_columns = g_work_table ? "" : ", partition_number, scheduled_for";
    const std::string work_values = g_work_table ? ""
                                                 : ", whizbang.partition_of(coalesce(m.stream_id, m.id), 10000),"
                                                   " coalesce(m.scheduled_for, now())";
    const std::string work_insert =
        !g_work_table ? ""
                      : "), w AS ("
                        "  INSERT INTO bench.ib_plain_work (consumer, message_id, stream_id, partition_number, scheduled_for)"
                        "  SELECT $2::text, m.id, m.stream_id, whizbang.partition_of(coalesce(m.stream_id, m.id), 10000),"
                        "         coalesce(m.scheduled_for, now())"
                        "    FROM m JOIN d ON d.message_id = m.id";
    m.push_back({"plain", "(b) plain set-based statement", peer_tables("plain"), StoreKind::Function,
                 "WITH m AS ("
                 "  SELECT x.* FROM ROWS FROM (jsonb_to_recordset($1::jsonb) AS (\"MessageId\" uuid, \"HandlerName\" text,"
                 "      \"MessageType\" text, \"Envelope\" jsonb, \"Metadata\" jsonb, \"Scope\" jsonb, \"StreamId\" uuid,"
                 "      \"IsEvent\" boolean, \"SentAt\" timestamptz, \"ScheduledFor\" timestamptz)) WITH ORDINALITY"
                 "    AS x(id, handler, type, envelope, metadata, scope, stream_id, is_event, sent_at, scheduled_for, ord)"
                 "), d AS ("
                 "  INSERT INTO bench.ib_plain_dedup AS d (consumer, message_id, first_seen_at)"
                 "  SELECT $2::text, m.id, now() FROM m"
                 "  ON CONFLICT (message_id, consumer) DO NOTHING"
                 "  RETURNING d.message_id"
                 "), i AS ("
                 "  INSERT INTO bench.ib_plain_inbox (consumer, message_id, handler_name, message_type, envelope, metadata,"
                 "                                    scope, stream_id, is_event, sent_at, received_at" + work_columns + ")"
                 "  SELECT $2::text, m.id, m.handler, m.type, m.envelope, m.metadata, m.scope, m.stream_id,"
                 "         coalesce(m.is_event, false), m.sent_at, now()" + work_values +
                 "    FROM m JOIN d ON d.message_id = m.id" + work_insert +
                 ")"
                 "SELECT m.id, m.stream_id, true FROM m JOIN d ON d.message_id = m.id ORDER BY m.ord"});
    m.push_back({"copy", g_work_table ? "(c) COPY into the 3 tables" : "(c) COPY into the 2 tables", peer_tables("copy"),
                 StoreKind::Copy, ""});
    return m;
}

// The message rows by COPY; on one table with the work columns of b.work joined to each line.
long copy_inbox(PGconn* c, const Tables& t, const Batch& b) {
    if (!t.work.empty()) return copy_in(c, "COPY " + t.inbox + " " + kInboxCols + " FROM STDIN", b.inbox);
    return copy_in(c, "COPY " + t.inbox + " " + kInboxWorkCols + " FROM STDIN", one_table_rows(b));
}

// Three COPYs (dedup, message, work; two on one table) in one transaction; returns "" or the problem.
std::string copy_batch(PGconn* c, const Tables& t, const Batch& b, long n) {
    std::string e = exec_ok(c, "BEGIN");
    if (!e.empty()) return e;
    try {
        long d = copy_in(c, "COPY " + t.dedup + " " + kDedupCols + " FROM STDIN", b.dedup);
        long i = copy_inbox(c, t, b);
        long w = t.work.empty() ? i : copy_in(c, "COPY " + t.work + " " + kWorkCols + " FROM STDIN", b.work);
        if (d != n || i != n || w != n) e = "COPY wrote " + std::to_string(d) + "/" + std::to_string(i) + "/" +
                                            std::to_string(w) + " rows, expected " + std::to_string(n);
    } catch (const std::exception& ex) {
        PQclear(PQexec(c, "ROLLBACK"));
        return std::string("ERROR: ") + ex.what();
    }
    std::string c2 = exec_ok(c, "COMMIT");
    return c2.empty() ? e : c2;
}

// One store call with its checks: one row per message, in input order, all new. `full`
// checks every row, else the count and both ends.
std::string store_call(PGconn* c, const StoreMethod& m, const Batch& b, const Uuid* ids, int batch, bool full) {
    if (m.kind == StoreKind::Copy) return copy_batch(c, m.tables, b, batch);
    return store_inbox_call(c, m.name, b.json, "", ids, batch, full);
}

struct Worker : LoadWorker {
    MessageFactory factory;
    std::vector<Uuid> ids;
    std::vector<Batch> batches;
    std::size_t warm_batches = 0, next = 0;
    std::vector<std::string> claimed;  // cycle: every message id handed to this client
    long short_claims = 0;             // cycle: claims that returned fewer rows than asked for

    Worker(PGconn* c, std::uint64_t seed, int envelope_bytes) : LoadWorker(c), factory(seed, envelope_bytes) {}

    void reset() {
        reset_counts();
        ids.clear();
        ids.shrink_to_fit();
        batches.clear();
        batches.shrink_to_fit();
        warm_batches = next = 0;
        short_claims = 0;
        claimed.clear();
        claimed.shrink_to_fit();
    }

    void generate(const StoreMethod& m, int batch, std::size_t nbatches, const std::string& consumer) {
        batches.reserve(batches.size() + nbatches);
        ids.reserve(ids.size() + nbatches * batch);
        for (std::size_t k = 0; k < nbatches; ++k) {
            Batch b;
            // The first batch also as JSON, for the content check of COPY's rows.
            bool json = m.kind == StoreKind::Function || batches.empty();
            build_batch(factory, consumer, batch, json, m.kind == StoreKind::Copy, b, ids);
            batches.push_back(std::move(b));
        }
    }
};

using Workers = std::vector<std::unique_ptr<Worker>>;

// One store cell: TRUNCATE, CHECKPOINT, warm-up with every row checked and the content check,
// a timed pool sized from the warm-up rate, CHECKPOINT, the timed window, the table check.
CellResult run_store_cell(const Options& o, const StoreMethod& m, int batch, PGconn* admin, Workers& ws) {
    CellResult res;
    res.method = m.name;
    res.label = m.label;
    res.mode = "store";
    res.batch = batch;
    res.conns = o.conns;
    const std::string consumer;  // the default consumer ''

    for (auto& w : ws) w->reset();
    exec_admin(admin, truncate_sql(m.tables));
    exec_admin(admin, "CHECKPOINT");

    const std::size_t warm_batches = std::max<std::size_t>(5, std::min<std::size_t>(200, 2000 / batch));
    for_each_worker(ws, [&](Worker& w, std::size_t) {
        w.generate(m, batch, warm_batches, consumer);
        w.warm_batches = warm_batches;
    });
    std::vector<double> warm_rate(ws.size(), 0);
    for_each_worker(ws, [&](Worker& w, std::size_t i) {
        auto t0 = Clock::now();
        for (std::size_t b = 0; b < w.warm_batches && w.error.empty(); ++b) {
            w.note(store_call(w.conn, m, w.batches[b], w.ids.data() + b * batch, batch, true));
            w.sent_msgs += batch;
        }
        w.next = w.warm_batches;
        double s = seconds_since(t0, Clock::now());
        warm_rate[i] = s > 0 ? w.warm_batches * batch / s : 0;
    });
    for (auto& w : ws)
        if (!w->error.empty()) { res.check = "warm-up " + w->error; return res; }
    std::string content = content_check(admin, m.tables, ws[0]->batches[0].json, batch);
    if (!content.empty()) { res.check = content; return res; }

    // The timed pool: x3 the warm-up rate, at least 8,000 messages/s per connection, capped
    // for memory (about 1.3 KB per message).
    for_each_worker(ws, [&](Worker& w, std::size_t i) {
        double want = std::max(warm_rate[i] * 3.0, 8000.0) * o.seconds + batch;
        long n = std::min<long>(std::max<long>(o.max_msgs, batch), static_cast<long>(want));
        w.generate(m, batch, std::max<std::size_t>(10, static_cast<std::size_t>(n / batch)), consumer);
    });
    exec_admin(admin, "CHECKPOINT");

    for (auto& w : ws) w->lat_ms.reserve(w->batches.size());
    Window win = timed_window(admin, conns_of(ws), o.seconds, [&](std::size_t i, Clock::time_point deadline) {
        Worker* w = ws[i].get();
        for (;;) {
            auto t0 = Clock::now();
            if (t0 >= deadline) break;
            if (w->next >= w->batches.size()) { w->exhausted = true; break; }
            std::string problem = store_call(w->conn, m, w->batches[w->next], w->ids.data() + w->next * batch, batch, false);
            auto t1 = Clock::now();
            ++w->next;
            w->note(problem);
            if (problem.rfind("ERROR:", 0) == 0) break;
            w->lat_ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
            w->timed_msgs += batch;
            w->sent_msgs += batch;
            ++w->timed_calls;
        }
    });
    fill_result(res, ws, win);

    std::vector<std::string> notes;
    std::string p = problems_of(ws);
    if (!p.empty()) notes.push_back(p);
    for (auto& w : ws)
        if (w->exhausted) {
            notes.push_back("pool ran out after " + fmt("%.2f", res.secs) + " s");
            break;
        }
    long sent = 0;
    for (auto& w : ws) sent += w->sent_msgs;
    std::string t = table_check(admin, m.tables, sent);
    if (!t.empty()) notes.push_back(t);
    if (!notes.empty()) {
        res.check.clear();
        for (auto& n : notes) res.check += (res.check.empty() ? "" : "; ") + n;
    }
    res.valid = res.ids > 0 && p.empty() && t.empty();
    return res;
}

// ---------------------------------------------------------------------------------------------
// Pre-loading pending messages (cycle and latency): COPY, as store_inbox_messages would have
// written them (message row, work row due now, dedup row), split over the connections.

void preload(Workers& ws, const Tables& t, long n) {
    const long chunk = 5000;
    for_each_worker(ws, [&](Worker& w, std::size_t i) {
        long mine = n / static_cast<long>(ws.size()) + (static_cast<long>(i) < n % static_cast<long>(ws.size()) ? 1 : 0);
        try {
            for (long done = 0; done < mine; done += chunk) {
                long k = std::min(chunk, mine - done);
                Batch b;
                std::vector<Uuid> ids;
                build_batch(w.factory, "", k, false, true, b, ids);
                if (!t.dedup.empty()) copy_in(w.conn, "COPY " + t.dedup + " " + kDedupCols + " FROM STDIN", b.dedup);
                copy_inbox(w.conn, t, b);
                if (!t.work.empty()) copy_in(w.conn, "COPY " + t.work + " " + kWorkCols + " FROM STDIN", b.work);
            }
        } catch (const std::exception& e) {
            w.error = std::string("preload: ") + e.what();
        }
    });
    for (auto& w : ws)
        if (!w->error.empty()) throw std::runtime_error(w->error);
}

// Loads n pending messages into `t` by COPY, then VACUUM (ANALYZE) and CHECKPOINT.
void prepare_pending(PGconn* admin, Workers& ws, const Tables& t, long n) {
    auto t0 = Clock::now();
    exec_admin(admin, truncate_sql(t));
    preload(ws, t, n);
    auto t1 = Clock::now();
    std::string check = table_check(admin, t, n);
    if (!check.empty()) throw std::runtime_error("preload: " + check);
    exec_admin(admin, "VACUUM (ANALYZE) " + t.inbox + (t.work.empty() ? "" : ", " + t.work) +
                          (t.dedup.empty() ? "" : ", " + t.dedup));
    exec_admin(admin, "CHECKPOINT");
    std::fprintf(stderr, "  loaded %ld pending messages into %s by COPY in %.1f s (%.1f s with checks, VACUUM, CHECKPOINT)\n",
                 n, t.inbox.c_str(), seconds_since(t0, t1), seconds_since(t0, Clock::now()));
}

// The claim-cycle backlog: loaded once by COPY into unlogged staging tables, then copied
// server-side into the tables of each cycle cell, so every method starts from the same
// messages (and a cell costs a second or two of loading, not a COPY of every envelope).
// Staged in whizbang's shape (native_tables()).
Tables stage_tables() { return {"", "bench.ib_stage_inbox", g_work_table ? "bench.ib_stage_work" : "", ""}; }

void create_stage(PGconn* admin, Workers& ws, long n) {
    const Tables kStage = stage_tables();
    exec_admin(admin, "DROP TABLE IF EXISTS bench.ib_stage_inbox, bench.ib_stage_work");
    exec_admin(admin, "CREATE UNLOGGED TABLE " + kStage.inbox + " (LIKE whizbang.wh_inbox INCLUDING DEFAULTS)");
    if (g_work_table)
        exec_admin(admin, "CREATE UNLOGGED TABLE " + kStage.work + " (LIKE whizbang.wh_inbox_work INCLUDING DEFAULTS)");
    auto t0 = Clock::now();
    preload(ws, kStage, n);
    std::fprintf(stderr, "  staged %ld pending messages for the claim cycle by COPY in %.1f s\n", n, seconds_since(t0, Clock::now()));
}

void drop_stage(PGconn* admin) { exec_admin(admin, "DROP TABLE IF EXISTS bench.ib_stage_inbox, bench.ib_stage_work"); }

// A cycle cell's tables: the staged messages (message and work rows; the dedup rows, which
// claim and complete never read, are left out), then VACUUM (ANALYZE) and CHECKPOINT.
void prepare_cycle(PGconn* admin, const Tables& t, long n) {
    auto t0 = Clock::now();
    const Tables kStage = stage_tables();
    exec_admin(admin, truncate_sql(t));
    if (!t.work.empty() || kStage.work.empty()) {  // the same shape
        exec_admin(admin, "INSERT INTO " + t.inbox + " SELECT * FROM " + kStage.inbox);
        if (!t.work.empty()) exec_admin(admin, "INSERT INTO " + t.work + " SELECT * FROM " + kStage.work);
    } else {
        // Two staged tables into one: each column of the target from the message row, else the work row.
        exec_admin(admin,
                   "DO $$ BEGIN EXECUTE (SELECT format('INSERT INTO " + t.inbox + " (%s) SELECT %s FROM " + kStage.inbox +
                       " i JOIN " + kStage.work + " w USING (consumer, message_id)',"
                       " string_agg(quote_ident(a.attname), ', ' ORDER BY a.attnum),"
                       " string_agg(CASE WHEN EXISTS (SELECT FROM pg_attribute s WHERE s.attrelid = '" + kStage.inbox +
                       "'::regclass AND s.attname = a.attname AND NOT s.attisdropped) THEN 'i.' ELSE 'w.' END"
                       " || quote_ident(a.attname), ', ' ORDER BY a.attnum))"
                       " FROM pg_attribute a WHERE a.attrelid = '" + t.inbox + "'::regclass AND a.attnum > 0"
                       " AND NOT a.attisdropped); END $$");
    }
    Tables no_dedup = t;
    no_dedup.dedup.clear();
    std::string check = table_check(admin, no_dedup, n);
    if (!check.empty()) throw std::runtime_error("cycle load: " + check);
    exec_admin(admin, "VACUUM (ANALYZE) " + t.inbox + (t.work.empty() ? "" : ", " + t.work));
    exec_admin(admin, "CHECKPOINT");
    std::fprintf(stderr, "  copied %ld staged messages into %s in %.1f s (with checks, VACUUM, CHECKPOINT)\n", n,
                 t.inbox.c_str(), seconds_since(t0, Clock::now()));
}

// ---------------------------------------------------------------------------------------------
// Claim cycle

struct CycleMethod {
    std::string name, label;
    Tables tables;
    bool one_transaction = true;
    std::string claim_sql;     // native: $1 instance uuid, $2 rows; (r): $1 rows. message_id first
    std::string complete_sql;  // native: $1 uuid[], $2 bigint[] tokens; (r): $1 uuid[]
    bool native = true;
};

std::vector<CycleMethod> cycle_method_table() {
    const std::string claim = "SELECT message_id, lease_token, stream_id, partition_number, handler_name, message_type,"
                              " envelope, metadata, scope, attempts, lease_expiry"
                              " FROM whizbang.claim_work($1::uuid, 'inbox', $2::int)";
    const std::string complete = "SELECT message_id, outcome FROM whizbang.complete_work('inbox', $1::uuid[], $2::bigint[])";
    std::vector<CycleMethod> m;
    m.push_back({"native", "native claim_work + complete_work, one transaction", native_tables(), true, claim, complete, true});
    m.push_back({"native2", "native claim_work, complete_work: a transaction each", native_tables(), false, claim, complete, true});
    // (r) and (l) run on a one-table queue (issue 31): the message row carries its work columns,
    // whatever whizbang's shape (bench/inbox_reference.sql, bench.ib_cycle_inbox).
    m.push_back({"sql", "(r) one-table SQL queue: FOR UPDATE SKIP LOCKED + DELETE = ANY, one transaction", kCycleTables, true,
                 "SELECT i.message_id, NULL::bigint, i.stream_id, i.partition_number, i.handler_name, i.message_type,"
                 "       i.envelope, i.metadata, i.scope, i.attempts"
                 "  FROM bench.ib_cycle_inbox i"
                 " WHERE i.processed_at IS NULL AND i.stream_id IS NULL AND i.scheduled_for <= now()"
                 " ORDER BY i.scheduled_for LIMIT $1::int"
                 "   FOR UPDATE SKIP LOCKED",
                 "DELETE FROM bench.ib_cycle_inbox i WHERE i.consumer = '' AND i.message_id = ANY ($1::uuid[])",
                 false});
    // The lease model in plain SQL (claim and complete in separate transactions): the lease is
    // written into the row, as whizbang's row lease store does, without its per-stream order,
    // fencing tokens, pre-leases or dead letters.
    m.push_back({"sql_lease", "(l) SQL lease model: UPDATE ... FOR UPDATE SKIP LOCKED RETURNING, DELETE = ANY: a transaction each",
                 kCycleTables, false,
                 "UPDATE bench.ib_cycle_inbox i"
                 "   SET lease_expiry = now() + interval '300 seconds', attempts = i.attempts + 1"
                 " WHERE i.consumer = '' AND i.message_id = ANY (ARRAY("
                 "       SELECT f.message_id FROM bench.ib_cycle_inbox f"
                 "        WHERE f.processed_at IS NULL AND f.stream_id IS NULL AND f.scheduled_for <= now()"
                 "          AND (f.lease_expiry IS NULL OR f.lease_expiry <= now())"
                 "        ORDER BY f.scheduled_for LIMIT $1::int"
                 "          FOR UPDATE OF f SKIP LOCKED))"
                 " RETURNING i.message_id, NULL::bigint, i.stream_id, i.partition_number, i.handler_name, i.message_type,"
                 "           i.envelope, i.metadata, i.scope, i.attempts",
                 "DELETE FROM bench.ib_cycle_inbox i WHERE i.consumer = '' AND i.message_id = ANY ($1::uuid[])",
                 false});
    return m;
}

// One cycle: claim up to `rows`, then complete what was claimed. Returns "" or the problem;
// `claimed` gets the ids handed out. Every handed-out message must be completed.
std::string cycle_call(PGconn* c, const CycleMethod& m, const std::string& instance, int rows, bool full,
                       std::vector<std::string>& claimed, int& got) {
    got = 0;
    if (m.one_transaction) {
        std::string e = exec_ok(c, "BEGIN");
        if (!e.empty()) return e;
    }
    auto fail = [&](const std::string& e) {
        if (m.one_transaction) PQclear(PQexec(c, "ROLLBACK"));
        return e;
    };
    const std::string rows_text = std::to_string(rows);
    std::string ids = "{", tokens = "{";
    {
        const char* native_values[2] = {instance.c_str(), rows_text.c_str()};
        const char* sql_values[1] = {rows_text.c_str()};
        PgResult r(PQexecPrepared(c, (m.name + "_claim").c_str(), m.native ? 2 : 1, m.native ? native_values : sql_values,
                                  nullptr, nullptr, 0));
        if (PQresultStatus(r.r) != PGRES_TUPLES_OK) return fail("ERROR: claim: " + one_line(PQresultErrorMessage(r.r)));
        got = PQntuples(r.r);
        for (int i = 0; i < got; ++i) {
            if (i) {
                ids.push_back(',');
                tokens.push_back(',');
            }
            ids += PQgetvalue(r.r, i, 0);
            tokens += m.native ? PQgetvalue(r.r, i, 1) : "0";
            claimed.emplace_back(PQgetvalue(r.r, i, 0));
            if (full && (PQgetisnull(r.r, i, 6) || PQgetlength(r.r, i, 6) < 100))
                return fail("claimed message " + std::string(PQgetvalue(r.r, i, 0)) + " has no envelope");
        }
    }
    ids.push_back('}');
    tokens.push_back('}');
    if (got > 0) {
        const char* values[2] = {ids.c_str(), tokens.c_str()};
        PgResult r(PQexecPrepared(c, (m.name + "_complete").c_str(), m.native ? 2 : 1, values, nullptr, nullptr, 0));
        auto st = PQresultStatus(r.r);
        if (st != PGRES_TUPLES_OK && st != PGRES_COMMAND_OK)
            return fail("ERROR: complete: " + one_line(PQresultErrorMessage(r.r)));
        if (m.native) {
            if (PQntuples(r.r) != got) return fail("complete returned " + std::to_string(PQntuples(r.r)) + " rows for " + std::to_string(got));
            for (int i = 0; i < (full ? got : 1); ++i)
                if (std::strcmp(PQgetvalue(r.r, i, 1), "completed") != 0)
                    return fail("complete said '" + std::string(PQgetvalue(r.r, i, 1)) + "' for " + PQgetvalue(r.r, i, 0));
        } else if (std::atol(PQcmdTuples(r.r)) != got) {
            return fail("DELETE removed " + std::string(PQcmdTuples(r.r)) + " messages of " + std::to_string(got));
        }
    }
    if (m.one_transaction) {
        std::string e = exec_ok(c, "COMMIT");
        if (!e.empty()) return e;
    }
    return "";
}

CellResult run_cycle_cell(const Options& o, const CycleMethod& m, PGconn* admin, Workers& ws) {
    CellResult res;
    res.method = m.name;
    res.label = m.label;
    res.mode = "cycle";
    res.batch = o.claim_rows;
    res.conns = o.conns;
    for (auto& w : ws) w->reset();
    prepare_cycle(admin, m.tables, o.cycle_rows);
    // The reference must find due messages through an index of the table it runs on (a copy
    // of whizbang's): a sequential scan would make it a strawman.
    std::string plan_note;
    if (!m.native) {
        PgResult r(PQexec(ws[0]->conn, ("EXPLAIN (COSTS OFF) EXECUTE " + m.name + "_claim(" + std::to_string(o.claim_rows) + ")").c_str()));
        std::string plan;
        for (int i = 0; PQresultStatus(r.r) == PGRES_TUPLES_OK && i < PQntuples(r.r); ++i) plan += PQgetvalue(r.r, i, 0);
        if (plan.empty() || plan.find("Seq Scan on ib_cycle_inbox") != std::string::npos || plan.find("Index") == std::string::npos)
            plan_note = "reference claim does not use an index of the work table (plan: " + one_line(plan.c_str()) + ")";
    }

    std::vector<std::string> instances;
    {
        IdGenerator g(false, 0xfeedULL);
        for (std::size_t i = 0; i < ws.size(); ++i) instances.push_back(uuid_text(g.next()));
    }
    // Warm-up: 5 cycles per client, every row checked.
    for_each_worker(ws, [&](Worker& w, std::size_t i) {
        for (int k = 0; k < 5 && w.error.empty(); ++k) {
            int got = 0;
            w.note(cycle_call(w.conn, m, instances[i], o.claim_rows, true, w.claimed, got));
            if (got != o.claim_rows) w.note("warm-up claim got " + std::to_string(got) + " rows");
            w.sent_msgs += got;
        }
    });
    for (auto& w : ws)
        if (!w->error.empty() || w->mismatches) {
            res.check = "warm-up " + (w->error.empty() ? w->first_problem : w->error);
            return res;
        }

    for (auto& w : ws) w->lat_ms.reserve(1 << 16);
    Window win = timed_window(admin, conns_of(ws), o.seconds, [&](std::size_t i, Clock::time_point deadline) {
        Worker* w = ws[i].get();
        for (;;) {
            auto t0 = Clock::now();
            if (t0 >= deadline) break;
            int got = 0;
            std::string problem = cycle_call(w->conn, m, instances[i], o.claim_rows, false, w->claimed, got);
            auto t1 = Clock::now();
            w->note(problem);
            if (problem.rfind("ERROR:", 0) == 0) break;
            w->sent_msgs += got;
            if (got == 0) { w->exhausted = true; break; }
            // A short claim while messages are pending (another client held some candidates)
            // is counted, not taken for an empty queue.
            if (got < o.claim_rows) ++w->short_claims;
            w->lat_ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
            w->timed_msgs += got;
            ++w->timed_calls;
        }
    });
    fill_result(res, ws, win);

    std::vector<std::string> notes;
    std::string p = problems_of(ws);
    if (!p.empty()) notes.push_back(p);
    if (!plan_note.empty()) notes.push_back(plan_note);
    for (auto& w : ws)
        if (w->exhausted) {
            notes.push_back("pending messages ran out after " + fmt("%.2f", res.secs) + " s");
            break;
        }
    long shorts = 0;
    for (auto& w : ws) shorts += w->short_claims;
    if (shorts)
        notes.push_back(std::to_string(shorts) + " of " + std::to_string(res.calls) + " claims returned fewer than " +
                        std::to_string(o.claim_rows) + " rows while messages were pending");
    // No message may be handed out twice, and what is left must be exactly the rest.
    std::vector<std::string> all;
    long handed = 0;
    for (auto& w : ws) {
        handed += w->sent_msgs;
        all.insert(all.end(), w->claimed.begin(), w->claimed.end());
    }
    long twice = count_repeats(all);
    if (twice) notes.push_back(std::to_string(twice) + " messages handed out twice");
    // Rows left: message + work rows (one row per message on one table).
    const long per_message = m.tables.work.empty() ? 1 : 2;
    std::string left = exec_admin(admin, "SELECT (SELECT count(*) FROM " + work_of(m.tables) + ") * " +
                                             std::to_string(per_message - 1) + " + (SELECT count(*) FROM " +
                                             m.tables.inbox + ")");
    if (std::atol(left.c_str()) != per_message * (o.cycle_rows - handed))
        notes.push_back("tables hold " + left + " message + work rows, expected " +
                        std::to_string(per_message * (o.cycle_rows - handed)));
    if (!notes.empty()) {
        res.check.clear();
        for (auto& n : notes) res.check += (res.check.empty() ? "" : "; ") + n;
    }
    res.valid = res.ids > 0 && p.empty() && twice == 0 && plan_note.empty() &&
                std::atol(left.c_str()) == per_message * (o.cycle_rows - handed);
    return res;
}

// ---------------------------------------------------------------------------------------------
// Claim latency

struct Latency {
    long pending = 0;
    int calls = 0;
    double p50 = 0, p90 = 0, p99 = 0, min = 0, max = 0, mean = 0;
    double cpu_p50 = -1;       // server CPU of one claim, ms (median)
    double other_cpu_pct = -1; // other work during the series
    double load_s = 0;         // untimed preparation
    std::string check = "ok";
    bool valid = false;
};

Latency run_latency(const Options& o, long pending, PGconn* admin, Workers& ws) {
    Latency res;
    res.pending = pending;
    for (auto& w : ws) w->reset();
    auto l0 = Clock::now();
    prepare_pending(admin, ws, native_tables(), pending);
    res.load_s = seconds_since(l0, Clock::now());

    Worker& w = *ws[0];
    const std::string instance = "00000000-0000-4000-8000-00000000ca11";
    const int warm = 10;
    const int total = warm + o.latency_calls;
    // Refill batches (100 new messages each), built before the series starts.
    StoreMethod store = store_method_table()[0];
    for (int k = 0; k < total; ++k) {
        Batch b;
        build_batch(w.factory, "", o.claim_rows, true, false, b, w.ids);
        w.batches.push_back(std::move(b));
    }
    const int pid = PQbackendPID(w.conn);
    std::vector<double> ms, cpu_ms;
    double busy0 = 0, self0 = 0, back0 = 0, t_series = 0;
    Clock::time_point s0;
    std::vector<std::string> claimed;
    std::string problem;
    for (int k = 0; k < total && problem.empty(); ++k) {
        if (k == warm) {
            busy0 = machine_busy_seconds();
            self0 = self_cpu_seconds();
            back0 = process_cpu_seconds(pid);
            s0 = Clock::now();
        }
        // The timed call: claim_work alone.
        const std::string rows_text = std::to_string(o.claim_rows);
        const char* values[2] = {instance.c_str(), rows_text.c_str()};
        double c0 = process_cpu_seconds(pid);
        auto t0 = Clock::now();
        PgResult r(PQexecPrepared(w.conn, "native2_claim", 2, values, nullptr, nullptr, 0));
        auto t1 = Clock::now();
        double c1 = process_cpu_seconds(pid);
        if (PQresultStatus(r.r) != PGRES_TUPLES_OK) {
            problem = "ERROR: claim: " + one_line(PQresultErrorMessage(r.r));
            break;
        }
        int got = PQntuples(r.r);
        if (got != o.claim_rows) {
            problem = "claim got " + std::to_string(got) + " rows";
            break;
        }
        if (k >= warm) {
            ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
            if (c0 >= 0 && c1 >= 0) cpu_ms.push_back((c1 - c0) * 1e3);
        }
        // Untimed: complete them, store 100 new ones (pending stays constant).
        std::string ids = "{", tokens = "{";
        for (int i = 0; i < got; ++i) {
            ids += std::string(i ? "," : "") + PQgetvalue(r.r, i, 0);
            tokens += std::string(i ? "," : "") + PQgetvalue(r.r, i, 1);
        }
        ids += "}";
        tokens += "}";
        const char* cv[2] = {ids.c_str(), tokens.c_str()};
        PgResult cr(PQexecPrepared(w.conn, "native2_complete", 2, cv, nullptr, nullptr, 0));
        if (PQresultStatus(cr.r) != PGRES_TUPLES_OK || PQntuples(cr.r) != got) {
            problem = "complete: " + one_line(PQresultErrorMessage(cr.r));
            break;
        }
        problem = store_call(w.conn, store, w.batches[k], w.ids.data() + static_cast<std::size_t>(k) * o.claim_rows,
                             o.claim_rows, false);
    }
    t_series = seconds_since(s0, Clock::now());
    double busy1 = machine_busy_seconds(), self1 = self_cpu_seconds(), back1 = process_cpu_seconds(pid);
    if (busy0 >= 0 && busy1 >= 0 && back0 >= 0 && back1 >= 0 && t_series > 0) {
        double capacity = t_series * std::max(1L, sysconf(_SC_NPROCESSORS_ONLN));
        res.other_cpu_pct = std::max(0.0, 100.0 * ((busy1 - busy0) - (back1 - back0) - (self1 - self0)) / capacity);
    }
    res.calls = static_cast<int>(ms.size());
    if (!ms.empty()) {
        double sum = 0;
        for (double v : ms) sum += v;
        res.mean = sum / ms.size();
        res.min = *std::min_element(ms.begin(), ms.end());
        res.max = *std::max_element(ms.begin(), ms.end());
        std::vector<double> v = ms;
        res.p50 = percentile(v, 0.50);
        res.p90 = percentile(v, 0.90);
        res.p99 = percentile(v, 0.99);
    }
    if (!cpu_ms.empty()) res.cpu_p50 = percentile(cpu_ms, 0.50);
    // Every call's messages were completed and as many new ones stored (the dedup table keeps
    // the ids of completed messages).
    std::string check = problem.empty() ? table_check(admin, native_tables(), pending, pending + static_cast<long>(total) * o.claim_rows)
                                        : problem;
    if (!check.empty()) res.check = check;
    res.valid = check.empty() && res.calls == o.latency_calls;
    return res;
}

// ---------------------------------------------------------------------------------------------
// Reporting

void write_markdown(const Options& o, const std::vector<CellResult>& rs, const std::vector<Latency>& lat, std::ostream& md) {
    const bool store = has(o.parts, "store"), cycle = has(o.parts, "cycle"), latency = has(o.parts, "latency");
    std::vector<std::pair<std::string, std::string>> targets;  // text, verdict row
    if (store) {
        md << "### Store: store_inbox_messages, every message new\n\n"
           << columns_note(o, "msg", "call") << " check: every warm-up row verified (id, input order, new), the "
              "first batch's rows compared column by column with what was sent, every timed call's row count and end "
              "rows verified, and after the cell every table's row count, each message's work row and every "
              "partition number (against whizbang.partition_of).\n\n"
           << "| method | batch | msgs/s | range msgs/s | calls/s | p50 ms | p99 ms | CPU us/msg | client % | other % | WAL B/msg | msgs | s | check |\n"
           << "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|\n";
        for (int b : o.batches)
            for (auto& r : rs)
                if (r.mode == "store" && r.batch == b) cell_row(md, r, true);
        md << "\n#### Store ratios (msgs/s of native divided by the other method's; in brackets: the other method's "
              "server CPU per message divided by native's)\n\n"
           << "| batch | native msgs/s | (a) PL/pgSQL | (b) plain | (c) COPY | native/(a) | native/(b) | native/(c) |\n"
           << "|---:|---:|---:|---:|---:|---:|---:|---:|\n";
        for (int b : o.batches) {
            auto n = find_cell(rs, "store", "native", b);
            auto a = find_cell(rs, "store", "plpgsql", b);
            auto p = find_cell(rs, "store", "plain", b);
            auto c = find_cell(rs, "store", "copy", b);
            auto v = [](const CellResult* r) { return r ? fmt_int(r->ids_per_s) : std::string("n/a"); };
            md << "| " << b << " | " << v(n) << " | " << v(a) << " | " << v(p) << " | " << v(c) << " | "
               << ratio_text(n, a) << " (" << cpu_rel(n, a) << ") | " << ratio_text(n, p) << " (" << cpu_rel(n, p)
               << ") | " << ratio_text(n, c) << " (" << cpu_rel(n, c) << ") |\n";
        }
        auto n = find_cell(rs, "store", "native", 100);
        auto a = find_cell(rs, "store", "plpgsql", 100);
        auto c = find_cell(rs, "store", "copy", 100);
        auto verdict = [](const CellResult* x, const CellResult* y, double goal) {
            if (!x || !y) return std::string("n/a | n/a | n/a | n/a");
            double q = x->ids_per_s / y->ids_per_s;
            double c = x->cpu_us_per_id > 0 && y->cpu_us_per_id >= 0 ? y->cpu_us_per_id / x->cpu_us_per_id : -1;
            return fmt("%.2f", q) + "x | " + (q >= goal ? "met" : "missed") + " | " +
                   (c >= 0 ? fmt("%.2f", c) + "x | " + (c >= goal ? "met" : "missed") : std::string("n/a | n/a"));
        };
        targets.push_back({"store >= 1.5x (a) PL/pgSQL reference, batch 100", verdict(n, a, 1.5)});
        targets.push_back({"store >= 0.7x (c) COPY, batch 100", verdict(n, c, 0.7)});
    }
    if (cycle) {
        md << "\n### Claim cycle: claim " << o.claim_rows << " + complete " << o.claim_rows << ", " << o.conns
           << " clients, " << o.cycle_rows << " pending messages at the start\n\n"
           << columns_note(o, "msg", "cycle (claim + complete, with BEGIN/COMMIT where one transaction)")
           << " Before each cell the same " << o.cycle_rows << " messages (staged once by COPY: message and work "
              "rows, due now, no StreamId) are copied into the method's tables, then VACUUM (ANALYZE) and CHECKPOINT. "
              "Each client claims with its own instance id; native passes the lease tokens to complete_work."
           << " check: warm-up cycles verified row by row (envelope present, every completion 'completed'); every "
              "timed cycle's counts; after the cell no message handed out twice and the tables hold exactly the "
              "messages not handed out.\n\n"
           << "| method | msgs/s | range msgs/s | cycles/s | p50 ms | p99 ms | CPU us/msg | client % | other % | WAL B/msg | msgs | s | check |\n"
           << "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|\n";
        for (auto& r : rs)
            if (r.mode == "cycle") cell_row(md, r, false);
        auto n = find_cell(rs, "cycle", "native", o.claim_rows);
        auto n2 = find_cell(rs, "cycle", "native2", o.claim_rows);
        auto s = find_cell(rs, "cycle", "sql", o.claim_rows);
        auto l = find_cell(rs, "cycle", "sql_lease", o.claim_rows);
        md << "\n| ratio | msgs/s | server CPU per message (reference / native) |\n|---|---:|---:|\n"
           << "| native (one transaction) / (r) | " << ratio_text(n, s) << " | " << cpu_rel(n, s) << " |\n"
           << "| native (a transaction each) / (r) | " << ratio_text(n2, s) << " | " << cpu_rel(n2, s) << " |\n"
           << "| native (a transaction each) / (l) | " << ratio_text(n2, l) << " | " << cpu_rel(n2, l) << " |\n";
        // The lease store's targets (issue 11), each a throughput ratio.
        auto target = [&](const char* what, const CellResult* a, const CellResult* b, double want) {
            std::string v = "n/a | n/a";
            if (a && b && b->ids_per_s > 0) {
                const double q = a->ids_per_s / b->ids_per_s;
                v = fmt("%.2f", q) + "x | " + (q >= want ? "met" : "missed");
            }
            targets.push_back({what, v + " | n/a | n/a"});
        };
        target("lease model (a transaction each) >= 2.0x (l) SQL lease model", n2, l, 2.0);
        target("lease model (a transaction each) >= 0.9x (r) lock-in-transaction queue", n2, s, 0.9);
        target("claim + complete in one transaction >= 1.2x (r) lock-in-transaction queue", n, s, 1.2);
        std::string v = "n/a | n/a | n/a | n/a";
        if (n && s) {
            double q = n->ids_per_s / s->ids_per_s;
            double c = n->cpu_us_per_id > 0 && s->cpu_us_per_id >= 0 ? s->cpu_us_per_id / n->cpu_us_per_id : -1;
            v = fmt("%.2f", q) + "x | " + (q >= 1.3 ? "met" : "missed") + " | " +
                (c >= 0 ? fmt("%.2f", c) + "x | " + (c >= 1.3 ? "met" : "missed") : std::string("n/a | n/a"));
        }
        targets.push_back({"claim cycle >= 1.3x (r) SQL reference (both one transaction per cycle)", v});
    }
    if (latency) {
        md << "\n### Claim latency: one claim_work(..., " << o.claim_rows << ") call, by pending messages\n\n"
           << "One client, claim_work in its own transaction (autocommit); after every call the " << o.claim_rows
           << " claimed messages are completed and " << o.claim_rows << " new ones stored (untimed), so the number "
              "pending stays constant. 10 untimed calls, then " << o.latency_calls << " timed ones. Pending messages "
              "loaded by COPY into whizbang's tables (message, work and dedup rows as store_inbox_messages writes "
              "them), then VACUUM (ANALYZE) and CHECKPOINT. server CPU = CPU time of the backend during the call "
              "(from /proc). other % = CPU of other work during the series, share of all cores.\n\n"
           << "| pending | calls | p50 ms | p90 ms | p99 ms | min ms | max ms | mean ms | server CPU p50 ms | other % | load s | check |\n"
           << "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|\n";
        for (auto& l : lat)
            md << "| " << fmt_int(static_cast<double>(l.pending)) << " | " << l.calls << " | " << fmt("%.3f", l.p50)
               << " | " << fmt("%.3f", l.p90) << " | " << fmt("%.3f", l.p99) << " | " << fmt("%.3f", l.min) << " | "
               << fmt("%.3f", l.max) << " | " << fmt("%.3f", l.mean) << " | "
               << (l.cpu_p50 >= 0 ? fmt("%.3f", l.cpu_p50) : std::string("n/a")) << " | "
               << (l.other_cpu_pct >= 0 ? fmt("%.0f", l.other_cpu_pct) : std::string("n/a")) << " | "
               << fmt("%.0f", l.load_s) << " | " << l.check << " |\n";
        const Latency *small = nullptr, *big = nullptr;
        for (auto& l : lat) {
            if (!l.valid) continue;
            if (!small || l.pending < small->pending) small = &l;
            if (!big || l.pending > big->pending) big = &l;
        }
        std::string v = "n/a | n/a | n/a | n/a";
        if (small && big && small != big && small->p50 > 0) {
            double q = big->p50 / small->p50;
            md << "\nMedian latency at " << fmt_int(static_cast<double>(big->pending)) << " pending / at "
               << fmt_int(static_cast<double>(small->pending)) << ": " << fmt("%.2f", q) << "x (server CPU: "
               << (small->cpu_p50 > 0 && big->cpu_p50 >= 0 ? fmt("%.2f", big->cpu_p50 / small->cpu_p50) + "x" : std::string("n/a"))
               << ").\n";
            double c = small->cpu_p50 > 0 && big->cpu_p50 >= 0 ? big->cpu_p50 / small->cpu_p50 : -1;
            v = fmt("%.2f", q) + "x | " + (q <= 1.5 ? "met" : "missed") + " | " +
                (c >= 0 ? fmt("%.2f", c) + "x | " + (c <= 1.5 ? "met" : "missed") : std::string("n/a | n/a"));
        }
        std::string what = "claim latency (p50) with " +
                           (big ? fmt_int(static_cast<double>(big->pending)) : std::string("1,000,000")) +
                           " pending <= 1.5x with " +
                           (small ? fmt_int(static_cast<double>(small->pending)) : std::string("1,000"));
        targets.push_back({what, v});
    }
    md << "\n### Targets\n\nJudged twice: on msgs/s (latency: median wall time), as the targets are worded, and on "
          "server CPU per message (per claim for the latency; the ratio is then the reference's CPU per message "
          "divided by native's, so above 1 favours native), which other work on this shared machine disturbs much "
          "less. Where the two verdicts differ, the rate was moved by other load and the CPU verdict is the one to "
          "trust for a CPU-bound cell.\n\n"
          "| target | msgs/s ratio | verdict | server CPU ratio | verdict |\n|---|---:|---|---:|---|\n";
    for (auto& t : targets) md << "| " << t.first << " | " << t.second << " |\n";
}

}  // namespace

int main(int argc, char** argv) {
    Options o = parse_options(argc, argv);
    std::vector<StoreMethod> store_methods;
    for (auto& name : o.store_methods) {
        bool found = false;
        for (auto& m : store_method_table())
            if (m.name == name) { store_methods.push_back(m); found = true; }
        if (!found) usage(("unknown store method " + name).c_str());
    }
    std::vector<CycleMethod> cycle_methods;
    for (auto& name : o.cycle_methods) {
        bool found = false;
        for (auto& m : cycle_method_table())
            if (m.name == name) { cycle_methods.push_back(m); found = true; }
        if (!found) usage(("unknown cycle method " + name).c_str());
    }
    for (auto& p : o.parts)
        if (p != "store" && p != "cycle" && p != "latency") usage(("unknown part " + p).c_str());

    PGconn* admin = connect_or_die(o.dsn);
    exec_admin(admin, "SET client_min_messages = warning");
    {
        PgResult r(PQexec(admin, "SELECT EXISTS (SELECT FROM pg_class WHERE oid = to_regclass('whizbang.wh_inbox_work')"
                                 " AND relkind = 'r')"));
        if (PQresultStatus(r.r) != PGRES_TUPLES_OK) {
            std::fprintf(stderr, "error: %s", PQerrorMessage(admin));
            return 1;
        }
        g_work_table = std::strcmp(PQgetvalue(r.r, 0, 0), "t") == 0;
    }
    // The methods again, for the shape found (their tables and statements depend on it).
    for (auto& m : store_methods)
        for (auto& t : store_method_table())
            if (t.name == m.name) m = t;
    for (auto& m : cycle_methods)
        for (auto& t : cycle_method_table())
            if (t.name == m.name) m = t;
    Workers ws;
    for (int i = 0; i < o.conns; ++i)
        ws.push_back(std::make_unique<Worker>(connect_or_die(o.dsn), 0x9e3779b97f4a7c15ULL * (i + 1), o.envelope_bytes));

    // Every statement is prepared on every connection (the latency part uses the native ones).
    for (auto& w : ws) {
        for (auto& m : store_method_table())
            if (m.kind == StoreKind::Function) prepare_or_die(w->conn, m.name, m.sql);
        for (auto& m : cycle_method_table()) {
            prepare_or_die(w->conn, m.name + "_claim", m.claim_sql);
            prepare_or_die(w->conn, m.name + "_complete", m.complete_sql);
        }
    }

    const bool do_store = has(o.parts, "store"), do_cycle = has(o.parts, "cycle"), do_latency = has(o.parts, "latency");
    long planned = (do_store ? static_cast<long>(store_methods.size() * o.batches.size()) : 0) +
                   (do_cycle ? static_cast<long>(cycle_methods.size()) : 0);
    long budget = static_cast<long>(std::ceil(o.retry_budget * planned * o.rounds));

    print_cell_header();
    std::vector<CellResult> measured;
    if (do_store)
        for (int round = 1; round <= o.rounds; ++round)
            for (int b : o.batches)
                for (auto& m : store_methods) {
                    CellResult r = measure_cell(o.retries, o.max_other, budget, "store " + m.name + " batch " + std::to_string(b), [&] {
                        try {
                            return run_store_cell(o, m, b, admin, ws);
                        } catch (const std::exception& e) {
                            return failed_cell(m.name, m.label, "store", b, e);
                        }
                    });
                    print_cell(r, round);
                    measured.push_back(r);
                }
    if (do_cycle) {
        try {
            create_stage(admin, ws, o.cycle_rows);
        } catch (const std::exception& e) {
            std::fprintf(stderr, "cannot stage the claim-cycle backlog: %s\n", e.what());
            return 1;
        }
    }
    if (do_cycle)
        for (int round = 1; round <= o.rounds; ++round)
            for (auto& m : cycle_methods) {
                CellResult r = measure_cell(o.retries, o.max_other, budget, "cycle " + m.name, [&] {
                    try {
                        return run_cycle_cell(o, m, admin, ws);
                    } catch (const std::exception& e) {
                        return failed_cell(m.name, m.label, "cycle", o.claim_rows, e);
                    }
                });
                print_cell(r, round);
                measured.push_back(r);
            }
    if (do_cycle) drop_stage(admin);
    // Latency last: its large load would otherwise sit in the OS cache and shared buffers of the
    // cells after it. Tables are emptied when it is done.
    std::vector<Latency> lat;
    if (do_latency) {
        for (long n : o.latency_sizes) {
            Latency l;
            try {
                l = run_latency(o, n, admin, ws);
            } catch (const std::exception& e) {
                l.pending = n;
                l.check = e.what();
            }
            std::printf("claim latency, %ld pending: p50 %.3f ms, p90 %.3f, p99 %.3f, min %.3f, max %.3f, server CPU p50 %.3f ms, "
                        "other %.0f%%, load %.0f s  %s\n",
                        n, l.p50, l.p90, l.p99, l.min, l.max, l.cpu_p50, l.other_cpu_pct, l.load_s, l.check.c_str());
            std::fflush(stdout);
            lat.push_back(l);
        }
        exec_admin(admin, truncate_sql(native_tables()));
    }
    std::vector<CellResult> results = aggregate(measured, o.max_other);

    if (!o.tsv_path.empty()) {
        std::ofstream t(o.tsv_path);
        write_tsv_header(t);
        for (auto& r : results) write_tsv_row(t, r);
        for (auto& l : lat)
            t << "latency\tnative\t" << l.pending << "\t1\t1\t\t\t" << l.calls * o.claim_rows << '\t' << l.calls
              << "\t\t\t\t" << fmt("%.3f", l.p50) << '\t' << fmt("%.3f", l.p99) << '\t' << fmt("%.1f", l.cpu_p50 * 1000)
              << "\t\t" << fmt("%.1f", l.other_cpu_pct) << "\t\t" << fmt("%.3f", l.p90) << '\t' << l.check << '\n';
    }
    if (!o.md_path.empty()) {
        std::ofstream md(o.md_path);
        write_markdown(o, results, lat, md);
    } else {
        std::ostringstream md;
        write_markdown(o, results, lat, md);
        std::printf("\n%s", md.str().c_str());
    }

    for (auto& w : ws) PQfinish(w->conn);
    PQfinish(admin);
    bool any_bad = false;
    for (auto& r : results) any_bad = any_bad || !r.valid;
    for (auto& l : lat) any_bad = any_bad || !l.valid;
    return any_bad ? 3 : 0;
}
