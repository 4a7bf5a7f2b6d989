// Load driver for the whizbang outbox benchmark (bench/outbox starts it; see bench/README.md).
//
// The relay cycle, on N long-lived connections (one thread each): every client loops
//
//   transaction 1  store a batch of new messages (the application's outbox write)
//   transaction 2  claim up to --claim-rows outbox rows with a lease (the relay)
//   transaction 3  complete the ids it claimed (published)
//
// for each method of bench.outbox_methods (bench/outbox_reference.sql: whizbang's functions,
// the PL/pgSQL reference, the plain SQL statements), each on its own tables, in one run on one
// cluster. A client claims whatever is due, its own messages or the other clients'; the queue
// stays short (what the clients have stored and not yet claimed). The rate counted is messages
// completed: a message counts once it went through all three steps.
//
// It uses the shared machinery of common.h, as the inbox driver does: every payload of a timed
// window is built before its clock starts; all threads are released together; the CPU of the
// server backends, of the driver and of everything else, and the WAL, are measured per window;
// a window disturbed by other work is measured again; rounds are interleaved (the order of the
// methods rotated by one each round) and the median is reported. Besides, the server CPU and wall time of each step are summed per cell (the
// backend's CPU from /proc around each call), to show where a method spends its time.
//
// Checks: the warm-up of every cell verifies every row (store: id, input order, new; claim:
// every column, the envelope belongs to its message, one fresh token per claim, attempts 1;
// the lease recorded in the table; complete: the count or every outcome), the rows of the first
// batch of each client column by column against what was sent, and, after a drain, that the
// tables are empty and every stored message was handed out exactly once. After the timed window:
// the same drain and checks over everything stored in the cell.
//
// Output: a text table on stdout, a TSV (--tsv) and a markdown fragment (--md).
// Connection parameters come from the usual PG* environment variables (or --dsn).

#include <set>

#include "common.h"

namespace {

using namespace bench;

// ---------------------------------------------------------------------------------------------
// Options

struct Options : RunOptions {
    std::vector<std::string> methods{"native", "native_cw", "plpgsql", "sql", "plpgsql_1t", "sql_1t"};
    int batch = 100;          // messages per store
    int claim_rows = 100;     // p_max_rows of each claim
    int lease_seconds = 300;  // p_lease_seconds of each claim
    int warm_cycles = 5;      // per client, before the timed window
    long max_msgs = 250000;   // per connection per cell (memory cap)
};

[[noreturn]] void usage(const char* msg) {
    std::fprintf(stderr,
                 "error: %s\n"
                 "usage: outbox_driver [--methods=native,native_cw,plpgsql,sql,plpgsql_1t,sql_1t] [--batch=100] [--claim-rows=100] "
                 "[--lease-seconds=300] [--warm-cycles=5] [--conns=2] [--rounds=3] [--retries=1] [--max-other=20] "
                 "[--retry-budget=0.5] [--seconds=2] [--envelope-bytes=1000] [--max-msgs=250000] [--dsn=CONNINFO] "
                 "[--tsv=FILE] [--md=FILE]\n",
                 msg);
    std::exit(2);
}

Options parse_options(int argc, char** argv) {
    Options o;
    parse_key_values(argc, argv, [&](const std::string& key, const std::string& val) {
        if (parse_run_option(key, val, o)) return true;
        if (key == "--methods") o.methods = split(val, ',');
        else if (key == "--batch") o.batch = std::stoi(val);
        else if (key == "--claim-rows") o.claim_rows = std::stoi(val);
        else if (key == "--lease-seconds") o.lease_seconds = std::stoi(val);
        else if (key == "--warm-cycles") o.warm_cycles = std::stoi(val);
        else if (key == "--max-msgs") o.max_msgs = std::stol(val);
        else return false;
        return true;
    }, usage);
    if (o.conns < 1 || o.rounds < 1 || o.seconds <= 0 || o.batch < 1 || o.claim_rows < 1 || o.lease_seconds < 120 ||
        o.warm_cycles < 1 || o.max_msgs < 1 || o.envelope_bytes < 200)
        usage("counts and seconds must be positive, --lease-seconds at least 120, --envelope-bytes at least 200");
    if (o.methods.empty()) usage("no method");
    return o;
}

// ---------------------------------------------------------------------------------------------
// Methods: read from bench.outbox_methods (bench/outbox_reference.sql)

struct Method {
    std::string name, label, tables, rows_view, store_sql, claim_sql, complete_sql;
    bool outcomes = false;  // complete takes the tokens and answers (message_id, outcome) per id
    bool native() const { return name.rfind("native", 0) == 0; }
};

std::vector<Method> load_methods(PGconn* admin, const std::vector<std::string>& wanted) {
    PgResult r(PQexec(admin, "SELECT method, label, tables, rows_view, store_sql, claim_sql, complete_sql, complete"
                             " FROM bench.outbox_methods"));
    if (PQresultStatus(r.r) != PGRES_TUPLES_OK) {
        std::fprintf(stderr, "cannot read bench.outbox_methods (load bench/outbox_reference.sql): %s",
                     PQerrorMessage(admin));
        std::exit(1);
    }
    std::vector<Method> out;
    for (const auto& name : wanted) {
        bool found = false;
        for (int i = 0; i < PQntuples(r.r) && !found; ++i) {
            if (name != PQgetvalue(r.r, i, 0)) continue;
            Method m;
            m.name = name;
            m.label = PQgetvalue(r.r, i, 1);
            m.tables = PQgetvalue(r.r, i, 2);
            m.rows_view = PQgetvalue(r.r, i, 3);
            m.store_sql = PQgetvalue(r.r, i, 4);
            m.claim_sql = PQgetvalue(r.r, i, 5);
            m.complete_sql = PQgetvalue(r.r, i, 6);
            m.outcomes = std::strcmp(PQgetvalue(r.r, i, 7), "outcomes") == 0;
            out.push_back(m);
            found = true;
        }
        if (!found) usage(("unknown method " + name + " (not in bench.outbox_methods)").c_str());
    }
    return out;
}

// ---------------------------------------------------------------------------------------------
// Messages (client side, before timing)

constexpr const char* kDestination = "orders.order-placed";
constexpr const char* kType = "Orders.Contracts.OrderPlaced, Orders.Contracts";
constexpr const char* kMetadata = "{\"TenantId\":\"tenant-042\",\"Transport\":\"rabbitmq\",\"Attempt\":1}";

// Claim result columns (claim_work's order).
enum ClaimCol { kSource, kId, kStream, kPartition, kHandler, kDest, kMsgType, kEnvelope, kMetadataCol, kScope,
                kAttempts, kToken, kExpiry, kConsumer, kClaimCols };

// One element of p_messages: no StreamId, Scope or ScheduledFor (due now).
std::string element(const Uuid& id, const std::string& envelope) {
    std::string s;
    s.reserve(envelope.size() + 250);
    s += "{\"MessageId\":\"" + uuid_text(id) + "\",\"Destination\":\"" + kDestination + "\",\"MessageType\":\"" + kType +
         "\",\"Envelope\":" + envelope + ",\"Metadata\":" + kMetadata + ",\"IsEvent\":true}";
    return s;
}

// ---------------------------------------------------------------------------------------------
// Workers

enum Step { kStore, kClaim, kComplete, kSteps };
const char* const kStepNames[kSteps] = {"store", "claim", "complete"};

// Per-step sums over the timed cycles of one cell (all clients).
struct Steps {
    double wall_ms[kSteps] = {0, 0, 0};
    double cpu_s[kSteps] = {0, 0, 0};  // the backend's CPU during the call (-1: not readable)
    long cycles = 0, msgs = 0, claims_short = 0, claims_empty = 0, stored = 0;
};

struct Worker : LoadWorker {
    MessageFactory factory;
    std::string instance;               // this client's p_instance_id
    int backend_pid = 0;
    std::vector<Uuid> ids;              // every message stored in the cell, batch by batch
    std::vector<std::string> batches;   // p_messages of each batch
    std::size_t next = 0;               // next batch to store
    std::vector<std::string> claimed;   // every message id handed to this client
    long completed = 0;
    std::string last_token;             // of the previous claim (tokens must increase)
    Steps steps;

    Worker(PGconn* c, std::uint64_t seed, int envelope_bytes, std::string inst)
        : LoadWorker(c), factory(seed, envelope_bytes), instance(std::move(inst)), backend_pid(PQbackendPID(c)) {}

    void reset() {
        reset_counts();
        ids.clear();
        ids.shrink_to_fit();
        batches.clear();
        batches.shrink_to_fit();
        next = 0;
        claimed.clear();
        claimed.shrink_to_fit();
        completed = 0;
        last_token.clear();
        steps = Steps{};
    }

    void generate(int batch, std::size_t nbatches) {
        batches.reserve(batches.size() + nbatches);
        ids.reserve(ids.size() + nbatches * batch);
        for (std::size_t k = 0; k < nbatches; ++k) {
            const std::string ts = now_text();
            std::string json = "[";
            for (int i = 0; i < batch; ++i) {
                Uuid id = factory.next_id();
                ids.push_back(id);
                if (i) json.push_back(',');
                json += element(id, factory.envelope(id, ts));
            }
            json.push_back(']');
            batches.push_back(std::move(json));
        }
    }
};

using Workers = std::vector<std::unique_ptr<Worker>>;

// ---------------------------------------------------------------------------------------------
// The three steps; each returns "" or the problem ("ERROR: ..." when the server refused)

// Transaction 1: store batch k. One row per input, in input order, every one new; `full` checks
// every row, else the count and both ends.
std::string store_step(Worker& w, const Method& m, int batch, bool full) {
    const std::size_t k = w.next;
    const char* values[1] = {w.batches[k].c_str()};
    PgResult r(PQexecPrepared(w.conn, (m.name + "_store").c_str(), 1, values, nullptr, nullptr, 0));
    if (PQresultStatus(r.r) != PGRES_TUPLES_OK) return "ERROR: store: " + one_line(PQresultErrorMessage(r.r));
    ++w.next;
    int rows = PQntuples(r.r);
    if (rows != batch) return "store returned " + std::to_string(rows) + " rows, expected " + std::to_string(batch);
    const Uuid* ids = w.ids.data() + k * batch;
    auto bad = [&](int i) -> std::string {
        std::string want = uuid_text(ids[i]);
        if (want != PQgetvalue(r.r, i, 0)) return "store row " + std::to_string(i) + " is " + PQgetvalue(r.r, i, 0) + ", input has " + want;
        if (!PQgetisnull(r.r, i, 1)) return "store row " + std::to_string(i) + " has a stream id";
        if (std::strcmp(PQgetvalue(r.r, i, 2), "t") != 0) return "store row " + std::to_string(i) + " not newly created";
        return "";
    };
    for (int i = 0; i < rows; i += full ? 1 : std::max(1, rows - 1)) {
        std::string e = bad(i);
        if (!e.empty()) return e;
    }
    return "";
}

// Transaction 2: claim. The claimed ids and their tokens go to `ids` / `tokens` (array text) and
// to w.claimed. `full` checks every column of every row.
std::string claim_step(Worker& w, const Method& m, const Options& o, bool full, std::string& ids, std::string& tokens,
                       int& got) {
    const std::string rows_text = std::to_string(o.claim_rows), lease_text = std::to_string(o.lease_seconds);
    const char* values[3] = {w.instance.c_str(), rows_text.c_str(), lease_text.c_str()};
    PgResult r(PQexecPrepared(w.conn, (m.name + "_claim").c_str(), 3, values, nullptr, nullptr, 0));
    got = 0;
    ids = "{";
    tokens = "{";
    if (PQresultStatus(r.r) != PGRES_TUPLES_OK) return "ERROR: claim: " + one_line(PQresultErrorMessage(r.r));
    if (PQnfields(r.r) != kClaimCols) return "claim returned " + std::to_string(PQnfields(r.r)) + " columns";
    got = PQntuples(r.r);
    std::string problem;
    for (int i = 0; i < got; ++i) {
        if (i) {
            ids.push_back(',');
            tokens.push_back(',');
        }
        const char* id = PQgetvalue(r.r, i, kId);
        ids += id;
        tokens += PQgetvalue(r.r, i, kToken);
        w.claimed.emplace_back(id);
        if (!full || !problem.empty()) continue;
        auto is = [&](int col, const char* want) { return !PQgetisnull(r.r, i, col) && std::strcmp(PQgetvalue(r.r, i, col), want) == 0; };
        const std::string row = "claimed " + std::string(id) + ": ";
        if (!is(kSource, "outbox")) problem = row + "source " + PQgetvalue(r.r, i, kSource);
        else if (!is(kDest, kDestination) || !is(kMsgType, kType)) problem = row + "destination or message type differ";
        else if (PQgetisnull(r.r, i, kEnvelope) || PQgetlength(r.r, i, kEnvelope) < o.envelope_bytes ||
                 !std::strstr(PQgetvalue(r.r, i, kEnvelope), id))
            problem = row + "envelope missing, short or of another message";
        else if (PQgetisnull(r.r, i, kMetadataCol) || !std::strstr(PQgetvalue(r.r, i, kMetadataCol), "tenant-042"))
            problem = row + "metadata missing";
        else if (!PQgetisnull(r.r, i, kStream) || !PQgetisnull(r.r, i, kHandler) || !PQgetisnull(r.r, i, kScope) ||
                 !PQgetisnull(r.r, i, kConsumer) || PQgetisnull(r.r, i, kPartition))
            problem = row + "stream, handler, scope, consumer or partition not as stored";
        else if (!is(kAttempts, "1")) problem = row + "attempts " + PQgetvalue(r.r, i, kAttempts) + ", expected 1";
        else if (PQgetisnull(r.r, i, kToken) || PQgetisnull(r.r, i, kExpiry)) problem = row + "no lease token or expiry";
        else if (std::strcmp(PQgetvalue(r.r, i, kToken), PQgetvalue(r.r, 0, kToken)) != 0)
            problem = row + "lease token differs within one claim";
    }
    ids.push_back('}');
    tokens.push_back('}');
    if (full && problem.empty() && got > 0) {
        const std::string token = PQgetvalue(r.r, 0, kToken);
        if (!w.last_token.empty() && std::stoll(token) <= std::stoll(w.last_token))
            problem = "lease token " + token + " not above the previous claim's " + w.last_token;
        w.last_token = token;
    }
    return problem;
}

// The lease of the rows just claimed must be on record: instance, token, attempts, expiry.
std::string lease_check(Worker& w, const Method& m, const Options& o, const std::string& ids, const std::string& token,
                        int got) {
    const std::string q = "SELECT count(*) FROM " + m.rows_view +
                          " WHERE message_id = ANY ($1::uuid[]) AND lease_instance = $2::uuid AND lease_token = $3::bigint"
                          "   AND attempts = 1 AND lease_expiry > now() + make_interval(secs => $4::int - 60)"
                          "   AND lease_expiry <= now() + make_interval(secs => $4::int) AND processed_at IS NULL";
    const std::string lease = std::to_string(o.lease_seconds);
    const char* values[4] = {ids.c_str(), w.instance.c_str(), token.c_str(), lease.c_str()};
    PgResult r(PQexecParams(w.conn, q.c_str(), 4, nullptr, values, nullptr, nullptr, 0));
    if (PQresultStatus(r.r) != PGRES_TUPLES_OK) return "ERROR: lease check: " + one_line(PQresultErrorMessage(r.r));
    long n = std::atol(PQgetvalue(r.r, 0, 0));
    if (n != got) return "lease check: " + std::to_string(n) + " of " + std::to_string(got) + " claimed rows carry the lease";
    return "";
}

// Transaction 3: complete the claimed ids. Every one must be completed.
std::string complete_step(Worker& w, const Method& m, const std::string& ids, const std::string& tokens, int got,
                          bool full) {
    const char* values[2] = {ids.c_str(), tokens.c_str()};
    PgResult r(PQexecPrepared(w.conn, (m.name + "_complete").c_str(), m.outcomes ? 2 : 1, values, nullptr, nullptr, 0));
    if (PQresultStatus(r.r) != PGRES_TUPLES_OK) return "ERROR: complete: " + one_line(PQresultErrorMessage(r.r));
    if (!m.outcomes) {
        long n = PQntuples(r.r) == 1 ? std::atol(PQgetvalue(r.r, 0, 0)) : -1;
        if (n != got) return "complete said " + std::to_string(n) + " for " + std::to_string(got) + " claimed";
    } else {
        if (PQntuples(r.r) != got) return "complete returned " + std::to_string(PQntuples(r.r)) + " rows for " + std::to_string(got);
        for (int i = 0; i < (full ? got : std::min(got, 1)); ++i)
            if (std::strcmp(PQgetvalue(r.r, i, 1), "completed") != 0)
                return "complete said '" + std::string(PQgetvalue(r.r, i, 1)) + "' for " + PQgetvalue(r.r, i, 0);
    }
    w.completed += got;
    return "";
}

// Claim + complete; `got` is how many went through.
std::string claim_and_complete(Worker& w, const Method& m, const Options& o, bool full, int& got, bool lease = false) {
    std::string ids, tokens;
    std::string e = claim_step(w, m, o, full, ids, tokens, got);
    if (e.empty() && lease && got > 0) e = lease_check(w, m, o, ids, w.last_token, got);
    if (!e.empty() || got == 0) return e;
    return complete_step(w, m, ids, tokens, got, full);
}

// One timed cycle: the three steps, each timed and its server CPU taken from /proc.
std::string timed_cycle(Worker& w, const Method& m, const Options& o, int& got) {
    got = 0;
    std::string ids, tokens;
    auto c0 = process_cpu_seconds(w.backend_pid);
    auto t0 = Clock::now();
    std::string e = store_step(w, m, o.batch, false);
    auto c1 = process_cpu_seconds(w.backend_pid);
    auto t1 = Clock::now();
    if (e.empty()) e = claim_step(w, m, o, false, ids, tokens, got);
    auto c2 = process_cpu_seconds(w.backend_pid);
    auto t2 = Clock::now();
    if (e.empty() && got > 0) e = complete_step(w, m, ids, tokens, got, false);
    auto c3 = process_cpu_seconds(w.backend_pid);
    auto t3 = Clock::now();
    if (!e.empty()) return e;
    const double cpu[4] = {c0, c1, c2, c3};
    const Clock::time_point t[4] = {t0, t1, t2, t3};
    for (int s = 0; s < kSteps; ++s) {
        w.steps.wall_ms[s] += std::chrono::duration<double, std::milli>(t[s + 1] - t[s]).count();
        w.steps.cpu_s[s] = cpu[s] < 0 || cpu[s + 1] < 0 || w.steps.cpu_s[s] < 0 ? -1 : w.steps.cpu_s[s] + cpu[s + 1] - cpu[s];
    }
    w.lat_ms.push_back(std::chrono::duration<double, std::milli>(t3 - t0).count());
    ++w.steps.cycles;
    w.steps.msgs += got;
    w.steps.stored += o.batch;
    if (got == 0) ++w.steps.claims_empty;
    else if (got < o.claim_rows) ++w.steps.claims_short;
    return "";
}

// ---------------------------------------------------------------------------------------------
// Table checks (admin connection)

// The rows of one batch (p_messages text) must be on record exactly as sent, not yet claimed.
std::string content_check(PGconn* admin, const Method& m, const std::string& json, long want) {
    std::string q =
        "SELECT count(*) FROM jsonb_array_elements($1::jsonb) e"
        " JOIN " + m.rows_view + " r ON r.message_id = (e->>'MessageId')::uuid"
        " WHERE r.has_message AND r.has_work AND r.destination = e->>'Destination'"
        "   AND r.message_type = e->>'MessageType' AND r.event_data = e->'Envelope' AND r.metadata = e->'Metadata'"
        "   AND r.scope IS NULL AND r.stream_id IS NULL AND r.stream_seq IS NULL AND r.is_event"
        "   AND r.created_at <= now() AND r.created_at > now() - interval '10 minutes'"
        "   AND r.partition_number = whizbang.partition_of(r.message_id, 10000) AND r.scheduled_for = r.created_at"
        "   AND r.attempts = 0 AND r.lease_instance IS NULL AND r.lease_token IS NULL AND r.lease_expiry IS NULL"
        "   AND r.last_error IS NULL AND r.processed_at IS NULL";
    const char* values[1] = {json.c_str()};
    PgResult r(PQexecParams(admin, q.c_str(), 1, nullptr, values, nullptr, nullptr, 0));
    if (PQresultStatus(r.r) != PGRES_TUPLES_OK) return "content check failed: " + one_line(PQerrorMessage(admin));
    long got = std::atol(PQgetvalue(r.r, 0, 0));
    if (got != want)
        return "content check: " + std::to_string(got) + " of " + std::to_string(want) + " messages of the first batch "
               "on record exactly as sent";
    return "";
}

// Claims and completes until nothing is left (untimed, every row checked); then the tables must
// be empty and every message stored so far must have been handed out exactly once.
std::string drain_and_check(PGconn* admin, const Method& m, const Options& o, Workers& ws) {
    for_each_worker(ws, [&](Worker& w, std::size_t) {
        for (int got = 1; got > 0 && w.error.empty();) {
            std::string e = claim_and_complete(w, m, o, true, got);
            w.note(e);
            if (!e.empty()) break;
        }
    });
    std::vector<std::string> notes;
    std::string p = problems_of(ws);
    if (!p.empty()) notes.push_back(p);
    std::string left = exec_admin(admin, "SELECT count(*) FROM " + m.rows_view);
    if (left != "0") notes.push_back("the tables hold " + left + " messages after the drain");
    std::vector<std::string> handed, stored;
    for (auto& w : ws) {
        handed.insert(handed.end(), w->claimed.begin(), w->claimed.end());
        for (std::size_t i = 0; i < w->next * static_cast<std::size_t>(o.batch); ++i) stored.push_back(uuid_text(w->ids[i]));
    }
    long twice = count_repeats(handed);
    if (twice) notes.push_back(std::to_string(twice) + " messages handed out twice");
    std::sort(stored.begin(), stored.end());
    handed.erase(std::unique(handed.begin(), handed.end()), handed.end());
    if (handed != stored)
        notes.push_back(std::to_string(stored.size()) + " messages stored, " + std::to_string(handed.size()) +
                        " different ones handed out");
    long completed = 0;
    for (auto& w : ws) completed += w->completed;
    if (completed != static_cast<long>(stored.size()))
        notes.push_back(std::to_string(completed) + " completions for " + std::to_string(stored.size()) + " messages");
    std::string out;
    for (auto& n : notes) out += (out.empty() ? "" : "; ") + n;
    return out;
}

// (b)'s claim must find its rows through indexes of its tables: a sequential scan there would
// make the reference a strawman (the cell is then not valid, and its ratios n/a).
std::string plan_note(const Method& m, Worker& w, const Options& o) {
    if (m.native() || m.name.rfind("sql", 0) != 0) return "";
    std::string q = "EXPLAIN (COSTS OFF) EXECUTE " + m.name + "_claim('" + w.instance + "', " +
                    std::to_string(o.claim_rows) + ", " + std::to_string(o.lease_seconds) + ")";
    PgResult r(PQexec(w.conn, q.c_str()));
    std::string plan;
    for (int i = 0; PQresultStatus(r.r) == PGRES_TUPLES_OK && i < PQntuples(r.r); ++i) plan += PQgetvalue(r.r, i, 0);
    if (plan.empty() || plan.find("Seq Scan") != std::string::npos || plan.find("Index") == std::string::npos)
        return "claim plan without an index scan: " + one_line(plan.c_str());
    return "";
}

// ---------------------------------------------------------------------------------------------
// One cell

struct CellSteps {
    std::string method;
    Steps steps;
};

CellResult run_cell(const Options& o, const Method& m, PGconn* admin, Workers& ws, CellSteps& cs) {
    CellResult res;
    res.method = m.name;
    res.label = m.label;
    res.mode = "cycle";
    res.batch = o.batch;
    res.conns = o.conns;
    for (auto& w : ws) w->reset();
    exec_admin(admin, "TRUNCATE " + m.tables);

    // Warm-up, every row checked: the first batch of each client stored and compared with what
    // was sent, then cycles (the first claim's lease checked in the table), then a drain.
    for_each_worker(ws, [&](Worker& w, std::size_t) { w.generate(o.batch, o.warm_cycles); });
    for_each_worker(ws, [&](Worker& w, std::size_t) { w.note(store_step(w, m, o.batch, true)); });
    for (auto& w : ws) {
        std::string e = w->first_problem.empty() ? content_check(admin, m, w->batches[0], o.batch) : w->first_problem;
        if (!e.empty()) { res.check = "warm-up: " + e; return res; }
    }
    std::vector<double> warm_rate(ws.size(), 0);
    for_each_worker(ws, [&](Worker& w, std::size_t i) {
        auto t0 = Clock::now();
        for (int k = 0; k < o.warm_cycles && w.mismatches == 0; ++k) {
            if (k > 0) w.note(store_step(w, m, o.batch, true));
            int got = 0;
            if (w.mismatches == 0) w.note(claim_and_complete(w, m, o, true, got, k == 0));
        }
        double s = seconds_since(t0, Clock::now());
        warm_rate[i] = s > 0 ? o.warm_cycles * o.batch / s : 0;
    });
    std::string warm = drain_and_check(admin, m, o, ws);
    if (!warm.empty()) { res.check = "warm-up: " + warm; return res; }

    // The timed pool: x3 the warm-up rate, at least 4,000 messages/s per connection, capped for
    // memory (about 1.2 KB per message).
    for_each_worker(ws, [&](Worker& w, std::size_t i) {
        double want = std::max(warm_rate[i] * 3.0, 4000.0) * o.seconds + o.batch;
        long n = std::min<long>(std::max<long>(o.max_msgs, o.batch), static_cast<long>(want));
        w.generate(o.batch, std::max<std::size_t>(10, static_cast<std::size_t>(n / o.batch)));
        w.lat_ms.reserve(w.batches.size());
    });
    exec_admin(admin, "CHECKPOINT");

    Window win = timed_window(admin, conns_of(ws), o.seconds, [&](std::size_t i, Clock::time_point deadline) {
        Worker& w = *ws[i];
        while (Clock::now() < deadline) {
            if (w.next >= w.batches.size()) { w.exhausted = true; break; }
            int got = 0;
            std::string problem = timed_cycle(w, m, o, got);
            w.note(problem);
            if (!problem.empty()) break;
            w.timed_msgs += got;
            ++w.timed_calls;
        }
    });
    fill_result(res, ws, win);
    cs = CellSteps{m.name, {}};
    for (auto& w : ws) {
        for (int s = 0; s < kSteps; ++s) {
            cs.steps.wall_ms[s] += w->steps.wall_ms[s];
            cs.steps.cpu_s[s] = cs.steps.cpu_s[s] < 0 || w->steps.cpu_s[s] < 0 ? -1 : cs.steps.cpu_s[s] + w->steps.cpu_s[s];
        }
        cs.steps.cycles += w->steps.cycles;
        cs.steps.msgs += w->steps.msgs;
        cs.steps.stored += w->steps.stored;
        cs.steps.claims_short += w->steps.claims_short;
        cs.steps.claims_empty += w->steps.claims_empty;
    }

    std::vector<std::string> notes;
    std::string plan = plan_note(m, *ws[0], o);
    if (!plan.empty()) notes.push_back(plan);
    for (auto& w : ws)
        if (w->exhausted) {
            notes.push_back("pool ran out after " + fmt("%.2f", res.secs) + " s");
            break;
        }
    std::string after = drain_and_check(admin, m, o, ws);
    if (!after.empty()) notes.push_back(after);
    if (!notes.empty()) {
        res.check.clear();
        for (auto& n : notes) res.check += (res.check.empty() ? "" : "; ") + n;
    }
    res.valid = res.ids > 0 && after.empty() && plan.empty();
    return res;
}

// ---------------------------------------------------------------------------------------------
// Reporting

double median(std::vector<double> v) {
    if (v.empty()) return -1;
    std::sort(v.begin(), v.end());
    return v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

// Per method, the median over its rounds of: wall ms per cycle and server CPU us per completed
// message of each step, messages per claim.
struct StepSummary {
    double wall_ms[kSteps], cpu_us[kSteps];
    double per_claim = -1, short_share = -1;
};

StepSummary summarize(const std::vector<CellSteps>& all, const std::string& method) {
    StepSummary out{};
    std::vector<double> wall[kSteps], cpu[kSteps], per_claim, shorts;
    for (auto& c : all) {
        if (c.method != method || c.steps.cycles == 0 || c.steps.msgs == 0) continue;
        for (int s = 0; s < kSteps; ++s) {
            wall[s].push_back(c.steps.wall_ms[s] / c.steps.cycles);
            if (c.steps.cpu_s[s] >= 0) cpu[s].push_back(c.steps.cpu_s[s] * 1e6 / c.steps.msgs);
        }
        per_claim.push_back(static_cast<double>(c.steps.msgs) / c.steps.cycles);
        shorts.push_back(100.0 * (c.steps.claims_short + c.steps.claims_empty) / c.steps.cycles);
    }
    for (int s = 0; s < kSteps; ++s) {
        out.wall_ms[s] = median(wall[s]);
        out.cpu_us[s] = median(cpu[s]);
    }
    out.per_claim = median(per_claim);
    out.short_share = median(shorts);
    return out;
}

std::string num(double v, const char* f = "%.2f") { return v >= 0 ? fmt(f, v) : std::string("n/a"); }

// Per round, x's figure divided by y's (both measured within the same round, a minute apart at
// most): the median over the rounds and the range, "n/a" without a valid pair.
std::string paired(const std::vector<std::vector<CellResult>>& rounds, const std::string& x, const std::string& y,
                   bool cpu) {
    std::vector<double> q;
    for (auto& round : rounds) {
        const CellResult *a = nullptr, *b = nullptr;
        for (auto& r : round) {
            if (r.method == x && r.valid) a = &r;
            if (r.method == y && r.valid) b = &r;
        }
        if (!a || !b) continue;
        if (!cpu && b->ids_per_s > 0) q.push_back(a->ids_per_s / b->ids_per_s);
        if (cpu && a->cpu_us_per_id > 0 && b->cpu_us_per_id >= 0) q.push_back(b->cpu_us_per_id / a->cpu_us_per_id);
    }
    if (q.empty()) return "n/a";
    std::sort(q.begin(), q.end());
    return fmt("%.2f", median(q)) + (cpu ? "" : "x") + " (" + fmt("%.2f", q.front()) + "-" + fmt("%.2f", q.back()) + ")";
}

void write_markdown(const Options& o, const std::vector<Method>& methods, const std::vector<CellResult>& rs,
                    const std::vector<std::vector<CellResult>>& rounds, const std::vector<CellSteps>& steps,
                    std::ostream& md) {
    md << "### Relay cycle: store " << o.batch << " + claim up to " << o.claim_rows << " + complete, " << o.conns
       << " clients\n\n"
       << "Each client loops three transactions (autocommit): store a batch of " << o.batch << " new messages, claim up "
          "to " << o.claim_rows << " due outbox rows with a " << o.lease_seconds << " s lease, complete the ids it "
          "claimed. A client claims whatever is due, its own messages or the other clients'. Every cell starts from "
          "empty tables (TRUNCATE, which leaves them without planner statistics), runs " << o.warm_cycles
       << " checked warm-up cycles per client and a drain, then CHECKPOINT; autovacuum is off on the measured tables "
          "(a vacuum or analyze landing in some cells and not in others would move the figures more than the "
          "differences measured), so the dead rows of the cell stay for its whole window, as between two autovacuum "
          "runs. The order of the methods is rotated by one each round. "
       << columns_note(o, "msg", "cycle (store + claim + complete)")
       << " msgs = messages completed in the window (stored, claimed and completed). check: warm-up rows verified "
          "(store: id, order, new; claim: every column, the envelope is its message's, one fresh token per claim, "
          "attempts 1, the lease on record; complete: the count or every outcome), the first batch of each client "
          "compared column by column with what was sent; after the warm-up and after the window, a drain, then empty "
          "tables and every stored message handed out exactly once and completed.\n\n"
       << "| method | msgs/s | range msgs/s | cycles/s | p50 ms | p99 ms | CPU us/msg | client % | other % | WAL B/msg | msgs | s | check |\n"
       << "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|\n";
    for (auto& m : methods)
        for (auto& r : rs)
            if (r.method == m.name) cell_row(md, r, false);

    md << "\n#### Where the time goes, per step\n\n"
          "Wall time per cycle of each step as the client saw it (ms, mean over the window's cycles) and the server "
          "backend's CPU time during the step (from /proc around each call) per completed message; median over the "
          "rounds. msgs/claim: messages per claim; short %: claims that returned fewer than "
       << o.claim_rows << " rows (the queue is short: a claim takes what the clients have stored and not yet "
          "claimed).\n\n"
          "| method | store ms | claim ms | complete ms | store CPU us/msg | claim CPU us/msg | complete CPU us/msg | msgs/claim | short % |\n"
          "|---|---:|---:|---:|---:|---:|---:|---:|---:|\n";
    for (auto& m : methods) {
        StepSummary s = summarize(steps, m.name);
        md << "| " << m.label;
        for (int k = 0; k < kSteps; ++k) md << " | " << num(s.wall_ms[k], "%.3f");
        for (int k = 0; k < kSteps; ++k) md << " | " << num(s.cpu_us[k]);
        md << " | " << num(s.per_claim, "%.1f") << " | " << num(s.short_share, "%.0f") << " |\n";
    }

    md << "\n#### Ratios (native divided by the reference: msgs/s; the reference's server CPU and WAL per message "
          "divided by native's, so above 1 favours native)\n\n"
          "First of the medians of the table above; then per round, of the two cells measured in the same round (the "
          "machine's speed drifts over a run more than it does within a round), as the median over the rounds and "
          "the range.\n\n"
          "| ratio | msgs/s | server CPU per message | WAL per message | msgs/s, per round | server CPU, per round |\n"
          "|---|---:|---:|---:|---:|---:|\n";
    for (auto& n : methods) {
        if (!n.native()) continue;
        for (auto& ref : methods) {
            if (ref.native()) continue;
            auto a = find_cell(rs, "cycle", n.name, o.batch);
            auto b = find_cell(rs, "cycle", ref.name, o.batch);
            std::string wal = a && b && a->wal_per_id > 0 ? fmt("%.2f", b->wal_per_id / a->wal_per_id) : std::string("n/a");
            md << "| " << n.name << " / " << ref.name << " | " << ratio_text(a, b) << " | " << cpu_rel(a, b) << " | " << wal
               << " | " << paired(rounds, n.name, ref.name, false) << " | " << paired(rounds, n.name, ref.name, true)
               << " |\n";
        }
    }
    // The strongest baseline: the fastest reference, and the one with the least server CPU.
    const CellResult *fastest = nullptr, *cheapest = nullptr;
    for (auto& ref : methods) {
        auto b = ref.native() ? nullptr : find_cell(rs, "cycle", ref.name, o.batch);
        if (!b) continue;
        if (!fastest || b->ids_per_s > fastest->ids_per_s) fastest = b;
        if (b->cpu_us_per_id >= 0 && (!cheapest || b->cpu_us_per_id < cheapest->cpu_us_per_id)) cheapest = b;
    }
    if (fastest)
        md << "\nStrongest reference in this run: " << fastest->label << " by msgs/s"
           << (cheapest ? ", " + cheapest->label + " by server CPU per message" : std::string()) << ".\n";
}

}  // namespace

int main(int argc, char** argv) {
    Options o = parse_options(argc, argv);
    PGconn* admin = connect_or_die(o.dsn);
    exec_admin(admin, "SET client_min_messages = warning");
    std::vector<Method> methods = load_methods(admin, o.methods);

    // No autovacuum on the measured tables: a vacuum or analyze that lands in some cells and not in
    // others would move the figures by more than the differences measured. Every cell starts
    // from TRUNCATE (no statistics: the planner assumes a small table of unknown size).
    for (auto& m : methods)
        for (auto& t : split(m.tables, ','))
            exec_admin(admin, "ALTER TABLE " + t.substr(t.find_first_not_of(' ')) + " SET (autovacuum_enabled = off)");

    Workers ws;
    IdGenerator instances(false, 0xfeedULL);
    for (int i = 0; i < o.conns; ++i)
        ws.push_back(std::make_unique<Worker>(connect_or_die(o.dsn), 0x9e3779b97f4a7c15ULL * (i + 1), o.envelope_bytes,
                                              uuid_text(instances.next())));
    for (auto& w : ws)
        for (auto& m : methods) {
            prepare_or_die(w->conn, m.name + "_store", m.store_sql);
            prepare_or_die(w->conn, m.name + "_claim", m.claim_sql);
            prepare_or_die(w->conn, m.name + "_complete", m.complete_sql);
        }

    long budget = static_cast<long>(std::ceil(o.retry_budget * methods.size() * o.rounds));
    print_cell_header();
    std::vector<CellResult> measured;
    std::vector<std::vector<CellResult>> rounds(o.rounds);
    std::vector<CellSteps> steps;
    // Rounds interleaved, and the order of the methods rotated by one each round: the first cell
    // of a round, and a cell right after one on the same tables, measured differently in trials.
    for (int round = 1; round <= o.rounds; ++round)
        for (std::size_t k = 0; k < methods.size(); ++k) {
            const Method& m = methods[(k + round - 1) % methods.size()];
            // Each attempt's steps; the ones of the attempt measure_cell keeps are reported.
            std::vector<std::pair<CellResult, CellSteps>> attempts;
            CellResult r = measure_cell(o.retries, o.max_other, budget, "cycle " + m.name, [&] {
                CellSteps cs;
                CellResult a;
                try {
                    a = run_cell(o, m, admin, ws, cs);
                } catch (const std::exception& e) {
                    a = failed_cell(m.name, m.label, "cycle", o.batch, e);
                }
                attempts.emplace_back(a, cs);
                return a;
            });
            for (auto& [a, cs] : attempts)
                if (r.valid && a.valid && a.ids == r.ids && a.secs == r.secs && a.other_cpu_pct == r.other_cpu_pct) {
                    steps.push_back(cs);
                    break;
                }
            print_cell(r, round);
            if (r.valid && !steps.empty() && steps.back().method == m.name) {
                const Steps& s = steps.back().steps;
                std::printf("    steps (ms per cycle / server CPU us per msg): store %.3f / %.2f, claim %.3f / %.2f, "
                            "complete %.3f / %.2f; %.1f msgs per claim\n",
                            s.wall_ms[kStore] / s.cycles, s.cpu_s[kStore] * 1e6 / s.msgs, s.wall_ms[kClaim] / s.cycles,
                            s.cpu_s[kClaim] * 1e6 / s.msgs, s.wall_ms[kComplete] / s.cycles,
                            s.cpu_s[kComplete] * 1e6 / s.msgs, static_cast<double>(s.msgs) / s.cycles);
                std::fflush(stdout);
            }
            measured.push_back(r);
            rounds[round - 1].push_back(r);
        }
    for (auto& m : methods) exec_admin(admin, "TRUNCATE " + m.tables);
    std::vector<CellResult> results = aggregate(measured, o.max_other);

    if (!o.tsv_path.empty()) {
        std::ofstream t(o.tsv_path);
        write_tsv_header(t);
        for (auto& r : results) write_tsv_row(t, r);
    }
    std::ostringstream md;
    write_markdown(o, methods, results, rounds, steps, md);
    if (!o.md_path.empty()) std::ofstream(o.md_path) << md.str();
    else std::printf("\n%s", md.str().c_str());

    for (auto& w : ws) PQfinish(w->conn);
    PQfinish(admin);
    bool any_bad = false;
    for (auto& r : results) any_bad = any_bad || !r.valid;
    return any_bad ? 3 : 0;
}
