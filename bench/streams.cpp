// Load driver for the streams benchmark (issue 20; bench/streams starts it, see bench/README.md).
//
// The claim cycle over messages in S interleaved streams, against the same messages without a
// stream and against a plain-SQL per-stream FIFO queue. One run, one cluster (started with
// shared_preload_libraries = 'whizbang': the shared-memory lease store), --conns clients (2):
//
//   streamed    before the cell: --rows pending inbox messages, message i in stream i % S (a
//               fixed UUID per stream), stored in order by whizbang.store_inbox_messages in
//               batches (the real store function, so the streams' numbering is whizbang's own),
//               then VACUUM (ANALYZE) and CHECKPOINT. Each client loops
//               { claim_work(instance, 'inbox', 100) ; complete_work('inbox', ids, tokens, '') },
//               a transaction each (autocommit).
//   unstreamed  the same messages without StreamId, the same cycle; measured once per round and
//               set beside every stream count.
//   plain       bench.streams_fifo (id uuid PK, stream_id uuid, seq bigint, envelope jsonb; index
//               on (stream_id, seq)) holding the same messages and streams; one transaction per
//               cycle: BEGIN; the heads (rows whose seq is the minimum of their stream) FOR UPDATE
//               SKIP LOCKED LIMIT 100; DELETE of those rows; COMMIT. The head query is a recursive
//               loose index scan over (stream_id, seq) or DISTINCT ON (stream_id); --plain-head=auto
//               times both on the loaded table (untimed, rolled back) and keeps the faster.
//
// Every envelope is built on the client before any clock starts (common.h MessageFactory, the
// p_messages elements of the inbox benchmark); the plain table is filled server-side from an
// unlogged copy of the same envelopes staged once by COPY. Timed windows, CPU accounting,
// repetition of disturbed windows and medians over rounds are common.h's.
//
// Checks: every store call (row per message, input order, stream id, new) and the numbering it
// left (stream_seq increases with the message's position in its stream); every claimed row
// known, of its stream (and, plain, its seq); every completion 'completed' (none 'lease_lost' or
// 'not_found'); after the cell no message completed twice, per stream the completions are the
// stream's first messages in stored order (ordered by a ticket taken when each claim returned,
// which for one stream follows the order of the holders), completed = rows removed, and no live
// lease left. The plain baseline's order is measured the same way and reported, not enforced.
//
// Output: per-round lines on stdout, a TSV (--tsv), a markdown fragment (--md) and the summary
// table on stdout. Connection parameters come from the PG* environment (or --dsn).

#include <unordered_map>

#include "common.h"

namespace {

using namespace bench;

// ---------------------------------------------------------------------------------------------
// Options

struct Options : RunOptions {
    std::vector<int> counts{50, 500, 2000};
    long rows = 200000;        // pending messages before each cell
    int claim_rows = 100;      // p_max_rows / LIMIT of each claim
    int store_batch = 1000;    // messages per store_inbox_messages call while loading
    std::string plain_head = "auto";  // auto | recursive | distinct
    int probe_calls = 15;      // timed executions of each head query in the auto probe
    int warm_cycles = 5;       // untimed cycles per client before each window
};

[[noreturn]] void usage(const char* msg) {
    std::fprintf(stderr,
                 "error: %s\n"
                 "usage: streams_driver [--counts=50,500,2000] [--rows=200000] [--claim-rows=100] [--store-batch=1000] "
                 "[--plain-head=auto|recursive|distinct] [--probe-calls=15] [--warm-cycles=5] [--conns=2] [--rounds=3] "
                 "[--retries=1] [--max-other=20] [--retry-budget=0.5] [--seconds=5] [--envelope-bytes=1000] "
                 "[--dsn=CONNINFO] [--tsv=FILE] [--md=FILE]\n",
                 msg);
    std::exit(2);
}

Options parse_options(int argc, char** argv) {
    Options o;
    o.seconds = 5;
    parse_key_values(
        argc, argv,
        [&](const std::string& key, const std::string& val) {
            if (parse_run_option(key, val, o)) return true;
            if (key == "--counts") {
                o.counts.clear();
                for (auto& c : split(val, ',')) o.counts.push_back(std::stoi(c));
            } else if (key == "--rows") o.rows = std::stol(val);
            else if (key == "--claim-rows") o.claim_rows = std::stoi(val);
            else if (key == "--store-batch") o.store_batch = std::stoi(val);
            else if (key == "--plain-head") o.plain_head = val;
            else if (key == "--probe-calls") o.probe_calls = std::stoi(val);
            else if (key == "--warm-cycles") o.warm_cycles = std::stoi(val);
            else return false;
            return true;
        },
        usage);
    if (o.conns < 1 || o.rounds < 1 || o.seconds <= 0 || o.rows < 1 || o.claim_rows < 1 || o.store_batch < 1 ||
        o.probe_calls < 1 || o.warm_cycles < 0 || o.envelope_bytes < 200 || o.rows > 100000000)
        usage("counts and seconds must be positive, --envelope-bytes at least 200");
    for (int c : o.counts)
        if (c < 1 || c > o.rows) usage("stream counts must be between 1 and --rows");
    if (o.plain_head != "auto" && o.plain_head != "recursive" && o.plain_head != "distinct")
        usage("--plain-head is auto, recursive or distinct");
    return o;
}

// ---------------------------------------------------------------------------------------------
// The messages (client side, built once before any clock starts)

struct Corpus {
    std::vector<std::string> id_text;  // message i's id
    std::vector<std::string> element;  // its p_messages element without the closing '}'
    std::vector<std::uint32_t> env_off, env_len;  // where its envelope sits in `element`
    std::vector<std::string> stream_text;  // stream k's id (k < the largest count)
    std::unordered_map<std::string, int> index;  // id text -> i
    std::size_t element_bytes = 0;

    std::string envelope(long i) const { return element[i].substr(env_off[i], env_len[i]); }
};

Corpus build_corpus(const Options& o) {
    auto t0 = Clock::now();
    Corpus c;
    MessageFactory f(0x5157ea3dULL, o.envelope_bytes);
    const std::string ts = now_text();
    c.id_text.reserve(o.rows);
    c.element.reserve(o.rows);
    c.env_off.reserve(o.rows);
    c.env_len.reserve(o.rows);
    c.index.reserve(static_cast<std::size_t>(o.rows) * 2);
    for (long i = 0; i < o.rows; ++i) {
        Uuid id = f.next_id();
        std::string env = f.envelope(id, ts);
        std::string el = inbox_element(id, env, ts);
        const std::string key = "\"Envelope\":";
        const std::size_t at = el.find(key);
        if (at == std::string::npos || el.back() != '}') throw std::runtime_error("unexpected inbox element layout");
        c.env_off.push_back(static_cast<std::uint32_t>(at + key.size()));
        c.env_len.push_back(static_cast<std::uint32_t>(env.size()));
        el.pop_back();
        c.element_bytes += el.size() + 1;
        c.element.push_back(std::move(el));
        c.id_text.push_back(uuid_text(id));
        c.index.emplace(c.id_text.back(), static_cast<int>(i));
    }
    int max_count = 1;
    for (int s : o.counts) max_count = std::max(max_count, s);
    IdGenerator g(false, 0x57a3a115ULL);
    for (int k = 0; k < max_count; ++k) c.stream_text.push_back(uuid_text(g.next()));
    std::fprintf(stderr, "  built %ld messages (%.0f bytes of p_messages JSON each on average) in %.1f s\n", o.rows,
                 static_cast<double>(c.element_bytes) / o.rows, seconds_since(t0, Clock::now()));
    return c;
}

// ---------------------------------------------------------------------------------------------
// Workers

struct Done {
    long ticket;  // taken when the claim (or head query) returned
    int pos;      // position in that claim's result
    int msg;      // message number
};

struct Worker : LoadWorker {
    std::string instance;
    std::vector<Done> done;
    long empty_claims = 0, short_claims = 0, lease_lost = 0, not_found = 0;

    explicit Worker(PGconn* c) : LoadWorker(c) {}

    void reset() {
        reset_counts();
        done.clear();
        empty_claims = short_claims = lease_lost = not_found = 0;
    }
};

using Workers = std::vector<std::unique_ptr<Worker>>;

// ---------------------------------------------------------------------------------------------
// Statements

constexpr const char* kWhizbangTruncate =
    "TRUNCATE whizbang.wh_inbox, whizbang.wh_message_deduplication, whizbang.wh_inbox_streams";

// $1 instance, $2 p_max_rows; the columns a handler needs.
constexpr const char* kClaimSql =
    "SELECT message_id, lease_token, stream_id, envelope, handler_name, message_type, metadata, attempts"
    " FROM whizbang.claim_work($1::uuid, 'inbox', $2::int)";
constexpr const char* kCompleteSql =
    "SELECT message_id, outcome FROM whizbang.complete_work('inbox', $1::uuid[], $2::bigint[], '')";

constexpr const char* kPlainTable = "bench.streams_fifo";
constexpr const char* kPlainStage = "bench.streams_stage";

// The head queries of the plain FIFO: $1 the LIMIT. FOR UPDATE is not allowed with DISTINCT or
// in a recursive WITH, so both find the (stream_id, seq) of every stream's head in a subquery
// and lock the rows of the outer join; LockRows sits below the LIMIT, so heads another client
// holds are skipped and do not count. Both stop as soon as the LIMIT is filled.
//   recursive  a loose index scan: one probe of (stream_id, seq) per stream, the next stream
//              found by "stream_id > the previous one ORDER BY stream_id, seq LIMIT 1".
//   distinct   DISTINCT ON (stream_id) over the same index: reads every row of each stream it
//              passes.
const std::string kHeadRecursive =
    "WITH RECURSIVE h AS ("
    "  (SELECT f.stream_id, f.seq FROM bench.streams_fifo f ORDER BY f.stream_id, f.seq LIMIT 1)"
    "  UNION ALL"
    "  SELECT n.stream_id, n.seq FROM h, LATERAL ("
    "      SELECT f.stream_id, f.seq FROM bench.streams_fifo f WHERE f.stream_id > h.stream_id"
    "       ORDER BY f.stream_id, f.seq LIMIT 1) n"
    ")"
    "SELECT q.id, q.stream_id, q.seq, q.envelope"
    "  FROM h JOIN bench.streams_fifo q ON q.stream_id = h.stream_id AND q.seq = h.seq"
    " LIMIT $1::int FOR UPDATE OF q SKIP LOCKED";
const std::string kHeadDistinct =
    "SELECT q.id, q.stream_id, q.seq, q.envelope"
    "  FROM (SELECT DISTINCT ON (f.stream_id) f.stream_id, f.seq FROM bench.streams_fifo f"
    "         ORDER BY f.stream_id, f.seq) h"
    "  JOIN bench.streams_fifo q ON q.stream_id = h.stream_id AND q.seq = h.seq"
    " LIMIT $1::int FOR UPDATE OF q SKIP LOCKED";
constexpr const char* kPlainDelete = "DELETE FROM bench.streams_fifo WHERE id = ANY ($1::uuid[])";

void prepare_all(PGconn* c) {
    prepare_or_die(c, "store", kStoreInboxSql);
    prepare_or_die(c, "claim", kClaimSql);
    prepare_or_die(c, "complete", kCompleteSql);
    prepare_or_die(c, "head_recursive", kHeadRecursive);
    prepare_or_die(c, "head_distinct", kHeadDistinct);
    prepare_or_die(c, "fifo_delete", kPlainDelete);
}

// ---------------------------------------------------------------------------------------------
// Loading

// One p_messages array: the messages idx[from, from + n), with StreamId when S > 0.
std::string batch_json(const Corpus& c, const std::vector<int>& idx, std::size_t from, std::size_t n, int S) {
    std::string json;
    json.reserve(n * (c.element_bytes / std::max<std::size_t>(1, c.element.size()) + 64) + 2);
    json.push_back('[');
    for (std::size_t k = 0; k < n; ++k) {
        const int i = idx[from + k];
        if (k) json.push_back(',');
        json += c.element[i];
        if (S > 0) {
            json += ",\"StreamId\":\"";
            json += c.stream_text[i % S];
            json.push_back('"');
        }
        json.push_back('}');
    }
    json.push_back(']');
    return json;
}

// A checked store call: one row per message, in input order, with its stream, all new.
std::string store_checked(PGconn* conn, const Corpus& c, const std::string& json, const std::vector<int>& idx,
                          std::size_t from, std::size_t n, int S) {
    const char* values[2] = {json.c_str(), ""};
    PgResult r(PQexecPrepared(conn, "store", 2, values, nullptr, nullptr, 0));
    if (PQresultStatus(r.r) != PGRES_TUPLES_OK) return "ERROR: store: " + one_line(PQresultErrorMessage(r.r));
    if (PQntuples(r.r) != static_cast<int>(n))
        return "store returned " + std::to_string(PQntuples(r.r)) + " rows for " + std::to_string(n) + " messages";
    for (std::size_t k = 0; k < n; ++k) {
        const int i = idx[from + k], row = static_cast<int>(k);
        if (c.id_text[i] != PQgetvalue(r.r, row, 0))
            return "store row " + std::to_string(k) + " is " + PQgetvalue(r.r, row, 0) + ", input has " + c.id_text[i];
        if (S > 0 ? PQgetisnull(r.r, row, 1) || c.stream_text[i % S] != PQgetvalue(r.r, row, 1) : !PQgetisnull(r.r, row, 1))
            return "store row " + std::to_string(k) + " has stream '" + PQgetvalue(r.r, row, 1) + "'";
        if (std::strcmp(PQgetvalue(r.r, row, 2), "t") != 0) return "store row " + std::to_string(k) + " not newly created";
    }
    return "";
}

// whizbang's tables for a cell: TRUNCATE, every message stored by store_inbox_messages (batches
// in message order; with --conns clients, client j stores the streams k with k % conns == j, so
// every stream is stored by one client in order and the streams interleave in every batch),
// the numbering checked, then VACUUM (ANALYZE) and CHECKPOINT. Returns the seconds it took.
double load_whizbang(const Options& o, const Corpus& c, int S, PGconn* admin, Workers& ws) {
    auto t0 = Clock::now();
    exec_admin(admin, kWhizbangTruncate);
    const std::size_t nc = ws.size();
    for_each_worker(ws, [&](Worker& w, std::size_t j) {
        std::vector<int> idx;
        idx.reserve(o.rows / nc + 1);
        for (long i = 0; i < o.rows; ++i)
            if (static_cast<std::size_t>(S > 0 ? i % S : i) % nc == j) idx.push_back(static_cast<int>(i));
        for (std::size_t from = 0; from < idx.size() && w.error.empty(); from += o.store_batch) {
            const std::size_t n = std::min<std::size_t>(o.store_batch, idx.size() - from);
            const std::string json = batch_json(c, idx, from, n, S);
            std::string e = store_checked(w.conn, c, json, idx, from, n, S);
            if (!e.empty()) w.error = e;
        }
    });
    for (auto& w : ws)
        if (!w->error.empty()) throw std::runtime_error("load: " + w->error);
    const auto t1 = Clock::now();

    // The numbering store_inbox_messages gave: within every stream, stream_seq must grow with the
    // message's position in the stream (i / S); without streams, none.
    {
        PgResult r(PQexec(admin, "SELECT message_id, stream_id, stream_seq FROM whizbang.wh_inbox"));
        if (PQresultStatus(r.r) != PGRES_TUPLES_OK) throw std::runtime_error("load check: " + one_line(PQerrorMessage(admin)));
        const int n = PQntuples(r.r);
        if (n != o.rows) throw std::runtime_error("load: " + std::to_string(n) + " work rows, expected " + std::to_string(o.rows));
        std::vector<long long> seq(o.rows, -1);
        long bad = 0;
        for (int row = 0; row < n; ++row) {
            auto it = c.index.find(PQgetvalue(r.r, row, 0));
            if (it == c.index.end()) { ++bad; continue; }
            const int i = it->second;
            if (S > 0) {
                if (PQgetisnull(r.r, row, 1) || c.stream_text[i % S] != PQgetvalue(r.r, row, 1) || PQgetisnull(r.r, row, 2)) ++bad;
                else seq[i] = std::atoll(PQgetvalue(r.r, row, 2));
            } else if (!PQgetisnull(r.r, row, 1) || !PQgetisnull(r.r, row, 2)) {
                ++bad;
            }
        }
        if (S > 0)
            for (long i = S; i < o.rows; ++i)
                if (seq[i] <= seq[i - S]) ++bad;
        if (bad) throw std::runtime_error("load: " + std::to_string(bad) + " work rows with a wrong stream or stream order");
        std::string inbox = exec_admin(admin, "SELECT count(*) FROM whizbang.wh_inbox");
        if (std::atol(inbox.c_str()) != o.rows) throw std::runtime_error("load: wh_inbox holds " + inbox + " messages");
    }
    exec_admin(admin, "VACUUM (ANALYZE) whizbang.wh_inbox, whizbang.wh_inbox_streams,"
                      " whizbang.wh_message_deduplication");
    exec_admin(admin, "CHECKPOINT");
    const double s = seconds_since(t0, Clock::now());
    std::fprintf(stderr, "  stored %ld messages (%s) with store_inbox_messages in %.1f s (%.1f s with checks, VACUUM, CHECKPOINT)\n",
                 o.rows, S > 0 ? (std::to_string(S) + " streams").c_str() : "no stream", seconds_since(t0, t1), s);
    return s;
}

// The envelopes of the plain FIFO, staged once by COPY in an unlogged table (i, id, envelope).
void create_plain(const Options& o, const Corpus& c, PGconn* admin, Workers& ws) {
    auto t0 = Clock::now();
    exec_admin(admin, "CREATE SCHEMA IF NOT EXISTS bench");
    exec_admin(admin, std::string("DROP TABLE IF EXISTS ") + kPlainTable + ", " + kPlainStage);
    exec_admin(admin, std::string("CREATE TABLE ") + kPlainTable +
                          " (id uuid PRIMARY KEY, stream_id uuid NOT NULL, seq bigint NOT NULL, envelope jsonb NOT NULL)");
    exec_admin(admin, std::string("CREATE INDEX streams_fifo_stream_seq ON ") + kPlainTable + " (stream_id, seq)");
    exec_admin(admin, std::string("CREATE UNLOGGED TABLE ") + kPlainStage + " (i integer NOT NULL, id uuid NOT NULL, envelope jsonb NOT NULL)");
    const std::size_t nc = ws.size();
    for_each_worker(ws, [&](Worker& w, std::size_t j) {
        try {
            std::string rows;
            for (long i = static_cast<long>(j); i < o.rows; i += static_cast<long>(nc)) {
                rows += std::to_string(i) + "\t" + c.id_text[i] + "\t";
                rows.append(c.element[i], c.env_off[i], c.env_len[i]);
                rows.push_back('\n');
                if (rows.size() > (8u << 20)) {
                    copy_in(w.conn, std::string("COPY ") + kPlainStage + " (i, id, envelope) FROM STDIN", rows);
                    rows.clear();
                }
            }
            if (!rows.empty()) copy_in(w.conn, std::string("COPY ") + kPlainStage + " (i, id, envelope) FROM STDIN", rows);
        } catch (const std::exception& e) {
            w.error = e.what();
        }
    });
    for (auto& w : ws)
        if (!w->error.empty()) throw std::runtime_error("staging the plain FIFO: " + w->error);
    std::string n = exec_admin(admin, std::string("SELECT count(*) FROM ") + kPlainStage);
    if (std::atol(n.c_str()) != o.rows) throw std::runtime_error("plain stage holds " + n + " rows");
    std::fprintf(stderr, "  staged %ld envelopes for the plain FIFO by COPY in %.1f s\n", o.rows, seconds_since(t0, Clock::now()));
}

void drop_plain(PGconn* admin) {
    exec_admin(admin, std::string("DROP TABLE IF EXISTS ") + kPlainTable + ", " + kPlainStage);
}

// The plain FIFO for a cell: TRUNCATE, the same messages in message order with stream i % S
// and seq i / S + 1, then VACUUM (ANALYZE) and CHECKPOINT.
double load_plain(const Options& o, const Corpus& c, int S, PGconn* admin) {
    auto t0 = Clock::now();
    exec_admin(admin, std::string("TRUNCATE ") + kPlainTable);
    std::string streams = "{";
    for (int k = 0; k < S; ++k) streams += (k ? "," : "") + c.stream_text[k];
    streams += "}";
    const std::string sql = std::string("INSERT INTO ") + kPlainTable + " (id, stream_id, seq, envelope)"
                            " SELECT s.id, ($1::uuid[])[s.i % " + std::to_string(S) + " + 1], s.i / " + std::to_string(S) +
                            " + 1, s.envelope FROM " + kPlainStage + " s ORDER BY s.i";
    const char* values[1] = {streams.c_str()};
    {
        PgResult r(PQexecParams(admin, sql.c_str(), 1, nullptr, values, nullptr, nullptr, 0));
        if (PQresultStatus(r.r) != PGRES_COMMAND_OK) throw std::runtime_error("plain load: " + one_line(PQerrorMessage(admin)));
        if (std::atol(PQcmdTuples(r.r)) != o.rows) throw std::runtime_error("plain load wrote " + std::string(PQcmdTuples(r.r)) + " rows");
    }
    exec_admin(admin, std::string("VACUUM (ANALYZE) ") + kPlainTable);
    exec_admin(admin, "CHECKPOINT");
    const double s = seconds_since(t0, Clock::now());
    std::fprintf(stderr, "  loaded %ld messages in %d streams into %s in %.1f s (with VACUUM, CHECKPOINT)\n", o.rows, S,
                 kPlainTable, s);
    return s;
}

// ---------------------------------------------------------------------------------------------
// The plain head query: both forms timed on the loaded table (each execution in a transaction
// rolled back, so nothing is consumed), the faster kept.

struct Probe {
    int streams = 0;
    double recursive_ms = -1, distinct_ms = -1;
    int recursive_rows = 0, distinct_rows = 0;
    std::string chosen, plan_note;
};

// One execution of a head statement in a transaction rolled back; its wall time in ms.
double time_head_once(PGconn* c, const std::string& stmt, int rows, int& got) {
    const std::string rows_text = std::to_string(rows);
    const char* values[1] = {rows_text.c_str()};
    std::string e = exec_ok(c, "BEGIN");
    if (!e.empty()) throw std::runtime_error(e);
    auto t0 = Clock::now();
    PgResult r(PQexecPrepared(c, stmt.c_str(), 1, values, nullptr, nullptr, 0));
    auto t1 = Clock::now();
    if (PQresultStatus(r.r) != PGRES_TUPLES_OK) {
        std::string msg = one_line(PQresultErrorMessage(r.r));
        PQclear(PQexec(c, "ROLLBACK"));
        throw std::runtime_error(stmt + ": " + msg);
    }
    got = PQntuples(r.r);
    PQclear(PQexec(c, "ROLLBACK"));
    return std::chrono::duration<double, std::milli>(t1 - t0).count();
}

// "" when the statement's plan reads the FIFO through an index, else the problem.
std::string plan_check(PGconn* c, const std::string& stmt, int rows) {
    PgResult r(PQexec(c, ("EXPLAIN (COSTS OFF) EXECUTE " + stmt + "(" + std::to_string(rows) + ")").c_str()));
    std::string plan;
    for (int i = 0; PQresultStatus(r.r) == PGRES_TUPLES_OK && i < PQntuples(r.r); ++i) plan += std::string(PQgetvalue(r.r, i, 0)) + "; ";
    if (plan.empty() || plan.find("Seq Scan on streams_fifo") != std::string::npos || plan.find("Index") == std::string::npos)
        return "plain head query does not use an index of the FIFO (plan: " + one_line(plan.c_str()) + ")";
    return "";
}

Probe probe_heads(const Options& o, int S, PGconn* c) {
    Probe p;
    p.streams = S;
    // The two forms alternate (2 untimed executions each first), so drift of the machine's
    // speed falls on both alike.
    const bool rec = o.plain_head != "distinct", dis = o.plain_head != "recursive";
    std::vector<double> rms, dms;
    for (int k = 0; k < o.probe_calls + 2; ++k) {
        if (rec) {
            double ms = time_head_once(c, "head_recursive", o.claim_rows, p.recursive_rows);
            if (k >= 2) rms.push_back(ms);
        }
        if (dis) {
            double ms = time_head_once(c, "head_distinct", o.claim_rows, p.distinct_rows);
            if (k >= 2) dms.push_back(ms);
        }
    }
    if (rec) p.recursive_ms = percentile(rms, 0.5);
    if (dis) p.distinct_ms = percentile(dms, 0.5);
    if (o.plain_head == "auto") p.chosen = p.recursive_ms <= p.distinct_ms ? "recursive" : "distinct";
    else p.chosen = o.plain_head;
    p.plan_note = plan_check(c, "head_" + p.chosen, o.claim_rows);
    std::fprintf(stderr, "  plain head query, %d streams: recursive %.3f ms (%d rows), DISTINCT ON %.3f ms (%d rows): %s%s\n", S,
                 p.recursive_ms, p.recursive_rows, p.distinct_ms, p.distinct_rows, p.chosen.c_str(),
                 p.plan_note.empty() ? "" : ("; " + p.plan_note).c_str());
    return p;
}

// ---------------------------------------------------------------------------------------------
// The claim cycle

enum class Kind { Streamed, Unstreamed, Plain };

struct CellSpec {
    Kind kind;
    int streams;  // 0: unstreamed
};

std::string method_of(Kind k) { return k == Kind::Streamed ? "streamed" : k == Kind::Unstreamed ? "unstreamed" : "plain"; }

struct CycleState {
    std::atomic<long> ticket{0}, completed{0};
};

// whizbang: claim (autocommit), then complete_work of exactly those rows (autocommit). Returns
// the messages completed, -1 after an error.
int whizbang_cycle(const Options& o, const Corpus& c, int S, Worker& w, CycleState& st, bool full) {
    const std::string rows_text = std::to_string(o.claim_rows);
    const char* cv[2] = {w.instance.c_str(), rows_text.c_str()};
    PgResult r(PQexecPrepared(w.conn, "claim", 2, cv, nullptr, nullptr, 0));
    if (PQresultStatus(r.r) != PGRES_TUPLES_OK) {
        w.note("ERROR: claim: " + one_line(PQresultErrorMessage(r.r)));
        return -1;
    }
    const long ticket = ++st.ticket;
    const int got = PQntuples(r.r);
    if (got == 0) return 0;
    std::vector<int> msg(got, -1);
    std::string ids = "{", tokens = "{";
    for (int k = 0; k < got; ++k) {
        const char* id = PQgetvalue(r.r, k, 0);
        auto it = c.index.find(id);
        if (it == c.index.end()) w.note("claim returned an unknown message " + std::string(id));
        else msg[k] = it->second;
        if (msg[k] >= 0 && (S > 0 ? PQgetisnull(r.r, k, 2) || c.stream_text[msg[k] % S] != PQgetvalue(r.r, k, 2)
                                  : !PQgetisnull(r.r, k, 2)))
            w.note("claimed message " + std::string(id) + " has stream '" + PQgetvalue(r.r, k, 2) + "'");
        if (full && (PQgetisnull(r.r, k, 3) || PQgetlength(r.r, k, 3) < 100))
            w.note("claimed message " + std::string(id) + " has no envelope");
        if (k) {
            ids.push_back(',');
            tokens.push_back(',');
        }
        ids += id;
        tokens += PQgetvalue(r.r, k, 1);
    }
    ids.push_back('}');
    tokens.push_back('}');
    const char* pv[2] = {ids.c_str(), tokens.c_str()};
    PgResult d(PQexecPrepared(w.conn, "complete", 2, pv, nullptr, nullptr, 0));
    if (PQresultStatus(d.r) != PGRES_TUPLES_OK) {
        w.note("ERROR: complete: " + one_line(PQresultErrorMessage(d.r)));
        return -1;
    }
    if (PQntuples(d.r) != got)
        w.note("complete_work returned " + std::to_string(PQntuples(d.r)) + " rows for " + std::to_string(got));
    int completed = 0;
    for (int j = 0; j < PQntuples(d.r); ++j) {
        const char* id = PQgetvalue(d.r, j, 0);
        int pos = -1;
        if (j < got && std::strcmp(PQgetvalue(r.r, j, 0), id) == 0) pos = j;
        for (int k = 0; pos < 0 && k < got; ++k)
            if (std::strcmp(PQgetvalue(r.r, k, 0), id) == 0) pos = k;
        const char* outcome = PQgetvalue(d.r, j, 1);
        if (std::strcmp(outcome, "completed") == 0) {
            if (pos < 0 || msg[pos] < 0) {
                w.note("complete_work completed a message it was not given: " + std::string(id));
                continue;
            }
            w.done.push_back({ticket, pos, msg[pos]});
            ++completed;
        } else {
            if (std::strcmp(outcome, "lease_lost") == 0) ++w.lease_lost;
            else if (std::strcmp(outcome, "not_found") == 0) ++w.not_found;
            w.note("complete_work said '" + std::string(outcome) + "' for " + id);
        }
    }
    st.completed += completed;
    return completed;
}

// The plain FIFO: BEGIN; heads FOR UPDATE SKIP LOCKED LIMIT n; DELETE of those rows; COMMIT.
int plain_cycle(const Options& o, const Corpus& c, int S, const std::string& head, Worker& w, CycleState& st, bool full) {
    std::string e = exec_ok(w.conn, "BEGIN");
    if (!e.empty()) {
        w.note(e);
        return -1;
    }
    auto fail = [&](const std::string& problem) {
        PQclear(PQexec(w.conn, "ROLLBACK"));
        w.note(problem);
        return -1;
    };
    const std::string rows_text = std::to_string(o.claim_rows);
    const char* hv[1] = {rows_text.c_str()};
    PgResult r(PQexecPrepared(w.conn, head.c_str(), 1, hv, nullptr, nullptr, 0));
    if (PQresultStatus(r.r) != PGRES_TUPLES_OK) return fail("ERROR: head query: " + one_line(PQresultErrorMessage(r.r)));
    const long ticket = ++st.ticket;
    const int got = PQntuples(r.r);
    std::vector<int> msg(got, -1);
    std::string ids = "{";
    for (int k = 0; k < got; ++k) {
        const char* id = PQgetvalue(r.r, k, 0);
        auto it = c.index.find(id);
        if (it == c.index.end()) w.note("head query returned an unknown message " + std::string(id));
        else msg[k] = it->second;
        if (msg[k] >= 0 && (c.stream_text[msg[k] % S] != PQgetvalue(r.r, k, 1) ||
                            std::atoll(PQgetvalue(r.r, k, 2)) != msg[k] / S + 1))
            w.note("head " + std::string(id) + " has stream " + PQgetvalue(r.r, k, 1) + " seq " + PQgetvalue(r.r, k, 2));
        if (full && PQgetlength(r.r, k, 3) < 100) w.note("head " + std::string(id) + " has no envelope");
        if (k) ids.push_back(',');
        ids += id;
    }
    ids.push_back('}');
    if (got > 0) {
        const char* dv[1] = {ids.c_str()};
        PgResult d(PQexecPrepared(w.conn, "fifo_delete", 1, dv, nullptr, nullptr, 0));
        if (PQresultStatus(d.r) != PGRES_COMMAND_OK) return fail("ERROR: delete: " + one_line(PQresultErrorMessage(d.r)));
        if (std::atol(PQcmdTuples(d.r)) != got)
            return fail("DELETE removed " + std::string(PQcmdTuples(d.r)) + " of " + std::to_string(got) + " heads");
    }
    e = exec_ok(w.conn, "COMMIT");
    if (!e.empty()) {
        w.note(e);
        return -1;
    }
    for (int k = 0; k < got; ++k)
        if (msg[k] >= 0) w.done.push_back({ticket, k, msg[k]});
    st.completed += got;
    return got;
}

struct CellExtra {  // what a cell adds to its CellResult, for the report
    long out_of_order = 0, empty_claims = 0, short_claims = 0;
    double load_s = 0;
};

// One cell: load, warm-up, the timed window, the checks. A plain cell whose stream count has no
// head query chosen yet (`head` empty) times both forms on the loaded table first and keeps the
// faster in `head` (the probe's row locks were rolled back; a CHECKPOINT follows it).
CellResult run_cell(const Options& o, const Corpus& c, const CellSpec& spec, std::string& head, std::vector<Probe>& probes,
                    PGconn* admin, Workers& ws, CellExtra& extra) {
    CellResult res;
    const int S = spec.streams;
    res.method = method_of(spec.kind);
    res.mode = "cycle";
    res.batch = S;
    res.conns = o.conns;
    if (spec.kind == Kind::Streamed) res.label = "whizbang, " + std::to_string(S) + " streams";
    else if (spec.kind == Kind::Unstreamed) res.label = "whizbang, no stream";
    extra = CellExtra{};
    for (auto& w : ws) w->reset();

    const bool plain = spec.kind == Kind::Plain;
    extra.load_s = plain ? load_plain(o, c, S, admin) : load_whizbang(o, c, S, admin, ws);
    for (auto& w : ws) w->reset();
    if (plain && head.empty()) {
        Probe p = probe_heads(o, S, ws[0]->conn);
        head = "head_" + p.chosen;
        probes.push_back(p);
        exec_admin(admin, "CHECKPOINT");
    }
    if (plain) {
        res.label = "plain FIFO (" + head.substr(5) + "), " + std::to_string(S) + " streams";
        for (auto& p : probes)
            if (p.streams == S && !p.plan_note.empty()) {
                res.check = p.plan_note;
                return res;
            }
    }

    CycleState st;
    auto cycle = [&](Worker& w, bool full) {
        return plain ? plain_cycle(o, c, S, head, w, st, full) : whizbang_cycle(o, c, S, w, st, full);
    };
    for_each_worker(ws, [&](Worker& w, std::size_t) {
        for (int k = 0; k < o.warm_cycles && w.error.empty(); ++k) {
            int got = cycle(w, true);
            if (got > 0) w.sent_msgs += got;
        }
    });
    for (auto& w : ws)
        if (w->mismatches) {
            res.check = "warm-up: " + w->first_problem;
            return res;
        }

    for (auto& w : ws) w->lat_ms.reserve(1 << 15);
    Window win = timed_window(admin, conns_of(ws), o.seconds, [&](std::size_t i, Clock::time_point deadline) {
        Worker& w = *ws[i];
        while (Clock::now() < deadline) {
            if (st.completed.load() >= o.rows) {
                w.exhausted = true;
                break;
            }
            auto t0 = Clock::now();
            int got = cycle(w, false);
            auto t1 = Clock::now();
            if (got < 0) break;
            if (got == 0) {
                ++w.empty_claims;
                continue;
            }
            if (got < o.claim_rows) ++w.short_claims;
            w.lat_ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
            w.sent_msgs += got;
            w.timed_msgs += got;
            ++w.timed_calls;
        }
    });
    fill_result(res, ws, win);

    std::vector<std::string> notes;
    const std::string p = problems_of(ws);
    if (!p.empty()) notes.push_back(p);
    long lost = 0, nf = 0;
    bool exhausted = false;
    for (auto& w : ws) {
        lost += w->lease_lost;
        nf += w->not_found;
        extra.empty_claims += w->empty_claims;
        extra.short_claims += w->short_claims;
        exhausted = exhausted || w->exhausted;
    }
    if (lost || nf) notes.push_back(std::to_string(lost) + " completions lease_lost, " + std::to_string(nf) + " not_found");
    if (exhausted) notes.push_back("all " + std::to_string(o.rows) + " messages completed after " + fmt("%.2f", res.secs) + " s");
    if (extra.empty_claims)
        notes.push_back(std::to_string(extra.empty_claims) + (plain ? " empty head queries" : " empty claims") +
                        " while messages were pending");

    // No message completed twice; per stream, the completions in order of the tickets are the
    // stream's first messages in stored order.
    std::vector<Done> all;
    for (auto& w : ws) all.insert(all.end(), w->done.begin(), w->done.end());
    std::vector<char> seen(o.rows, 0);
    long twice = 0;
    for (auto& d : all)
        if (seen[d.msg]++) ++twice;
    if (twice) notes.push_back(std::to_string(twice) + " messages completed twice");
    if (S > 0) {
        std::sort(all.begin(), all.end(), [](const Done& a, const Done& b) {
            return a.ticket != b.ticket ? a.ticket < b.ticket : a.pos < b.pos;
        });
        std::vector<long> last(S, -1);
        for (auto& d : all) {
            const int k = d.msg % S;
            if (d.msg != (last[k] < 0 ? k : last[k] + S)) ++extra.out_of_order;
            last[k] = d.msg;
        }
        if (extra.out_of_order)
            notes.push_back(std::to_string(extra.out_of_order) + " completions out of stream order" +
                            (plain ? " (the plain baseline's own behaviour, not enforced)" : ""));
    }
    // Completed = removed, and no lease left behind.
    const long completed = static_cast<long>(all.size());
    long left = 0, leases = 0;
    if (plain) {
        left = std::atol(exec_admin(admin, std::string("SELECT count(*) FROM ") + kPlainTable).c_str());
        if (o.rows - left != completed)
            notes.push_back("FIFO holds " + std::to_string(left) + " rows, expected " + std::to_string(o.rows - completed));
    } else {
        PgResult r(PQexec(admin, "SELECT (SELECT count(*) FROM whizbang.wh_inbox), (SELECT count(*) FROM whizbang.wh_inbox),"
                                 " (SELECT count(*) FROM whizbang.leases)"));
        if (PQresultStatus(r.r) != PGRES_TUPLES_OK) {
            notes.push_back("table check failed: " + one_line(PQerrorMessage(admin)));
            left = -1;
        } else {
            left = std::atol(PQgetvalue(r.r, 0, 0));
            const long msgs = std::atol(PQgetvalue(r.r, 0, 1));
            leases = std::atol(PQgetvalue(r.r, 0, 2));
            if (o.rows - left != completed || o.rows - msgs != completed)
                notes.push_back("tables hold " + std::to_string(left) + " work rows / " + std::to_string(msgs) +
                                " messages, expected " + std::to_string(o.rows - completed));
            if (leases) notes.push_back(std::to_string(leases) + " live leases after the cell");
        }
    }
    if (!notes.empty()) {
        res.check.clear();
        for (auto& n : notes) res.check += (res.check.empty() ? "" : "; ") + n;
    }
    res.valid = res.ids > 0 && p.empty() && lost == 0 && nf == 0 && twice == 0 && (plain || extra.out_of_order == 0) &&
                left >= 0 && o.rows - left == completed && leases == 0;
    return res;
}

// ---------------------------------------------------------------------------------------------
// Reporting

const CellResult* cell(const std::vector<CellResult>& rs, const std::string& method, int S) {
    for (auto& r : rs)
        if (r.method == method && r.batch == S) return &r;
    return nullptr;
}

std::string rate(const CellResult* r) { return r && r->valid ? fmt_int(r->ids_per_s) : std::string("n/a"); }
std::string cpu(const CellResult* r) {
    return r && r->valid && r->cpu_us_per_id >= 0 ? fmt("%.1f", r->cpu_us_per_id) : std::string("n/a");
}

// "0.93x met" / "0.71x missed" / "2.10x" (no target) / "n/a".
std::string judged(const CellResult* a, const CellResult* b, double target) {
    if (!a || !b || !a->valid || !b->valid || b->ids_per_s <= 0) return "n/a";
    const double q = a->ids_per_s / b->ids_per_s;
    std::string s = fmt("%.2f", q) + "x";
    if (target > 0) s += q >= target ? " met" : " **missed**";
    return s;
}

void write_summary(const Options& o, const std::vector<CellResult>& rs, std::ostream& md) {
    const CellResult* u = cell(rs, "unstreamed", 0);
    md << "| streams | streamed msgs/s | unstreamed msgs/s | plain FIFO msgs/s | streamed / unstreamed (target >= 0.8x) "
          "| streamed / plain FIFO (target >= 0.8x at 500 and 2000) |\n|---:|---:|---:|---:|---:|---:|\n";
    for (int S : o.counts) {
        const CellResult* s = cell(rs, "streamed", S);
        const CellResult* p = cell(rs, "plain", S);
        md << "| " << S << " | " << rate(s) << " | " << rate(u) << " | " << rate(p) << " | " << judged(s, u, 0.8) << " | "
           << judged(s, p, S >= 500 ? 0.8 : 0) << (S >= 500 ? "" : " (no target)") << " |\n";
    }
}

void write_markdown(const Options& o, const std::vector<CellResult>& rs, const std::vector<Probe>& probes,
                    const std::map<std::string, CellExtra>& extras, std::ostream& md) {
    md << "### Claim cycle over interleaved streams (issue 20)\n\n"
       << o.conns << " clients each loop `claim_work(instance, 'inbox', " << o.claim_rows
       << ")` (autocommit) then `complete_work('inbox', ids, tokens, '')` of exactly those rows (autocommit); the plain "
          "FIFO loops `BEGIN`; heads `FOR UPDATE SKIP LOCKED LIMIT "
       << o.claim_rows << "`; `DELETE ... WHERE id = ANY`; `COMMIT`. Before every cell: " << fmt_int(static_cast<double>(o.rows))
       << " pending messages (message i in stream i % S; whizbang: stored by `store_inbox_messages` in batches of "
       << o.store_batch << "; the same messages without `StreamId` for the unstreamed cell; plain: the same messages "
          "and streams, seq = i / S + 1), then `VACUUM (ANALYZE)` and `CHECKPOINT`. msgs/s = completed messages / "
          "wall seconds of the window, median over "
       << o.rounds << " round(s); the unstreamed figure is measured once per round and set beside every stream count.\n\n";
    write_summary(o, rs, md);

    md << "\n#### Server CPU per completed message (us, CPU of the " << o.conns << " server backends)\n\n"
       << "| streams | streamed | unstreamed | plain FIFO |\n|---:|---:|---:|---:|\n";
    for (int S : o.counts)
        md << "| " << S << " | " << cpu(cell(rs, "streamed", S)) << " | " << cpu(cell(rs, "unstreamed", 0)) << " | "
           << cpu(cell(rs, "plain", S)) << " |\n";

    md << "\n#### All cells\n\n"
       << columns_note(o, "msg", "cycle (whizbang: claim + complete; plain: BEGIN, heads, DELETE, COMMIT; empty cycles not counted)")
       << " check: every store call and the stream numbering it left (stream_seq grows with the position in the stream); "
          "the warm-up cycles (" << o.warm_cycles << " per client) row by row; every claimed row of its stream (plain: and "
          "seq); every completion `completed`; after the cell no message completed twice, per stream the completions "
          "(ordered by a ticket taken as each claim returned) are the stream's first messages in stored order, "
          "completed = rows removed, no live lease (`whizbang.leases`).\n\n"
       << "| cell | msgs/s | range msgs/s | cycles/s | p50 ms | p99 ms | CPU us/msg | client % | other % | WAL B/msg | msgs | s | check |\n"
       << "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|\n";
    auto row = [&](const CellResult* r) {
        if (r) cell_row(md, *r, false);
    };
    row(cell(rs, "unstreamed", 0));
    for (int S : o.counts) {
        row(cell(rs, "streamed", S));
        row(cell(rs, "plain", S));
    }

    md << "\n#### Plain FIFO head query\n\n"
       << "Both forms timed on the freshly loaded FIFO in round 1 (" << o.probe_calls << " executions each, alternating, "
          "median, each in a transaction rolled back); the faster (`--plain-head="
       << o.plain_head << "`) ran the cells.\n\n"
       << "- recursive: `WITH RECURSIVE h AS ((SELECT stream_id, seq FROM fifo ORDER BY stream_id, seq LIMIT 1) UNION ALL "
          "SELECT n.* FROM h, LATERAL (SELECT stream_id, seq FROM fifo WHERE stream_id > h.stream_id ORDER BY stream_id, "
          "seq LIMIT 1) n) SELECT q.id, q.stream_id, q.seq, q.envelope FROM h JOIN fifo q USING (stream_id, seq) LIMIT 100 "
          "FOR UPDATE OF q SKIP LOCKED` (a loose index scan: one index probe per stream)\n"
       << "- distinct: `SELECT q.id, ... FROM (SELECT DISTINCT ON (stream_id) stream_id, seq FROM fifo ORDER BY stream_id, "
          "seq) h JOIN fifo q USING (stream_id, seq) LIMIT 100 FOR UPDATE OF q SKIP LOCKED` (reads every row of each "
          "stream it passes)\n\n"
       << "| streams | recursive ms | DISTINCT ON ms | rows | used | plan |\n|---:|---:|---:|---:|---|---|\n";
    for (auto& p : probes)
        md << "| " << p.streams << " | " << (p.recursive_ms >= 0 ? fmt("%.3f", p.recursive_ms) : std::string("-")) << " | "
           << (p.distinct_ms >= 0 ? fmt("%.3f", p.distinct_ms) : std::string("-")) << " | "
           << std::max(p.recursive_rows, p.distinct_rows) << " | " << p.chosen << " | "
           << (p.plan_note.empty() ? std::string("index") : p.plan_note) << " |\n";

    long plain_ooo = 0, plain_empty = 0;
    for (auto& e : extras)
        if (e.first.rfind("plain", 0) == 0) {
            plain_ooo += e.second.out_of_order;
            plain_empty += e.second.empty_claims;
        }
    md << "\nThe plain FIFO keeps order only through the row lock of the transaction that processes and deletes a head "
          "(a consumer that crashes rolls back; no lease, no fencing): a head another client holds is skipped, and the "
          "rows behind it are not heads in that snapshot (READ COMMITTED: a head whose deleting transaction is still open "
          "is still the head in the snapshot; one whose deleting transaction committed after the snapshot is dropped "
          "when its lock is tried). With fewer unlocked "
          "heads than the LIMIT (50 streams: at most 50 per cycle), one client takes every head and the other's head "
          "query comes back empty until it commits (empty head queries, all plain windows of the run: " << plain_empty
       << "). Completions of the plain FIFO out of stream order, measured as for whizbang (all plain windows of the run): "
       << plain_ooo << ".\n";
}

}  // namespace

int main(int argc, char** argv) {
    Options o = parse_options(argc, argv);
    PGconn* admin = connect_or_die(o.dsn);
    exec_admin(admin, "SET client_min_messages = warning");
    const std::string store = exec_admin(admin, "SELECT whizbang.lease_store()");
    std::fprintf(stderr, "  lease store: %s\n", store.c_str());

    Workers ws;
    IdGenerator g(false, 0x5eedULL);
    for (int i = 0; i < o.conns; ++i) {
        auto w = std::make_unique<Worker>(connect_or_die(o.dsn));
        w->instance = uuid_text(g.next());
        ws.push_back(std::move(w));
    }

    Corpus corpus;
    try {
        corpus = build_corpus(o);
        create_plain(o, corpus, admin, ws);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "cannot prepare the messages: %s\n", e.what());
        return 1;
    }
    for (auto& w : ws) prepare_all(w->conn);
    prepare_all(admin);

    // One round: the unstreamed cell, then per count the streamed and the plain cell; the order
    // rotated by one each round.
    std::vector<CellSpec> specs{{Kind::Unstreamed, 0}};
    for (int S : o.counts) {
        specs.push_back({Kind::Streamed, S});
        specs.push_back({Kind::Plain, S});
    }
    long budget = static_cast<long>(std::ceil(o.retry_budget * specs.size() * o.rounds));
    std::map<int, std::string> head_of;  // stream count -> chosen head statement ("": not yet)
    std::string no_head;
    std::vector<Probe> probes;
    std::map<std::string, CellExtra> extras;
    std::vector<CellResult> measured;
    std::vector<int> round_of;

    print_cell_header();
    for (int round = 1; round <= o.rounds; ++round)
        for (std::size_t n = 0; n < specs.size(); ++n) {
            const CellSpec spec = specs[(n + round - 1) % specs.size()];
            const std::string what = method_of(spec.kind) + " " + std::to_string(spec.streams);
            std::string& head = head_of[spec.streams];
            CellResult r = measure_cell(o.retries, o.max_other, budget, what, [&] {
                CellExtra extra;
                try {
                    CellResult a = run_cell(o, corpus, spec, spec.kind == Kind::Plain ? head : no_head, probes, admin, ws, extra);
                    CellExtra& sum = extras[what];  // over every window measured
                    sum.out_of_order += extra.out_of_order;
                    sum.empty_claims += extra.empty_claims;
                    sum.short_claims += extra.short_claims;
                    return a;
                } catch (const std::exception& e) {
                    return failed_cell(method_of(spec.kind), what, "cycle", spec.streams, e);
                }
            });
            print_cell(r, round);
            measured.push_back(r);
            round_of.push_back(round);
        }
    exec_admin(admin, kWhizbangTruncate);
    drop_plain(admin);
    std::vector<CellResult> results = aggregate(measured, o.max_other);

    if (!o.tsv_path.empty()) {
        std::ofstream t(o.tsv_path);
        write_tsv_header(t);
        for (auto& r : results) write_tsv_row(t, r);
        // Every round's raw figures: part "round", the round number in the rounds column.
        for (std::size_t k = 0; k < measured.size(); ++k) {
            CellResult r = measured[k];
            r.mode = "round";
            r.rounds = round_of[k];
            r.min_ids_per_s = r.max_ids_per_s = r.ids_per_s;
            write_tsv_row(t, r);
        }
        for (auto& p : probes) {
            t << "probe\thead_recursive\t" << p.streams << "\t1\t1\t\t\t" << p.recursive_rows << "\t" << o.probe_calls
              << "\t\t\t\t" << fmt("%.3f", p.recursive_ms) << "\t\t\t\t\t\t\t" << (p.chosen == "recursive" ? "used" : "") << '\n';
            t << "probe\thead_distinct\t" << p.streams << "\t1\t1\t\t\t" << p.distinct_rows << "\t" << o.probe_calls
              << "\t\t\t\t" << fmt("%.3f", p.distinct_ms) << "\t\t\t\t\t\t\t" << (p.chosen == "distinct" ? "used" : "") << '\n';
        }
    }
    std::ostringstream body;
    write_markdown(o, results, probes, extras, body);
    if (!o.md_path.empty()) {
        std::ofstream md(o.md_path);
        md << body.str();
    }
    std::ostringstream summary;
    write_summary(o, results, summary);
    std::printf("\nClaim cycle, %d clients, %ld pending messages per cell, median of %d round(s) of %.0f s:\n\n%s", o.conns,
                o.rows, o.rounds, o.seconds, summary.str().c_str());
    for (auto& p : probes)
        std::printf("plain head query at %d streams: %s (recursive %.3f ms, DISTINCT ON %.3f ms per call)\n", p.streams,
                    p.chosen.c_str(), p.recursive_ms, p.distinct_ms);

    for (auto& w : ws) PQfinish(w->conn);
    PQfinish(admin);
    bool any_bad = false;
    for (auto& r : results) any_bad = any_bad || !r.valid;
    return any_bad ? 3 : 0;
}
