// Load driver for the whizbang dedup benchmark (bench/run starts it; see bench/README.md).
//
// For each cell (method x mode x batch size) it opens nothing new: N long-lived connections,
// one thread each, run prepared statements in autocommit (one transaction per call). Every
// payload a timed phase sends is generated before that phase's clock starts, so the figure is
// the server's work plus the wire, not client-side id generation or formatting.
//
// Cell sequence:
//   reset   TRUNCATE the method's table, CHECKPOINT                       (untimed)
//   dup     generate a fixed pool of ids per connection, COPY it in,
//           VACUUM (ANALYZE), CHECKPOINT                                  (untimed)
//   warm-up a few calls with full verification of every returned row   (untimed, calibrates)
//   new     generate a pool sized from the warm-up rate                   (untimed)
//   timed   all threads released together; run until --seconds elapse
//           (all-new stops early if its pool runs out, and says so;
//            all-duplicate cycles through its pool: every id stays a duplicate)
//   check   row count and sum(observation_count) against what was sent  (untimed)
//
// Cells run in --rounds interleaved rounds and the median is reported. The CPU that the
// connections' server backends, the driver and everything else used in a window is read from
// /proc; a window in which other work took more than --max-other % of the cores is measured
// again (--retries, within --retry-budget for the run) and the least disturbed one kept.
//
// Output: a text table on stdout, a TSV (--tsv) and a markdown fragment (--md).
// Connection parameters come from the usual PG* environment variables (or --dsn).

#include "common.h"

namespace {

using namespace bench;

// ---------------------------------------------------------------------------------------------
// Options

struct Options {
    std::vector<std::string> methods{"native", "native1", "plpgsql", "plain", "upsert", "copy"};
    std::vector<int> batches{1, 100, 1000};
    std::vector<std::string> modes{"new", "dup"};
    int conns = 2;
    int rounds = 1;          // each cell this many times, interleaved; the median is reported
    int retries = 1;         // extra attempts for a window disturbed by other work
    double retry_budget = 0.5;  // extra windows in the whole run, as a share of the planned ones
    double max_other = 20;   // % of the cores other work may take before a window is repeated
    double seconds = 3.0;
    long max_ids = 2000000;  // per connection per all-new cell (memory cap)
    long dup_ids = 200000;   // per connection: size of the all-duplicate pool
    std::string uuid_kind = "v7";
    std::string consumer = "bench";
    std::string dsn;
    std::string tsv_path;
    std::string md_path;
    bool skip_native = false;
};

[[noreturn]] void usage(const char* msg) {
    std::fprintf(stderr,
                 "error: %s\n"
                 "usage: driver [--methods=native,native1,plpgsql,plain,upsert,copy] "
                 "[--batches=1,100,1000] [--modes=new,dup] [--conns=2] [--rounds=1] [--retries=1] [--max-other=20] [--retry-budget=0.5] [--seconds=3] "
                 "[--max-ids=2000000] [--dup-ids=200000] [--uuid=v7|v4] [--consumer=bench] "
                 "[--skip-native] [--dsn=CONNINFO] [--tsv=FILE] [--md=FILE]\n",
                 msg);
    std::exit(2);
}

Options parse_options(int argc, char** argv) {
    Options o;
    parse_key_values(argc, argv, [&](const std::string& key, const std::string& val) {
        if (key == "--methods") o.methods = split(val, ',');
        else if (key == "--batches") {
            o.batches.clear();
            for (auto& b : split(val, ',')) o.batches.push_back(std::stoi(b));
        } else if (key == "--modes") o.modes = split(val, ',');
        else if (key == "--conns") o.conns = std::stoi(val);
        else if (key == "--rounds") o.rounds = std::stoi(val);
        else if (key == "--retries") o.retries = std::stoi(val);
        else if (key == "--max-other") o.max_other = std::stod(val);
        else if (key == "--retry-budget") o.retry_budget = std::stod(val);
        else if (key == "--seconds") o.seconds = std::stod(val);
        else if (key == "--max-ids") o.max_ids = std::stol(val);
        else if (key == "--dup-ids") o.dup_ids = std::stol(val);
        else if (key == "--uuid") o.uuid_kind = val;
        else if (key == "--consumer") o.consumer = val;
        else if (key == "--dsn") o.dsn = val;
        else if (key == "--tsv") o.tsv_path = val;
        else if (key == "--md") o.md_path = val;
        else if (key == "--skip-native") o.skip_native = true;
        else return false;
        return true;
    }, usage);
    if (o.conns < 1 || o.rounds < 1 || o.seconds <= 0 || o.max_ids < 1 || o.dup_ids < 1)
        usage("conns, seconds, max-ids and dup-ids must be positive");
    if (o.uuid_kind != "v7" && o.uuid_kind != "v4") usage("--uuid is v7 or v4");
    for (char c : o.consumer)
        if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '-')
            usage("--consumer: letters, digits, '_' and '-' only (it goes into COPY text)");
    for (int b : o.batches)
        if (b < 1) usage("batch sizes must be positive");
    {
        std::vector<std::string> unique;
        for (auto& m : o.methods)
            if (std::find(unique.begin(), unique.end(), m) == unique.end()) unique.push_back(m);
        o.methods = unique;
    }
    if (o.skip_native) {
        std::vector<std::string> kept;
        for (auto& m : o.methods)
            if (m != "native" && m != "native1") kept.push_back(m);
        o.methods = kept;
    }
    return o;
}

// ---------------------------------------------------------------------------------------------
// Payloads (client side, before timing)

// COPY text rows "consumer<TAB>uuid\n".
std::string copy_rows(const std::string& consumer, const Uuid* ids, std::size_t n) {
    std::string s;
    s.reserve(n * (consumer.size() + 38));
    for (std::size_t i = 0; i < n; ++i) {
        s += consumer;
        s.push_back('\t');
        s += uuid_text(ids[i]);
        s.push_back('\n');
    }
    return s;
}

// ---------------------------------------------------------------------------------------------
// Methods

enum class Kind { Prepared, Copy };

struct Method {
    std::string name;
    std::string label;
    std::string table;
    Kind kind = Kind::Prepared;
    bool scalar_param = false;  // one uuid instead of uuid[] (batch 1 only)
    bool counts_dups = false;   // a duplicate increments observation_count
    bool returns_all = true;    // one row per input (else: only the new ones)
    int outcome_col = -1;       // column holding 'new' / 'duplicate', -1 if none
    bool ordered = false;       // rows come back in input order (contract), col 0 = id
    std::string sql;
};

std::map<std::string, Method> method_table() {
    std::map<std::string, Method> m;
    m["native"] = {"native", "native dedup_insert_many", "whizbang.wh_message_deduplication",
                   Kind::Prepared, false, true, true, 1, true,
                   "SELECT message_id, outcome FROM whizbang.dedup_insert_many($1::uuid[], $2::text)"};
    m["native1"] = {"native1", "native dedup_insert (single)", "whizbang.wh_message_deduplication",
                    Kind::Prepared, true, true, true, 0, false,
                    "SELECT whizbang.dedup_insert($1::uuid, $2::text)"};
    m["plpgsql"] = {"plpgsql", "(a) PL/pgSQL loop", "bench.dedup_plpgsql", Kind::Prepared, false,
                    false, true, 1, true,
                    "SELECT message_id, outcome FROM bench.dedup_insert_many_plpgsql($1::uuid[], $2::text)"};
    m["plain"] = {"plain", "(b) plain INSERT..DO NOTHING", "bench.dedup_plain", Kind::Prepared,
                  false, false, false, -1, false,
                  "INSERT INTO bench.dedup_plain AS d (consumer, message_id) "
                  "SELECT $2::text, u.id FROM unnest($1::uuid[]) AS u(id) "
                  "ON CONFLICT (consumer, message_id) DO NOTHING RETURNING d.message_id"};
    m["upsert"] = {"upsert", "(b') plain INSERT..DO UPDATE", "bench.dedup_upsert", Kind::Prepared,
                   false, true, true, 1, false,
                   "INSERT INTO bench.dedup_upsert AS d (consumer, message_id) "
                   "SELECT $2::text, u.id FROM unnest($1::uuid[]) AS u(id) "
                   "ON CONFLICT (consumer, message_id) DO UPDATE "
                   "SET observation_count = d.observation_count + 1 "
                   "RETURNING d.message_id, CASE WHEN d.xmax = 0 THEN 'new' ELSE 'duplicate' END"};
    m["copy"] = {"copy", "(c) COPY", "bench.dedup_copy", Kind::Copy, false, false, false, -1,
                 false, "COPY bench.dedup_copy (consumer, message_id) FROM STDIN"};
    return m;
}

// ---------------------------------------------------------------------------------------------
// One call of a method, with its checks

struct CallCheck {
    bool dup = false;       // expected outcome: duplicate (else new)
    bool full = false;      // verify every row (warm-up) or only counts and the ends (timed)
    const Uuid* ids = nullptr;  // inputs, for the full order check
};

// Returns "" when the call worked and matched expectations, "ERROR: ..." when the server raised
// an error, otherwise a description of the mismatch.
std::string run_call(PGconn* c, const Method& m, const std::string& payload, int batch,
                     const std::string& consumer, const CallCheck& chk) {
    if (m.kind == Kind::Copy) {
        try {
            long n = copy_in(c, m.sql, payload);
            if (n != batch) return "COPY wrote " + std::to_string(n) + " rows, expected " + std::to_string(batch);
        } catch (const std::exception& e) {
            return std::string("ERROR: ") + e.what();
        }
        return "";
    }
    const char* values[2] = {payload.data(), consumer.c_str()};
    int lengths[2] = {static_cast<int>(payload.size()), 0};
    int formats[2] = {1, 0};
    PgResult r(PQexecPrepared(c, m.name.c_str(), 2, values, lengths, formats, 0));
    if (PQresultStatus(r.r) != PGRES_TUPLES_OK)
        return "ERROR: " + one_line(PQresultErrorMessage(r.r));
    int rows = PQntuples(r.r);
    int want = m.returns_all ? batch : (chk.dup ? 0 : batch);
    if (rows != want)
        return "returned " + std::to_string(rows) + " rows, expected " + std::to_string(want);
    if (m.outcome_col < 0 || rows == 0) return "";
    const char* expect = chk.dup ? "duplicate" : "new";
    auto bad_outcome = [&](int i) -> std::string {
        const char* got = PQgetvalue(r.r, i, m.outcome_col);
        if (std::strcmp(got, expect) == 0) return "";
        return "row " + std::to_string(i) + " outcome '" + got + "', expected '" + expect + "'";
    };
    if (!chk.full) {
        std::string e = bad_outcome(0);
        return e.empty() ? bad_outcome(rows - 1) : e;
    }
    for (int i = 0; i < rows; ++i) {
        std::string e = bad_outcome(i);
        if (!e.empty()) return e;
        if (m.ordered && chk.ids) {
            std::string want_id = uuid_text(chk.ids[i]);
            if (want_id != PQgetvalue(r.r, i, 0))
                return "row " + std::to_string(i) + " is id " + PQgetvalue(r.r, i, 0) +
                       ", input order has " + want_id;
        }
    }
    return "";
}

// ---------------------------------------------------------------------------------------------
// Per-connection worker state for one cell

struct Worker {
    PGconn* conn = nullptr;
    IdGenerator gen;
    std::vector<Uuid> ids;         // the cell's pool (warm-up ids first)
    std::vector<std::string> payloads;  // one per batch, parallel to ids
    std::size_t warm_batches = 0;
    std::size_t next = 0;          // next payload to send
    // results of the timed phase
    long timed_ids = 0, timed_calls = 0, sent_ids = 0;
    bool exhausted = false;
    long mismatches = 0;
    std::string first_problem;
    std::string error;
    std::vector<double> lat_ms;

    Worker(PGconn* c, std::uint64_t seed, bool v7) : conn(c), gen(v7, seed) {}

    void reset() {
        ids.clear();
        ids.shrink_to_fit();
        payloads.clear();
        payloads.shrink_to_fit();
        warm_batches = next = 0;
        timed_ids = timed_calls = sent_ids = 0;
        exhausted = false;
        mismatches = 0;
        first_problem.clear();
        error.clear();
        lat_ms.clear();
    }

    // Appends `nbatches` batches of fresh ids and their payloads.
    void generate(const Method& m, int batch, std::size_t nbatches, const std::string& consumer) {
        std::size_t first = ids.size();
        ids.reserve(first + nbatches * batch);
        payloads.reserve(payloads.size() + nbatches);
        for (std::size_t i = 0; i < nbatches * static_cast<std::size_t>(batch); ++i)
            ids.push_back(gen.next());
        for (std::size_t b = 0; b < nbatches; ++b) {
            const Uuid* p = ids.data() + first + b * batch;
            if (m.kind == Kind::Copy) payloads.push_back(copy_rows(consumer, p, batch));
            else if (m.scalar_param) payloads.emplace_back(reinterpret_cast<const char*>(p->data()), 16);
            else payloads.push_back(binary_uuid_array(p, batch));
        }
    }

    void note(const std::string& problem) {
        if (problem.empty()) return;
        ++mismatches;
        if (first_problem.empty()) first_problem = problem;
        if (problem.rfind("ERROR:", 0) == 0 && error.empty()) error = problem;
    }
};

// One cell

CellResult run_cell(const Options& o, const Method& m, const std::string& mode, int batch,
                    PGconn* admin, std::vector<std::unique_ptr<Worker>>& ws) {
    CellResult res;
    res.method = m.name;
    res.label = m.label;
    res.mode = mode;
    res.batch = batch;
    res.conns = o.conns;
    const bool dup = mode == "dup";
    const std::string& consumer = o.consumer;

    for (auto& w : ws) w->reset();
    exec_admin(admin, "TRUNCATE " + m.table);
    exec_admin(admin, "CHECKPOINT");

    const std::size_t warm_batches =
        std::max<std::size_t>(8, std::min<std::size_t>(300, 5000 / batch));

    if (dup) {
        // Fixed pool per connection, the same for every method and batch size so table sizes
        // are comparable; loaded by COPY, vacuumed so hint bits and the visibility map are set.
        std::size_t nb = std::max<std::size_t>(
            warm_batches + 1, (static_cast<std::size_t>(o.dup_ids) + batch - 1) / batch);
        for_each_worker(ws, [&](Worker& w, std::size_t) {
            w.generate(m, batch, nb, consumer);
            w.warm_batches = warm_batches;
            const std::string sql = "COPY " + m.table + " (consumer, message_id) FROM STDIN";
            const std::size_t chunk = 10000;
            try {
                for (std::size_t i = 0; i < w.ids.size(); i += chunk)
                    copy_in(w.conn, sql, copy_rows(consumer, w.ids.data() + i, std::min(chunk, w.ids.size() - i)));
            } catch (const std::exception& e) {
                w.error = std::string("preload: ") + e.what();
            }
        });
        for (auto& w : ws)
            if (!w->error.empty()) { res.check = w->error; return res; }
        exec_admin(admin, "VACUUM (ANALYZE) " + m.table);
        exec_admin(admin, "CHECKPOINT");
    } else {
        for_each_worker(ws, [&](Worker& w, std::size_t) {
            w.generate(m, batch, warm_batches, consumer);
            w.warm_batches = warm_batches;
        });
    }

    // Warm-up: every row checked (outcome, and input order where the contract promises it).
    std::vector<double> warm_rate(ws.size(), 0);
    for_each_worker(ws, [&](Worker& w, std::size_t i) {
        auto t0 = Clock::now();
        for (std::size_t b = 0; b < w.warm_batches && w.error.empty(); ++b) {
            CallCheck chk{dup, true, w.ids.data() + b * batch};
            w.note(run_call(w.conn, m, w.payloads[b], batch, consumer, chk));
            w.sent_ids += batch;
        }
        w.next = w.warm_batches;
        double s = seconds_since(t0, Clock::now());
        warm_rate[i] = s > 0 ? w.warm_batches * batch / s : 0;
    });
    for (auto& w : ws)
        if (!w->error.empty()) { res.check = "warm-up " + w->error; return res; }

    if (!dup) {
        // Size the timed pool from the warm-up rate with a x3 margin and a floor of 60,000 ids/s
        // per connection (a short warm-up can hit a stall and under-estimate), capped for memory.
        for_each_worker(ws, [&](Worker& w, std::size_t i) {
            double want = std::max(warm_rate[i] * 3.0, 60000.0) * o.seconds + batch;
            long cap = std::max<long>(o.max_ids, batch);
            long n = std::min<long>(cap, static_cast<long>(want));
            std::size_t nb = std::max<std::size_t>(10, static_cast<std::size_t>(n / batch));
            w.generate(m, batch, nb, consumer);
        });
        exec_admin(admin, "CHECKPOINT");
    }

    // Timed phase.
    for (auto& w : ws) w->lat_ms.reserve(dup ? 1 << 16 : w->payloads.size());
    std::vector<PGconn*> conns;
    for (auto& w : ws) conns.push_back(w->conn);
    Window win = timed_window(admin, conns, o.seconds, [&](std::size_t i, Clock::time_point deadline) {
        Worker* w = ws[i].get();
        const std::size_t total = w->payloads.size();
        CallCheck chk{dup, false, nullptr};
        for (;;) {
            auto t0 = Clock::now();
            if (t0 >= deadline) break;
            if (w->next >= total) {
                if (!dup) { w->exhausted = true; break; }
                w->next = 0;  // every id of the pool is on record: still all duplicates
            }
            std::string problem = run_call(w->conn, m, w->payloads[w->next], batch, consumer, chk);
            auto t1 = Clock::now();
            ++w->next;
            if (problem.rfind("ERROR:", 0) == 0) { w->note(problem); break; }
            w->note(problem);
            w->lat_ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
            w->timed_ids += batch;
            w->sent_ids += batch;
            ++w->timed_calls;
        }
    });

    std::vector<double> lat;
    std::vector<std::string> problems;
    long mismatches = 0;
    bool exhausted = false;
    res.secs = win.secs;
    for (auto& w : ws) {
        res.ids += w->timed_ids;
        res.calls += w->timed_calls;
        lat.insert(lat.end(), w->lat_ms.begin(), w->lat_ms.end());
        mismatches += w->mismatches;
        exhausted = exhausted || w->exhausted;
        if (!w->first_problem.empty()) problems.push_back(w->first_problem);
    }
    if (res.secs > 0) {
        res.ids_per_s = res.ids / res.secs;
        res.calls_per_s = res.calls / res.secs;
    }
    res.p50 = percentile(lat, 0.50);
    res.p99 = percentile(lat, 0.99);
    if (res.ids > 0) res.wal_per_id = win.wal_bytes / res.ids;
    if (res.ids > 0 && win.backend_cpu_s >= 0) res.cpu_us_per_id = win.backend_cpu_s * 1e6 / res.ids;
    res.client_cpu_pct = win.client_cpu_pct;
    res.other_cpu_pct = win.other_cpu_pct;

    // Table check: what is on record must match what was sent.
    std::vector<std::string> notes;
    if (mismatches) notes.push_back(std::to_string(mismatches) + " bad calls, first: " + problems.front());
    if (exhausted) notes.push_back("pool ran out after " + fmt("%.2f", res.secs) + " s");
    long sent = 0, pool = 0;
    for (auto& w : ws) {
        sent += w->sent_ids;
        pool += static_cast<long>(w->ids.size());
    }
    try {
        PgResult r(PQexec(admin, ("SELECT count(*), coalesce(sum(observation_count), 0) FROM " +
                                  m.table + " WHERE consumer = '" + consumer + "'").c_str()));
        if (PQresultStatus(r.r) != PGRES_TUPLES_OK) throw std::runtime_error(one_line(PQerrorMessage(admin)));
        long rows = std::atol(PQgetvalue(r.r, 0, 0));
        long obs = std::atol(PQgetvalue(r.r, 0, 1));
        long want_rows = dup ? pool : sent;
        long want_obs = dup ? (m.counts_dups ? pool + sent : pool) : sent;
        if (mismatches == 0 && (rows != want_rows || obs != want_obs))
            notes.push_back("table has " + std::to_string(rows) + " rows / observation sum " +
                            std::to_string(obs) + ", expected " + std::to_string(want_rows) +
                            " / " + std::to_string(want_obs));
    } catch (const std::exception& e) {
        notes.push_back(std::string("table check failed: ") + e.what());
    }
    if (!notes.empty()) {
        res.check.clear();
        for (auto& n : notes) res.check += (res.check.empty() ? "" : "; ") + n;
    }
    res.valid = res.ids > 0 && mismatches == 0;
    return res;
}

// ---------------------------------------------------------------------------------------------
// Reporting

const CellResult* find(const std::vector<CellResult>& rs, const std::string& method,
                       const std::string& mode, int batch) {
    for (auto& r : rs)
        if (r.method == method && r.mode == mode && r.batch == batch && r.valid) return &r;
    return nullptr;
}

std::string ratio(const CellResult* a, const CellResult* b) {
    if (!a || !b || b->ids_per_s <= 0) return "n/a";
    return fmt("%.2f", a->ids_per_s / b->ids_per_s) + "x";
}

std::string mode_name(const std::string& m) { return m == "dup" ? "all-duplicate" : "all-new"; }

void write_markdown(const Options& o, const std::vector<CellResult>& rs, std::ostream& md) {
    md << "### Per cell\n\n"
       << "ids/s = ids sent in the timed window / wall seconds, all " << o.conns
       << " connections together; with " << o.rounds << " round(s) per cell, ids/s is the median "
          "and the range is min-max over the rounds (the other columns are from the round nearest "
          "the median; CPU us/id is its own median). Latency is per call. WAL B/id = WAL bytes written during the timed window "
          "/ ids. CPU us/id = CPU time of the " << o.conns << " server backends serving the "
          "connections (from /proc; WAL writer, checkpointer and client not included) / ids: "
          "the server's work per id, which other load on the machine disturbs less than ids/s. "
          "client % / other % = CPU of the driver / of everything else (WAL writer, checkpointer, "
          "autovacuum, other work on the machine) as a share of all cores during the timed window; "
          "a window in which it exceeded " << fmt("%.0f", o.max_other) << " % was measured again (up to "
       << o.retries << " time(s), within a budget for the run of " << fmt("%.0f", 100 * o.retry_budget)
       << " % extra windows) and the least disturbed window kept; a result still above it says "
          "'disturbed'. "
          "check: every warm-up row verified (outcome, input order), every timed call's row "
          "count and end rows verified, table row count and sum(observation_count) verified after "
          "the cell.\n\n"
       << "| method | mode | batch | ids/s | range ids/s | calls/s | p50 ms | p99 ms | CPU us/id | client % | other % | WAL B/id | ids | s | check |\n"
       << "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|\n";
    for (auto& r : rs)
        md << "| " << r.label << " | " << mode_name(r.mode) << " | " << r.batch << " | "
           << (r.ids ? fmt_int(r.ids_per_s) : "-") << " | "
           << (r.ids ? fmt_int(r.min_ids_per_s) + "-" + fmt_int(r.max_ids_per_s) : "-") << " | "
           << (r.ids ? fmt_int(r.calls_per_s) : "-")
           << " | " << fmt("%.3f", r.p50) << " | " << fmt("%.3f", r.p99) << " | "
           << (r.cpu_us_per_id >= 0 ? fmt("%.2f", r.cpu_us_per_id) : std::string("n/a")) << " | "
           << (r.client_cpu_pct >= 0 ? fmt("%.0f", r.client_cpu_pct) : std::string("n/a")) << " | "
           << (r.other_cpu_pct >= 0 ? fmt("%.0f", r.other_cpu_pct) : std::string("n/a")) << " | "
           << fmt("%.0f", r.wal_per_id) << " | " << fmt_int(r.ids) << " | " << fmt("%.2f", r.secs)
           << " | " << r.check << " |\n";

    md << "\n### Ratios (ids/s of native dedup_insert_many divided by the other method's)\n\n"
       << "| mode | batch | native ids/s | (a) PL/pgSQL | (b) plain DO NOTHING | (b') plain DO UPDATE "
          "| (c) COPY | native/(a) | native/(b) | native/(b') | native/(c) |\n"
       << "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n";
    for (auto& mode : o.modes)
        for (int b : o.batches) {
            auto n = find(rs, "native", mode, b);
            auto a = find(rs, "plpgsql", mode, b);
            auto p = find(rs, "plain", mode, b);
            auto u = find(rs, "upsert", mode, b);
            // COPY cannot take duplicates; the all-duplicate rows compare with COPY's all-new
            // figure (the server's ingest ceiling) and say so.
            auto c = find(rs, "copy", "new", b);
            auto v = [](const CellResult* r) { return r ? fmt_int(r->ids_per_s) : std::string("n/a"); };
            md << "| " << mode_name(mode) << " | " << b << " | " << v(n) << " | " << v(a) << " | "
               << v(p) << " | " << v(u) << " | " << v(c) << (mode == "dup" && c ? " (new)" : "")
               << " | " << ratio(n, a) << " | " << ratio(n, p) << " | " << ratio(n, u) << " | "
               << ratio(n, c) << " |\n";
        }

    md << "\n### Server CPU per id relative to native (other method's CPU us/id divided by native's; "
          "above 1 means native needs less server CPU per id)\n\n"
       << "| mode | batch | native CPU us/id | (a) PL/pgSQL | (b) plain DO NOTHING | (b') plain DO UPDATE | (c) COPY |\n"
       << "|---|---:|---:|---:|---:|---:|---:|\n";
    for (auto& mode : o.modes)
        for (int b : o.batches) {
            auto n = find(rs, "native", mode, b);
            auto rel = [&](const CellResult* x) {
                if (!n || !x || n->cpu_us_per_id <= 0 || x->cpu_us_per_id < 0) return std::string("n/a");
                return fmt("%.2f", x->cpu_us_per_id / n->cpu_us_per_id);
            };
            md << "| " << mode_name(mode) << " | " << b << " | "
               << (n && n->cpu_us_per_id >= 0 ? fmt("%.2f", n->cpu_us_per_id) : std::string("n/a")) << " | "
               << rel(find(rs, "plpgsql", mode, b)) << " | " << rel(find(rs, "plain", mode, b)) << " | "
               << rel(find(rs, "upsert", mode, b)) << " | "
               << rel(find(rs, "copy", "new", b)) << (mode == "dup" ? " (new)" : "") << " |\n";
        }

    md << "\n### Targets\n\n| target | mode | measured | verdict |\n|---|---|---:|---|\n";
    auto target = [&](const std::string& what, const std::string& other, int b, double goal) {
        for (auto& mode : o.modes) {
            auto n = find(rs, "native", mode, b);
            auto x = find(rs, other, mode, b);
            std::string verdict = "not measured";
            std::string got = "n/a";
            if (n && x) {
                double q = n->ids_per_s / x->ids_per_s;
                got = fmt("%.2f", q) + "x";
                verdict = q >= goal ? "met" : "missed";
            }
            md << "| " << what << " | " << mode_name(mode) << " | " << got << " | " << verdict << " |\n";
        }
    };
    target("native >= 2x (a) PL/pgSQL loop at batch 100", "plpgsql", 100, 2.0);
    target("native >= 1.2x (b) plain statement at batch 1000", "plain", 1000, 1.2);
    for (int b : o.batches) {
        auto n = find(rs, "native", "new", b);
        auto c = find(rs, "copy", "new", b);
        md << "| native as close to (c) COPY as possible, batch " << b << " | all-new | "
           << (n && c ? fmt("%.0f", 100.0 * n->ids_per_s / c->ids_per_s) + "% of COPY" : "n/a")
           << " | (no fixed bar) |\n";
    }
}

}  // namespace

int main(int argc, char** argv) {
    Options o = parse_options(argc, argv);
    auto all = method_table();
    std::vector<Method> methods;
    for (auto& name : o.methods) {
        auto it = all.find(name);
        if (it == all.end()) usage(("unknown method " + name).c_str());
        methods.push_back(it->second);
    }

    PGconn* admin = connect_or_die(o.dsn);
    std::vector<std::unique_ptr<Worker>> ws;
    for (int i = 0; i < o.conns; ++i)
        ws.push_back(std::make_unique<Worker>(connect_or_die(o.dsn), 0x9e3779b97f4a7c15ULL * (i + 1),
                                              o.uuid_kind == "v7"));

    // Prepare each statement once per connection; a method whose statement does not prepare
    // (e.g. the extension is missing) is reported and skipped.
    std::vector<Method> usable;
    std::vector<CellResult> results;
    for (auto& m : methods) {
        std::string err;
        if (m.kind == Kind::Prepared) {
            unsigned types[2] = {m.scalar_param ? kUuidOid : kUuidArrayOid, kTextOid};
            for (auto& w : ws) {
                PgResult r(PQprepare(w->conn, m.name.c_str(), m.sql.c_str(), 2, types));
                if (PQresultStatus(r.r) != PGRES_COMMAND_OK) {
                    err = one_line(PQresultErrorMessage(r.r));
                    break;
                }
            }
        }
        if (err.empty()) usable.push_back(m);
        else {
            std::fprintf(stderr, "skipping %s: cannot prepare: %s\n", m.name.c_str(), err.c_str());
            CellResult r;
            r.method = m.name;
            r.label = m.label;
            r.mode = "new";
            r.check = "not run: " + err;
            results.push_back(r);
        }
    }

    std::printf("%-30s %-13s %6s %12s %10s %8s %8s %9s %7s %7s %8s  %s\n", "method", "mode", "batch", "ids/s",
                "calls/s", "p50 ms", "p99 ms", "CPU us/id", "client%", "other%", "WAL B/id", "check");
    std::fflush(stdout);
    // Repeating disturbed windows is capped for the whole run, so a machine that stays busy
    // does not stretch the run without end.
    long planned = 0;
    for (auto& mode : o.modes)
        for (int b : o.batches)
            for (auto& m : usable)
                if (!(m.scalar_param && b != 1) && !(m.kind == Kind::Copy && mode == "dup")) ++planned;
    long budget = static_cast<long>(std::ceil(o.retry_budget * planned * o.rounds));
    std::vector<CellResult> measured;
    for (int round = 1; round <= o.rounds; ++round)
    for (auto& mode : o.modes)
        for (int b : o.batches)
            for (auto& m : usable) {
                if (m.scalar_param && b != 1) continue;
                if (m.kind == Kind::Copy && mode == "dup") continue;  // COPY cannot take duplicates
                // A window in which other work took more than --max-other % of the cores is
                // measured again (up to --retries times); the least disturbed attempt is kept.
                std::string what = m.name + " " + mode + " batch " + std::to_string(b);
                CellResult r = measure_cell(o.retries, o.max_other, budget, what, [&] {
                    CellResult a;
                    try {
                        a = run_cell(o, m, mode, b, admin, ws);
                    } catch (const std::exception& e) {
                        a.method = m.name;
                        a.label = m.label;
                        a.mode = mode;
                        a.batch = b;
                        a.check = e.what();
                    }
                    return a;
                });
                std::printf("%-30s %-13s %6d %12s %10s %8.3f %8.3f %9.2f %7.0f %7.0f %8.0f  %s%s\n", r.label.c_str(),
                            mode_name(r.mode).c_str(), r.batch, fmt_int(r.ids_per_s).c_str(),
                            fmt_int(r.calls_per_s).c_str(), r.p50, r.p99, r.cpu_us_per_id, r.client_cpu_pct,
                            r.other_cpu_pct, r.wal_per_id, r.check.c_str(),
                            (" (round " + std::to_string(round) + ", windows " + std::to_string(r.attempts) + ")").c_str());
                std::fflush(stdout);
                measured.push_back(r);
            }
    for (auto& r : aggregate(measured, o.max_other)) results.push_back(r);

    if (!o.tsv_path.empty()) {
        std::ofstream t(o.tsv_path);
        t << "method\tmode\tbatch\tconns\trounds\tmin_ids_per_s\tmax_ids_per_s\tids\tcalls\tseconds\tids_per_s\tcalls_per_s\tp50_ms\tp99_ms\tcpu_us_per_id\tclient_cpu_pct\tother_cpu_pct\twal_bytes_per_id\tcheck\n";
        for (auto& r : results)
            t << r.method << '\t' << r.mode << '\t' << r.batch << '\t' << r.conns << '\t' << r.rounds
              << '\t' << fmt("%.0f", r.min_ids_per_s) << '\t' << fmt("%.0f", r.max_ids_per_s) << '\t' << r.ids << '\t'
              << r.calls << '\t' << fmt("%.3f", r.secs) << '\t' << fmt("%.0f", r.ids_per_s) << '\t'
              << fmt("%.0f", r.calls_per_s) << '\t' << fmt("%.3f", r.p50) << '\t' << fmt("%.3f", r.p99)
              << '\t' << fmt("%.2f", r.cpu_us_per_id) << '\t' << fmt("%.1f", r.client_cpu_pct) << '\t'
              << fmt("%.1f", r.other_cpu_pct) << '\t' << fmt("%.1f", r.wal_per_id) << '\t' << r.check << '\n';
    }
    if (!o.md_path.empty()) {
        std::ofstream md(o.md_path);
        write_markdown(o, results, md);
    } else {
        std::ostringstream md;
        write_markdown(o, results, md);
        std::printf("\n%s", md.str().c_str());
    }

    for (auto& w : ws) PQfinish(w->conn);
    PQfinish(admin);
    bool any_bad = false;
    for (auto& r : results) any_bad = any_bad || !r.valid;
    return any_bad ? 3 : 0;
}
