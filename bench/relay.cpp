// Load driver of the WAL outbox benchmark (bench/relay runs it; issue 32, item 5): the relay
// cycle through the WAL against the table outbox's, same messages, same sink (an NDJSON file
// that is fsynced), 2 clients.
//
//   wal    each client loops one transaction: whizbang.emit_outbox_messages(<batch>); one
//          whizbang-relay (started by this driver, --sink ndjson:FILE) reads the slot
//   floor  the same, but the batch goes through plain pg_logical_emit_message(true,
//          'whizbang.outbox', text) (one call per message, one statement per batch): what the WAL
//          outbox costs without emit_outbox_messages' checks and normalisation
//   paced  as wal, but each client emits one batch every --pace-ms (the second client half a
//          period later): the commit-to-file latency at a load the relay keeps up with (under
//          wal's full load it is mostly the relay's backlog)
//   table  each client loops store_outbox_messages(<batch>) -> claim_work(.., 'outbox', batch)
//          -> append the claimed messages to the file as NDJSON lines + fsync ->
//          complete_outbox_published(ids); three transactions, as bench/outbox's `native`
//
// wal and floor run the emitters for a fixed time, then wait until the relay has written every
// line AND confirmed the slot past the last commit; msgs/s = messages / (first emit .. both).
// So an emitter that outruns the relay is not counted faster than the relay drains. table:
// messages completed in the fixed window / the window.
//
// Everything is checked: the file must hold every message sent (warm-up included) exactly once
// and nothing else; the relay must end with status 0 on SIGTERM; table's tables must be empty
// after the drain.
#include "common.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <unordered_map>

extern char** environ;

namespace {
using namespace bench;

struct Options {
    std::string methods = "wal,table,floor,paced";
    double pace_ms = 25;
    int conns = 2, batch = 100, envelope_bytes = 1000, rounds = 3, warm_batches = 20, lease_seconds = 300;
    double seconds = 5, drain_timeout = 120;
    long max_msgs = 300000;  // pool cap per client (about 1.2 KB each)
    std::string relay = "whizbang-relay", dir = "/tmp", md, slot = "whizbang_outbox", publication = "whizbang_outbox";
};

[[noreturn]] void usage(const char* why) {
    std::fprintf(stderr,
                 "relay_driver: %s\nusage: relay_driver [--methods=wal,table,floor,paced] [--pace-ms=25] [--conns=2] [--batch=100] "
                 "[--envelope-bytes=1000] [--rounds=3] [--seconds=5] [--warm-batches=20] [--max-msgs=300000] "
                 "[--drain-timeout=120] --relay=PATH [--dir=/tmp] [--slot=whizbang_outbox] "
                 "[--publication=whizbang_outbox] [--md=FILE]\n(the database: libpq's PG* environment)\n",
                 why);
    std::exit(2);
}

Options parse_options(int argc, char** argv) {
    Options o;
    for (int i = 1; i < argc; ++i) {
        std::string a = argv[i];
        auto eq = a.find('=');
        if (a.rfind("--", 0) != 0 || eq == std::string::npos) usage(("bad argument " + a).c_str());
        std::string k = a.substr(0, eq), v = a.substr(eq + 1);
        if (k == "--methods") o.methods = v;
        else if (k == "--conns") o.conns = std::stoi(v);
        else if (k == "--pace-ms") o.pace_ms = std::stod(v);
        else if (k == "--batch") o.batch = std::stoi(v);
        else if (k == "--envelope-bytes") o.envelope_bytes = std::stoi(v);
        else if (k == "--rounds") o.rounds = std::stoi(v);
        else if (k == "--seconds") o.seconds = std::stod(v);
        else if (k == "--warm-batches") o.warm_batches = std::stoi(v);
        else if (k == "--max-msgs") o.max_msgs = std::stol(v);
        else if (k == "--drain-timeout") o.drain_timeout = std::stod(v);
        else if (k == "--relay") o.relay = v;
        else if (k == "--dir") o.dir = v;
        else if (k == "--slot") o.slot = v;
        else if (k == "--publication") o.publication = v;
        else if (k == "--md") o.md = v;
        else usage(("unknown option " + k).c_str());
    }
    for (auto& m : split(o.methods, ','))
        if (m != "wal" && m != "floor" && m != "table" && m != "paced") usage(("unknown method " + m).c_str());
    if (o.conns < 1 || o.batch < 1 || o.rounds < 1 || o.seconds <= 0 || o.pace_ms <= 0) usage("counts must be positive");
    return o;
}

// The messages: the same elements as bench/outbox (no StreamId, no ScheduledFor).
constexpr const char* kDestination = "orders.order-placed";
constexpr const char* kType = "Orders.Contracts.OrderPlaced, Orders.Contracts";
constexpr const char* kMetadata = "{\"TenantId\":\"tenant-042\",\"Transport\":\"rabbitmq\",\"Attempt\":1}";

std::string element(const std::string& id, const std::string& envelope) {
    std::string s;
    s.reserve(envelope.size() + 250);
    s += "{\"MessageId\":\"" + id + "\",\"Destination\":\"" + kDestination + "\",\"MessageType\":\"" + kType +
         "\",\"Envelope\":" + envelope + ",\"Metadata\":" + kMetadata + ",\"IsEvent\":true}";
    return s;
}

// Statements. The emitting ones also return the insert position after the batch's messages:
// the transaction's commit record ends past it, so a slot confirmed past the largest of them
// has been confirmed past every commit (the relay confirms whole transactions).
const char* kEmitSql =
    "SELECT count(*) FILTER (WHERE emitted), pg_catalog.pg_current_wal_insert_lsn() "
    "FROM whizbang.emit_outbox_messages($1::jsonb)";
const char* kFloorSql =
    "SELECT count(pg_catalog.pg_logical_emit_message(true, 'whizbang.outbox', m)), pg_catalog.pg_current_wal_insert_lsn() "
    "FROM pg_catalog.unnest(pg_catalog.string_to_array($1::text, E'\\n')) m";
const char* kStoreSql = "SELECT count(*) FILTER (WHERE was_newly_created) FROM whizbang.store_outbox_messages($1::jsonb)";
const char* kClaimSql =
    "SELECT message_id, destination, message_type, envelope, metadata FROM whizbang.claim_work($1::uuid, 'outbox', $2::int, $3::int)";
const char* kCompleteSql = "SELECT whizbang.complete_outbox_published($1::uuid[])";
// (Since 0.14.0 the work state lives in wh_outbox's own rows: there is no wh_outbox_work to empty.)
const char* kTables = "whizbang.wh_outbox, whizbang.wh_outbox_streams, whizbang.wh_outbox_preleased";

std::uint64_t parse_lsn(const char* s) {
    unsigned long hi = 0, lo = 0;
    if (std::sscanf(s, "%lx/%lx", &hi, &lo) != 2) throw std::runtime_error(std::string("not an LSN: ") + s);
    return (static_cast<std::uint64_t>(hi) << 32) | lo;
}

std::uint64_t insert_lsn(PGconn* admin) { return parse_lsn(exec_admin(admin, "SELECT pg_catalog.pg_current_wal_insert_lsn()").c_str()); }

// ---------------------------------------------------------------------------------------------
// Clients

struct Worker {
    PGconn* conn;
    int backend_pid;
    MessageFactory factory;
    std::string instance;                       // p_instance_id of table's claims
    std::vector<std::string> batches;           // the statement's parameter, per batch
    std::vector<std::string> ids;               // message ids, batch by batch
    std::vector<Clock::time_point> committed;   // when each batch's COMMIT returned (wal, floor)
    std::size_t next = 0;                       // next batch to send
    std::size_t timed_from = 0;                 // first batch of the timed window
    long timed_msgs = 0;                        // table: completed in the window
    std::uint64_t last_lsn = 0;                 // wal, floor: insert position after the last batch
    bool exhausted = false;
    std::string problem;
    int sink_fd = -1;                           // table: the NDJSON file, O_APPEND
    std::vector<std::string> written;           // table: ids this client wrote to the file

    Worker(PGconn* c, std::uint64_t seed, int envelope_bytes, std::string inst)
        : conn(c), backend_pid(PQbackendPID(c)), factory(seed, envelope_bytes), instance(std::move(inst)) {}

    void reset() {
        batches.clear();
        ids.clear();
        committed.clear();
        next = timed_from = 0;
        timed_msgs = 0;
        last_lsn = 0;
        exhausted = false;
        problem.clear();
        written.clear();
    }

    // Appends n batches: a JSON array (wal, table) or the elements one per line (floor).
    void generate(const std::string& method, int batch, std::size_t n) {
        for (std::size_t k = 0; k < n; ++k) {
            const std::string ts = now_text();
            std::string p = method == "floor" ? "" : "[";
            for (int i = 0; i < batch; ++i) {
                Uuid u = factory.next_id();
                std::string id = uuid_text(u);
                if (i) p.push_back(method == "floor" ? '\n' : ',');
                p += element(id, factory.envelope(u, ts));
                ids.push_back(std::move(id));
            }
            if (method != "floor") p.push_back(']');
            batches.push_back(std::move(p));
        }
        committed.resize(batches.size());
    }

    void note(const std::string& p) {
        if (!p.empty() && problem.empty()) problem = p;
    }
};
using Workers = std::vector<std::unique_ptr<Worker>>;

// wal / floor: one transaction (autocommit) emitting batch `next`.
std::string emit_step(Worker& w, const std::string& method, int batch) {
    const char* v[1] = {w.batches[w.next].c_str()};
    PgResult r(PQexecPrepared(w.conn, method == "floor" ? "floor" : "wal", 1, v, nullptr, nullptr, 0));
    auto t = Clock::now();
    if (PQresultStatus(r.r) != PGRES_TUPLES_OK) return "ERROR: " + method + ": " + one_line(PQresultErrorMessage(r.r));
    w.committed[w.next] = t;
    ++w.next;
    if (std::atol(PQgetvalue(r.r, 0, 0)) != batch) return method + " emitted " + std::string(PQgetvalue(r.r, 0, 0)) + " of " + std::to_string(batch);
    w.last_lsn = std::max(w.last_lsn, parse_lsn(PQgetvalue(r.r, 0, 1)));
    return "";
}

// table, transaction 1: store batch `next`.
std::string store_step(Worker& w, int batch) {
    const char* v[1] = {w.batches[w.next].c_str()};
    PgResult r(PQexecPrepared(w.conn, "store", 1, v, nullptr, nullptr, 0));
    if (PQresultStatus(r.r) != PGRES_TUPLES_OK) return "ERROR: store: " + one_line(PQresultErrorMessage(r.r));
    ++w.next;
    if (std::atol(PQgetvalue(r.r, 0, 0)) != batch) return "store created " + std::string(PQgetvalue(r.r, 0, 0)) + " of " + std::to_string(batch);
    return "";
}

// table, transactions 2 and 3 with the sink between them: claim, append the claimed messages
// to the file as NDJSON lines and fsync it (what the relay's ndjson sink does before it
// confirms), complete the ids. `got`: messages completed.
std::string claim_publish_complete(Worker& w, const Options& o, int& got) {
    got = 0;
    const std::string rows = std::to_string(o.batch), lease = std::to_string(o.lease_seconds);
    const char* v[3] = {w.instance.c_str(), rows.c_str(), lease.c_str()};
    PgResult r(PQexecPrepared(w.conn, "claim", 3, v, nullptr, nullptr, 0));
    if (PQresultStatus(r.r) != PGRES_TUPLES_OK) return "ERROR: claim: " + one_line(PQresultErrorMessage(r.r));
    const int n = PQntuples(r.r);
    if (n == 0) return "";
    std::string lines, ids = "{";
    lines.reserve(static_cast<std::size_t>(n) * (o.envelope_bytes + 300));
    for (int i = 0; i < n; ++i) {
        const char* id = PQgetvalue(r.r, i, 0);
        lines += "{\"MessageId\":\"";
        lines += id;
        lines += "\",\"Destination\":\"";
        lines += PQgetvalue(r.r, i, 1);
        lines += "\",\"MessageType\":\"";
        lines += PQgetvalue(r.r, i, 2);
        lines += "\",\"Envelope\":";
        lines += PQgetvalue(r.r, i, 3);
        lines += ",\"Metadata\":";
        lines += PQgetisnull(r.r, i, 4) ? "null" : PQgetvalue(r.r, i, 4);
        lines += "}\n";
        if (i) ids.push_back(',');
        ids += id;
        w.written.emplace_back(id);
    }
    ids.push_back('}');
    for (std::size_t off = 0; off < lines.size();) {
        ssize_t k = ::write(w.sink_fd, lines.data() + off, lines.size() - off);
        if (k < 0) return std::string("write to the sink file: ") + std::strerror(errno);
        off += static_cast<std::size_t>(k);
    }
    if (::fsync(w.sink_fd) != 0) return std::string("fsync of the sink file: ") + std::strerror(errno);
    const char* cv[1] = {ids.c_str()};
    PgResult c(PQexecPrepared(w.conn, "complete", 1, cv, nullptr, nullptr, 0));
    if (PQresultStatus(c.r) != PGRES_TUPLES_OK) return "ERROR: complete: " + one_line(PQresultErrorMessage(c.r));
    if (std::atoi(PQgetvalue(c.r, 0, 0)) != n) return "complete answered " + std::string(PQgetvalue(c.r, 0, 0)) + " for " + std::to_string(n);
    got = n;
    return "";
}

// ---------------------------------------------------------------------------------------------
// The relay process and the file it writes

class RelayProcess {
public:
    RelayProcess(const Options& o, const std::string& sink_path, const std::string& log_path) : log_(log_path) {
        posix_spawn_file_actions_t fa;
        posix_spawn_file_actions_init(&fa);
        posix_spawn_file_actions_addopen(&fa, 1, log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
        posix_spawn_file_actions_adddup2(&fa, 1, 2);
        const std::string sink = "ndjson:" + sink_path;
        // --status-interval 1: between flushes the relay reports its position at least every
        // second (it reports at once after each flush anyway).
        std::vector<std::string> args{o.relay, "--slot", o.slot, "--publication", o.publication, "--sink", sink, "--status-interval", "1"};
        std::vector<char*> argv;
        for (auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
        argv.push_back(nullptr);
        int rc = posix_spawnp(&pid_, o.relay.c_str(), &fa, nullptr, argv.data(), environ);
        posix_spawn_file_actions_destroy(&fa);
        if (rc != 0) throw std::runtime_error("cannot start " + o.relay + ": " + std::strerror(rc));
        // Streaming once its log says so; a relay that ended instead is a failure.
        auto until = Clock::now() + std::chrono::seconds(20);
        while (log_text().find("streaming slot") == std::string::npos) {
            int st = 0;
            if (waitpid(pid_, &st, WNOHANG) == pid_) {
                pid_ = -1;
                throw std::runtime_error("whizbang-relay ended at its start: " + one_line(log_text().c_str()));
            }
            if (Clock::now() > until) throw std::runtime_error("whizbang-relay did not start streaming in 20 s");
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
        }
    }
    ~RelayProcess() {
        if (pid_ > 0) {
            kill(pid_, SIGKILL);
            waitpid(pid_, nullptr, 0);
        }
    }
    int pid() const { return pid_; }
    std::string log_text() const {
        std::ifstream f(log_);
        std::stringstream s;
        s << f.rdbuf();
        return s.str();
    }
    // SIGTERM; "" when it ended with status 0, else what happened.
    std::string stop() {
        if (pid_ <= 0) return "relay not running";
        kill(pid_, SIGTERM);
        int st = 0;
        waitpid(pid_, &st, 0);
        pid_ = -1;
        if (WIFEXITED(st) && WEXITSTATUS(st) == 0) return "";
        return "whizbang-relay ended with " + std::string(WIFEXITED(st) ? "status " + std::to_string(WEXITSTATUS(st)) : "a signal") +
               ": " + one_line(log_text().c_str());
    }

private:
    std::string log_;
    pid_t pid_ = -1;
};

// Follows the file the relay appends to, reading what is new every millisecond: for each
// complete line, the message id and when the line was first seen here. That is when the
// relay's write() had made it visible, which is at or before its fsync (the relay confirms
// after the fsync).
class Tail {
public:
    struct Line {
        std::string id;
        Clock::time_point seen;
        std::size_t bytes;
    };
    explicit Tail(std::string path) : path_(std::move(path)) {
        thread_ = std::thread([this] { loop(); });
    }
    ~Tail() { finish(); }
    void finish() {
        stop_ = true;
        if (thread_.joinable()) thread_.join();
    }
    std::size_t count() const { return count_.load(); }
    const std::vector<Line>& lines() const { return lines_; }  // after finish()
    long unparsable() const { return unparsable_; }

private:
    void loop() {
        int fd = -1;
        std::string partial;
        char buf[1 << 16];
        while (true) {
            const bool last = stop_.load();  // one more read after the stop
            if (fd < 0) fd = ::open(path_.c_str(), O_RDONLY);
            if (fd >= 0) {
                ssize_t k;
                while ((k = ::read(fd, buf, sizeof buf)) > 0) {
                    const auto now = Clock::now();
                    partial.append(buf, static_cast<std::size_t>(k));
                    std::size_t start = 0, nl;
                    while ((nl = partial.find('\n', start)) != std::string::npos) {
                        take(partial.data() + start, nl - start, now);
                        start = nl + 1;
                    }
                    partial.erase(0, start);
                }
            }
            if (last) break;
            std::this_thread::sleep_for(std::chrono::milliseconds(1));
        }
        if (fd >= 0) ::close(fd);
    }
    void take(const char* p, std::size_t n, Clock::time_point now) {
        static const std::string key = "\"MessageId\":\"";
        std::string_view line(p, n);
        auto at = line.find(key);
        if (at == std::string_view::npos || at + key.size() + 36 > n) {
            ++unparsable_;
        } else {
            lines_.push_back({std::string(line.substr(at + key.size(), 36)), now, n});
        }
        count_.store(lines_.size() + unparsable_);
    }

    std::string path_;
    std::thread thread_;
    std::atomic<bool> stop_{false};
    std::atomic<std::size_t> count_{0};
    std::vector<Line> lines_;
    long unparsable_ = 0;
};

// Every id of `expected` exactly once among `got`, nothing else; "" or what is wrong.
std::string exactly_once(const std::vector<std::string>& expected, const std::vector<std::string>& got, long unparsable) {
    std::unordered_map<std::string, int> seen;
    seen.reserve(expected.size() * 2);
    for (auto& id : expected) seen.emplace(id, 0);
    long unknown = 0, dup = 0, missing = 0;
    for (auto& id : got) {
        auto it = seen.find(id);
        if (it == seen.end()) ++unknown;
        else if (++it->second > 1) ++dup;
    }
    for (auto& [id, n] : seen)
        if (n == 0) ++missing;
    if (!unknown && !dup && !missing && !unparsable) return "";
    return "sink file: " + std::to_string(missing) + " missing, " + std::to_string(dup) + " duplicates, " + std::to_string(unknown) +
           " unknown, " + std::to_string(unparsable) + " unparsable of " + std::to_string(expected.size()) + " messages";
}

// ---------------------------------------------------------------------------------------------
// A cell: one method, one round

struct Cell {
    std::string method;
    int round = 0;
    long msgs = 0;                    // timed messages (wal, floor: emitted and drained; table: completed)
    double emit_s = 0;                // emitters' window (table: the window)
    double total_s = 0;               // first emit to drained (table: the window)
    double file_s = -1, confirm_s = -1;  // first emit to the last line seen / the slot confirmed
    double msgs_per_s = 0, emit_per_s = 0;
    double wal_per_msg = -1, payload = -1;
    double p50 = -1, p99 = -1, pmax = -1;
    // CPU us per message over first emit .. drained: the clients' backends, the walsender, the
    // relay, this driver (with its file-tail thread), and the rest of the machine.
    double cpu_backends = -1, cpu_walsender = -1, cpu_relay = -1, cpu_driver = -1, cpu_other = -1;
    bool exhausted = false, valid = false;
    std::string check = "ok";
};

struct CpuMark {
    double backends, walsender, relay, driver, machine;
};

CpuMark cpu_mark(const Workers& ws, int walsender, int relay) {
    CpuMark m{0, -1, -1, self_cpu_seconds(), machine_busy_seconds()};
    for (auto& w : ws) {
        double c = process_cpu_seconds(w->backend_pid);
        m.backends = c < 0 || m.backends < 0 ? -1 : m.backends + c;
    }
    if (walsender > 0) m.walsender = process_cpu_seconds(walsender);
    if (relay > 0) m.relay = process_cpu_seconds(relay);
    return m;
}

void fill_cpu(Cell& c, const CpuMark& a, const CpuMark& b) {
    if (c.msgs <= 0) return;
    auto per = [&](double x, double y) { return x < 0 || y < 0 ? -1 : (y - x) * 1e6 / c.msgs; };
    c.cpu_backends = per(a.backends, b.backends);
    c.cpu_walsender = per(a.walsender, b.walsender);
    c.cpu_relay = per(a.relay, b.relay);
    c.cpu_driver = per(a.driver, b.driver);
    double all = per(a.machine, b.machine);
    if (all >= 0) {
        double own = std::max(0.0, c.cpu_backends) + std::max(0.0, c.cpu_walsender) + std::max(0.0, c.cpu_relay) +
                     std::max(0.0, c.cpu_driver);
        c.cpu_other = std::max(0.0, all - own);
    }
}

std::size_t pool_batches(const Options& o, double warm_rate) {
    double want = std::max(warm_rate * 3.0, 10000.0) * o.seconds + o.batch;
    long n = std::min<long>(std::max<long>(o.max_msgs, o.batch), static_cast<long>(want));
    return std::max<std::size_t>(10, static_cast<std::size_t>(n / o.batch));
}

// Runs every client's function at once and returns when all are done.
void run_all(Workers& ws, const std::function<void(Worker&)>& f) {
    std::vector<std::thread> ts;
    for (auto& w : ws) ts.emplace_back([&f, &w] { f(*w); });
    for (auto& t : ts) t.join();
}

std::string first_problem(const Workers& ws) {
    for (auto& w : ws)
        if (!w->problem.empty()) return w->problem;
    return "";
}

Cell run_relay_cell(const Options& o, const std::string& method, int round, PGconn* admin, Workers& ws) {
    Cell c;
    c.method = method;
    c.round = round;
    const std::string base = o.dir + "/" + method + "-" + std::to_string(round);
    const std::string file = base + ".ndjson";
    ::unlink(file.c_str());
    for (auto& w : ws) w->reset();

    // The slot must hold nothing from before: a message of an earlier cell would land in this
    // file.
    exec_admin(admin, "SELECT pg_catalog.pg_replication_slot_advance('" + o.slot + "', pg_catalog.pg_current_wal_lsn())");
    RelayProcess relay(o, file, base + ".log");
    Tail tail(file);
    int walsender = 0;
    for (int k = 0; k < 200 && walsender <= 0; ++k) {
        walsender = std::atoi(exec_admin(admin, "SELECT coalesce((SELECT pid FROM pg_catalog.pg_stat_replication WHERE pid IS NOT NULL "
                                                "ORDER BY backend_start DESC LIMIT 1), 0)").c_str());
        if (walsender <= 0) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }

    // Warm-up, checked like the window: the emitters' rate sizes the pool.
    std::vector<double> warm_rate(ws.size());
    for (auto& w : ws) w->generate(method, o.batch, static_cast<std::size_t>(o.warm_batches));
    run_all(ws, [&](Worker& w) {
        while (w.next < w.batches.size() && w.problem.empty()) w.note(emit_step(w, method, o.batch));
        w.timed_from = w.next;
    });
    // The rate per client, from the warm-up's commit times.
    for (std::size_t k = 0; k < ws.size(); ++k) {
        auto& w = *ws[k];
        if (w.next >= 2) {
            double s = seconds_since(w.committed[0], w.committed[w.next - 1]);
            warm_rate[k] = s > 0 ? (w.next - 1) * o.batch / s : 0;
        }
    }
    if (!first_problem(ws).empty()) throw std::runtime_error("warm-up: " + first_problem(ws));
    std::size_t warm_total = 0;
    for (auto& w : ws) warm_total += w->ids.size();
    auto until = Clock::now() + std::chrono::duration<double>(o.drain_timeout);
    while (tail.count() < warm_total && Clock::now() < until) std::this_thread::sleep_for(std::chrono::milliseconds(2));
    if (tail.count() < warm_total) throw std::runtime_error("warm-up: the relay wrote " + std::to_string(tail.count()) + " of " + std::to_string(warm_total) + " lines");

    for (std::size_t k = 0; k < ws.size(); ++k) ws[k]->generate(method, o.batch, pool_batches(o, warm_rate[k]));
    // Which client and batch each id is, for the latency.
    std::unordered_map<std::string, std::pair<std::uint32_t, std::uint32_t>> where;
    for (std::size_t k = 0; k < ws.size(); ++k) {
        auto& w = *ws[k];
        where.reserve(where.size() + w.ids.size());
        for (std::size_t j = w.timed_from * o.batch; j < w.ids.size(); ++j)
            where.emplace(w.ids[j], std::make_pair(static_cast<std::uint32_t>(k), static_cast<std::uint32_t>(j / o.batch)));
    }
    exec_admin(admin, "CHECKPOINT");
    const std::size_t lines_before = tail.count();

    // The window: all clients start together, emit until the deadline, then the relay drains.
    StartGate gate;
    const std::uint64_t lsn0 = insert_lsn(admin);
    const CpuMark cpu0 = cpu_mark(ws, walsender, relay.pid());
    Clock::time_point t0;
    std::vector<std::thread> ts;
    const bool paced = method == "paced";
    for (std::size_t k = 0; k < ws.size(); ++k)
        ts.emplace_back([&, k, wp = ws[k].get()] {
            gate.arrive_and_wait();
            auto deadline = t0 + std::chrono::duration<double>(o.seconds);
            // paced: batch n of client k at t0 + (n + k / conns) periods
            const auto period = std::chrono::duration<double, std::milli>(o.pace_ms);
            for (long n = 0; Clock::now() < deadline && wp->problem.empty(); ++n) {
                if (wp->next >= wp->batches.size()) {
                    wp->exhausted = true;
                    break;
                }
                if (paced) {
                    auto at = t0 + std::chrono::duration_cast<Clock::duration>(period * (n + static_cast<double>(k) / ws.size()));
                    if (at >= deadline) break;
                    std::this_thread::sleep_until(at);
                }
                wp->note(emit_step(*wp, method, o.batch));
            }
        });
    gate.wait_for(static_cast<int>(ws.size()));
    t0 = Clock::now();
    gate.open();
    for (auto& t : ts) t.join();
    const auto t_stop = Clock::now();
    const std::uint64_t lsn1 = insert_lsn(admin);

    std::size_t sent = 0;
    std::uint64_t last_lsn = 0;
    for (auto& w : ws) {
        sent += (w->next - w->timed_from) * o.batch;
        last_lsn = std::max(last_lsn, w->last_lsn);
        c.exhausted = c.exhausted || w->exhausted;
    }
    Clock::time_point t_file{}, t_conf{};
    until = Clock::now() + std::chrono::duration<double>(o.drain_timeout);
    while ((t_file == Clock::time_point{} || t_conf == Clock::time_point{}) && Clock::now() < until) {
        if (t_file == Clock::time_point{} && tail.count() >= lines_before + sent) t_file = Clock::now();
        if (t_conf == Clock::time_point{}) {
            std::string s = exec_admin(admin, "SELECT confirmed_flush_lsn FROM pg_catalog.pg_replication_slots WHERE slot_name = '" + o.slot + "'");
            if (!s.empty() && parse_lsn(s.c_str()) > last_lsn) t_conf = Clock::now();
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    const CpuMark cpu1 = cpu_mark(ws, walsender, relay.pid());
    std::string stopped = relay.stop();
    tail.finish();

    std::vector<std::string> notes;
    if (!first_problem(ws).empty()) notes.push_back(first_problem(ws));
    if (t_file == Clock::time_point{} || t_conf == Clock::time_point{})
        notes.push_back("not drained in " + fmt("%.0f", o.drain_timeout) + " s");
    if (!stopped.empty()) notes.push_back(stopped);
    std::vector<std::string> expected, got;
    for (auto& w : ws) expected.insert(expected.end(), w->ids.begin(), w->ids.begin() + static_cast<long>(w->next * o.batch));
    for (auto& l : tail.lines()) got.push_back(l.id);
    std::string once = exactly_once(expected, got, tail.unparsable());
    if (!once.empty()) notes.push_back(once);
    if (c.exhausted) notes.push_back("pool ran out before the deadline");

    c.msgs = static_cast<long>(sent);
    c.emit_s = seconds_since(t0, t_stop);
    if (t_file != Clock::time_point{}) c.file_s = seconds_since(t0, t_file);
    if (t_conf != Clock::time_point{}) c.confirm_s = seconds_since(t0, t_conf);
    c.total_s = std::max(c.file_s, c.confirm_s);
    if (c.total_s > 0) c.msgs_per_s = c.msgs / c.total_s;
    if (c.emit_s > 0) c.emit_per_s = c.msgs / c.emit_s;
    if (c.msgs > 0) c.wal_per_msg = static_cast<double>(lsn1 - lsn0) / c.msgs;
    fill_cpu(c, cpu0, cpu1);
    std::vector<double> lat;
    double bytes = 0;
    long nbytes = 0;
    for (auto& l : tail.lines()) {
        auto it = where.find(l.id);
        if (it == where.end()) continue;
        auto& w = *ws[it->second.first];
        if (it->second.second >= w.next) continue;
        lat.push_back(std::chrono::duration<double, std::milli>(l.seen - w.committed[it->second.second]).count());
        bytes += static_cast<double>(l.bytes);
        ++nbytes;
    }
    if (nbytes) c.payload = bytes / nbytes;
    if (!lat.empty()) {
        c.pmax = *std::max_element(lat.begin(), lat.end());
        c.p50 = percentile(lat, 0.50);
        c.p99 = percentile(lat, 0.99);
    }
    c.valid = notes.empty() && c.msgs > 0;
    if (!notes.empty()) {
        c.check.clear();
        for (auto& n : notes) c.check += (c.check.empty() ? "" : "; ") + n;
    }
    if (c.valid) ::unlink(file.c_str());
    return c;
}

// table: drains what is stored and not completed, on one client.
std::string drain_table(const Options& o, Worker& w) {
    for (int guard = 0; guard < 1000000; ++guard) {
        int got = 0;
        std::string p = claim_publish_complete(w, o, got);
        if (!p.empty()) return p;
        if (got == 0) return "";
    }
    return "drain did not end";
}

Cell run_table_cell(const Options& o, int round, PGconn* admin, Workers& ws) {
    Cell c;
    c.method = "table";
    c.round = round;
    const std::string file = o.dir + "/table-" + std::to_string(round) + ".ndjson";
    ::unlink(file.c_str());
    for (auto& w : ws) {
        w->reset();
        w->sink_fd = ::open(file.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0640);
        if (w->sink_fd < 0) throw std::runtime_error("cannot open " + file + ": " + std::strerror(errno));
    }
    exec_admin(admin, std::string("TRUNCATE ") + kTables);

    std::vector<double> warm_rate(ws.size());
    for (auto& w : ws) w->generate("table", o.batch, static_cast<std::size_t>(o.warm_batches));
    {
        std::vector<std::thread> ts;
        for (std::size_t k = 0; k < ws.size(); ++k)
            ts.emplace_back([&, k] {
                Worker& w = *ws[k];
                auto t0 = Clock::now();
                long done = 0;
                while (w.next < w.batches.size() && w.problem.empty()) {
                    w.note(store_step(w, o.batch));
                    int got = 0;
                    if (w.problem.empty()) w.note(claim_publish_complete(w, o, got));
                    done += got;
                }
                double s = seconds_since(t0, Clock::now());
                warm_rate[k] = s > 0 ? done / s : 0;
            });
        for (auto& t : ts) t.join();
    }
    if (!first_problem(ws).empty()) throw std::runtime_error("warm-up: " + first_problem(ws));
    std::string d = drain_table(o, *ws[0]);
    if (!d.empty()) throw std::runtime_error("warm-up drain: " + d);
    for (std::size_t k = 0; k < ws.size(); ++k) {
        ws[k]->timed_from = ws[k]->next;
        ws[k]->generate("table", o.batch, pool_batches(o, warm_rate[k]));
    }
    exec_admin(admin, "CHECKPOINT");

    StartGate gate;
    const std::uint64_t lsn0 = insert_lsn(admin);
    const CpuMark cpu0 = cpu_mark(ws, 0, 0);
    Clock::time_point t0;
    std::vector<std::thread> ts;
    for (auto& w : ws)
        ts.emplace_back([&, wp = w.get()] {
            gate.arrive_and_wait();
            auto deadline = t0 + std::chrono::duration<double>(o.seconds);
            while (Clock::now() < deadline && wp->problem.empty()) {
                if (wp->next >= wp->batches.size()) {
                    wp->exhausted = true;
                    break;
                }
                wp->note(store_step(*wp, o.batch));
                int got = 0;
                if (wp->problem.empty()) wp->note(claim_publish_complete(*wp, o, got));
                wp->timed_msgs += got;
            }
        });
    gate.wait_for(static_cast<int>(ws.size()));
    t0 = Clock::now();
    gate.open();
    for (auto& t : ts) t.join();
    const auto t_stop = Clock::now();
    const std::uint64_t lsn1 = insert_lsn(admin);
    const CpuMark cpu1 = cpu_mark(ws, 0, 0);

    std::vector<std::string> notes;
    if (!first_problem(ws).empty()) notes.push_back(first_problem(ws));
    d = drain_table(o, *ws[0]);
    if (!d.empty()) notes.push_back("drain: " + d);
    for (auto& w : ws) {
        ::close(w->sink_fd);
        w->sink_fd = -1;
    }
    std::string left = exec_admin(admin, "SELECT count(*) FROM whizbang.wh_outbox");
    if (left != "0") notes.push_back(left + " outbox rows left after the drain");
    std::vector<std::string> expected, got;
    for (auto& w : ws) expected.insert(expected.end(), w->ids.begin(), w->ids.begin() + static_cast<long>(w->next * o.batch));
    long unparsable = 0;
    double bytes = 0;
    long nbytes = 0;
    {
        std::ifstream f(file);
        std::string line;
        static const std::string key = "{\"MessageId\":\"";
        while (std::getline(f, line)) {
            if (line.rfind(key, 0) != 0 || line.size() < key.size() + 36) {
                ++unparsable;
                continue;
            }
            got.push_back(line.substr(key.size(), 36));
            bytes += static_cast<double>(line.size());
            ++nbytes;
        }
    }
    std::string once = exactly_once(expected, got, unparsable);
    if (!once.empty()) notes.push_back(once);
    for (auto& w : ws) {
        c.msgs += w->timed_msgs;
        c.exhausted = c.exhausted || w->exhausted;
    }
    if (c.exhausted) notes.push_back("pool ran out before the deadline");
    c.emit_s = c.total_s = seconds_since(t0, t_stop);
    if (c.total_s > 0) c.msgs_per_s = c.emit_per_s = c.msgs / c.total_s;
    if (c.msgs > 0) c.wal_per_msg = static_cast<double>(lsn1 - lsn0) / c.msgs;
    if (nbytes) c.payload = bytes / nbytes;
    fill_cpu(c, cpu0, cpu1);
    c.valid = notes.empty() && c.msgs > 0;
    if (!notes.empty()) {
        c.check.clear();
        for (auto& n : notes) c.check += (c.check.empty() ? "" : "; ") + n;
    }
    if (c.valid) ::unlink(file.c_str());
    return c;
}

// ---------------------------------------------------------------------------------------------
// Reporting

double median_of(std::vector<double> v) {
    if (v.empty()) return -1;
    std::sort(v.begin(), v.end());
    return v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

std::string num(double v, const char* f = "%.1f") { return v >= 0 ? fmt(f, v) : std::string("n/a"); }

void print_cell(const Cell& c) {
    std::printf("round %d %-5s %9s msgs/s (emitters %9s/s for %.2f s, drained at %s s, confirmed at %s s), %ld msgs, "
                "WAL %s B/msg (payload %s), p50 %s ms p99 %s ms, CPU us/msg backends %s walsender %s relay %s driver %s other %s: %s\n",
                c.round, c.method.c_str(), fmt_int(c.msgs_per_s).c_str(), fmt_int(c.emit_per_s).c_str(), c.emit_s,
                num(c.file_s, "%.3f").c_str(), num(c.confirm_s, "%.3f").c_str(), c.msgs, num(c.wal_per_msg, "%.0f").c_str(),
                num(c.payload, "%.0f").c_str(), num(c.p50, "%.2f").c_str(), num(c.p99, "%.2f").c_str(), num(c.cpu_backends).c_str(),
                num(c.cpu_walsender).c_str(), num(c.cpu_relay).c_str(), num(c.cpu_driver).c_str(), num(c.cpu_other).c_str(),
                c.check.c_str());
    std::fflush(stdout);
}

void write_markdown(const Options& o, const std::vector<std::string>& methods, const std::vector<Cell>& cells, std::ostream& md) {
    md << "### WAL outbox relay cycle against the table outbox: batches of " << o.batch << ", " << o.conns << " clients\n\n"
       << "- **wal**: each client loops one transaction `SELECT … FROM whizbang.emit_outbox_messages($1)` with " << o.batch
       << " prebuilt messages; one `whizbang-relay --sink ndjson:FILE --status-interval 1`, started per cell, reads the "
          "slot and appends a line per message to the file, fsyncs it and then confirms the slot.\n"
       << "- **floor**: the same, but each message goes through plain `pg_logical_emit_message(true, 'whizbang.outbox', "
          "text)` (one statement per batch): the WAL outbox without emit_outbox_messages' checks and normalisation.\n"
       << "- **paced**: as wal, but each client emits one batch every " << fmt("%g", o.pace_ms) << " ms (offered: "
       << fmt_int(o.conns * o.batch * 1000.0 / o.pace_ms) << " msgs/s in all): the commit-to-file latency at a load the "
          "relay keeps up with; under wal's full load the latency is mostly the relay's backlog.\n"
       << "- **table**: each client loops `store_outbox_messages` (" << o.batch << ") → `claim_work(instance, 'outbox', "
       << o.batch << ", " << o.lease_seconds << ")` → append the claimed messages as NDJSON lines to one file (O_APPEND) "
          "and fsync it → `complete_outbox_published(ids)`; three transactions, as bench/outbox's `native`. A client "
          "claims whatever is due, its own messages or the other's.\n\n"
       << "Each cell: a fresh file, " << o.warm_batches << " checked warm-up batches per client (wal and floor: until the "
          "relay wrote them; table: then a drain; table also starts from TRUNCATEd outbox tables), CHECKPOINT, then "
       << fmt("%g", o.seconds) << " s of load. **msgs/s**: wal and floor: messages emitted in the " << fmt("%g", o.seconds)
       << " s, divided by the time from the first emit until the file held every line *and* the slot's "
          "`confirmed_flush_lsn` had passed the last commit (so emitters that outrun the relay count only at the rate "
          "the relay drains); table: messages completed in the window / the window. **emit/s**: wal and floor, messages "
          "/ the emitters' window alone. **drain s / confirm s**: from the first emit to the last line seen in the file / "
          "to the slot confirmed. **WAL B/msg**: `pg_current_wal_insert_lsn()` after minus before the window, per "
          "message (commit records and everything else written meanwhile included). **payload**: mean bytes of a "
          "message's line in the file (wal and floor: the logical message's content, which is what the relay writes). "
          "**p50/p99 ms** (wal, floor, paced): per message, the time its line was first seen in the file (a thread of this "
          "driver reads the file's new bytes every 1 ms; a line is visible after the relay's write(), at or before its "
          "fsync) minus the time the client's autocommit emit of its batch returned (client clock, after COMMIT). "
          "**CPU us/msg**: over first emit → drained, from /proc: the clients' server backends, the walsender of the "
          "relay's slot, the relay process, this driver (its clients and the file-tail thread), and everything else "
          "busy on the machine (walwriter, checkpointer, other work). **check**: the file holds every message sent "
          "(warm-up included) exactly once and nothing else; the relay exits 0 on SIGTERM; table's outbox is empty "
          "after a drain.\n\n";
    md << "#### Each round (the order of the methods rotated by one each round)\n\n"
       << "| round | method | msgs/s | emit/s | msgs | emit s | drain s | confirm s | WAL B/msg | payload B | WAL − payload B/msg "
          "| p50 ms | p99 ms | max ms | CPU us/msg: backends | walsender | relay | driver | other | check |\n"
       << "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|\n";
    for (auto& c : cells) {
        md << "| " << c.round << " | " << c.method << " | " << fmt_int(c.msgs_per_s) << " | " << fmt_int(c.emit_per_s) << " | "
           << fmt_int(static_cast<double>(c.msgs)) << " | " << fmt("%.2f", c.emit_s) << " | "
           << (c.method == "table" ? "" : num(c.file_s, "%.3f")) << " | " << (c.method == "table" ? "" : num(c.confirm_s, "%.3f"))
           << " | " << num(c.wal_per_msg, "%.0f") << " | " << num(c.payload, "%.0f") << " | "
           << (c.wal_per_msg >= 0 && c.payload >= 0 ? fmt("%.0f", c.wal_per_msg - c.payload) : "n/a") << " | "
           << num(c.p50, "%.2f") << " | " << num(c.p99, "%.2f") << " | " << num(c.pmax, "%.1f") << " | " << num(c.cpu_backends)
           << " | " << num(c.cpu_walsender) << " | " << num(c.cpu_relay) << " | " << num(c.cpu_driver) << " | "
           << num(c.cpu_other) << " | " << c.check << " |\n";
    }
    md << "\n#### Median over the rounds (valid cells only)\n\n"
       << "| method | msgs/s | range | emit/s | WAL B/msg | payload B | WAL − payload B/msg | p50 ms | p99 ms | CPU us/msg: "
          "backends | walsender | relay | driver | other | valid rounds |\n"
       << "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n";
    std::map<std::string, double> med_rate;
    for (auto& m : methods) {
        std::vector<double> rate, emit, wal, pay, over, p50, p99, cb, cw, cr, cd, co;
        for (auto& c : cells) {
            if (c.method != m || !c.valid) continue;
            rate.push_back(c.msgs_per_s);
            emit.push_back(c.emit_per_s);
            wal.push_back(c.wal_per_msg);
            pay.push_back(c.payload);
            over.push_back(c.wal_per_msg - c.payload);
            if (c.p50 >= 0) p50.push_back(c.p50);
            if (c.p99 >= 0) p99.push_back(c.p99);
            if (c.cpu_backends >= 0) cb.push_back(c.cpu_backends);
            if (c.cpu_walsender >= 0) cw.push_back(c.cpu_walsender);
            if (c.cpu_relay >= 0) cr.push_back(c.cpu_relay);
            if (c.cpu_driver >= 0) cd.push_back(c.cpu_driver);
            if (c.cpu_other >= 0) co.push_back(c.cpu_other);
        }
        med_rate[m] = median_of(rate);
        std::string range = rate.empty() ? "n/a"
                                         : fmt_int(*std::min_element(rate.begin(), rate.end())) + "-" +
                                               fmt_int(*std::max_element(rate.begin(), rate.end()));
        md << "| " << m << " | " << (rate.empty() ? "n/a" : fmt_int(median_of(rate))) << " | " << range << " | "
           << (emit.empty() ? "n/a" : fmt_int(median_of(emit))) << " | " << num(median_of(wal), "%.0f") << " | "
           << num(median_of(pay), "%.0f") << " | " << (over.empty() ? "n/a" : fmt("%.0f", median_of(over))) << " | "
           << num(median_of(p50), "%.2f") << " | " << num(median_of(p99), "%.2f") << " | " << num(median_of(cb)) << " | "
           << num(median_of(cw)) << " | " << num(median_of(cr)) << " | " << num(median_of(cd)) << " | " << num(median_of(co))
           << " | " << rate.size() << " of " << o.rounds << " |\n";
    }
    // Ratios of cells measured in the same round (the machine's speed drifts over a run).
    md << "\n#### Ratios, per round (the two cells of the same round) and their median\n\n"
       << "msgs/s: x's divided by table's. CPU: table's CPU per message divided by x's, counting the processes "
          "the method runs (clients' backends, walsender, relay, driver; not \"other\"), so above 1 favours x: on "
          "cores shared with other work this moves less than msgs/s.\n\n"
       << "| ratio | msgs/s per round | median | target | CPU per round | median |\n|---|---|---:|---|---|---:|\n";
    auto own = [](const Cell& c) {
        return std::max(0.0, c.cpu_backends) + std::max(0.0, c.cpu_walsender) + std::max(0.0, c.cpu_relay) +
               std::max(0.0, c.cpu_driver);
    };
    for (const char* x : {"wal", "floor"}) {
        if (!has(methods, x) || !has(methods, "table")) continue;
        std::vector<double> q, qc;
        std::string per, perc;
        for (int r = 1; r <= o.rounds; ++r) {
            const Cell *a = nullptr, *b = nullptr;
            for (auto& c : cells) {
                if (c.round != r || !c.valid) continue;
                if (c.method == x) a = &c;
                if (c.method == "table") b = &c;
            }
            if (!a || !b || b->msgs_per_s <= 0 || own(*a) <= 0) {
                per += (per.empty() ? "" : ", ") + std::string("n/a");
                perc += (perc.empty() ? "" : ", ") + std::string("n/a");
                continue;
            }
            q.push_back(a->msgs_per_s / b->msgs_per_s);
            per += (per.empty() ? "" : ", ") + fmt("%.2f", q.back()) + "x";
            qc.push_back(own(*b) / own(*a));
            perc += (perc.empty() ? "" : ", ") + fmt("%.2f", qc.back());
        }
        double m = median_of(q);
        md << "| " << x << " / table | " << per << " | " << (q.empty() ? "n/a" : fmt("%.2f", m) + "x") << " | "
           << (std::string(x) == "wal" ? (q.empty() ? "≥ 3x: n/a" : std::string("≥ 3x: ") + (m >= 3 ? "met" : "**missed**")) : "")
           << " | " << perc << " | " << (qc.empty() ? "n/a" : fmt("%.2f", median_of(qc))) << " |\n";
    }
    if (has(methods, "wal")) {
        std::vector<double> over;
        for (auto& c : cells)
            if (c.method == "wal" && c.valid) over.push_back(c.wal_per_msg - c.payload);
        if (!over.empty())
            md << "\nWAL per message of wal minus its payload, median: " << fmt("%.0f", median_of(over))
               << " B (target ≤ 150 B: " << (median_of(over) <= 150 ? "met" : "**missed**") << ").\n";
    }
}

}  // namespace

int main(int argc, char** argv) {
    Options o = parse_options(argc, argv);
    const std::vector<std::string> methods = split(o.methods, ',');
    PGconn* admin = connect_or_die("");
    exec_admin(admin, "SET client_min_messages = warning");
    // As bench/outbox: no autovacuum on the measured tables, so that a vacuum landing in some
    // cells and not in others does not move the figures.
    for (auto& t : split(kTables, ','))
        exec_admin(admin, "ALTER TABLE " + t.substr(t.find_first_not_of(' ')) + " SET (autovacuum_enabled = off)");

    Workers ws;
    IdGenerator instances(false, 0xfeedULL);
    for (int i = 0; i < o.conns; ++i) {
        ws.push_back(std::make_unique<Worker>(connect_or_die(""), 0x9e3779b97f4a7c15ULL * (i + 1), o.envelope_bytes,
                                              uuid_text(instances.next())));
        prepare_or_die(ws.back()->conn, "wal", kEmitSql);
        prepare_or_die(ws.back()->conn, "floor", kFloorSql);
        prepare_or_die(ws.back()->conn, "store", kStoreSql);
        prepare_or_die(ws.back()->conn, "claim", kClaimSql);
        prepare_or_die(ws.back()->conn, "complete", kCompleteSql);
    }

    std::vector<Cell> cells;
    for (int round = 1; round <= o.rounds; ++round)
        for (std::size_t k = 0; k < methods.size(); ++k) {
            const std::string& m = methods[(k + round - 1) % methods.size()];
            Cell c;
            try {
                c = m == "table" ? run_table_cell(o, round, admin, ws) : run_relay_cell(o, m, round, admin, ws);
            } catch (const std::exception& e) {
                c.method = m;
                c.round = round;
                c.check = std::string("failed: ") + one_line(e.what());
            }
            print_cell(c);
            cells.push_back(c);
            for (auto& w : ws) w->reset();
        }
    exec_admin(admin, std::string("TRUNCATE ") + kTables);

    std::ostringstream md;
    write_markdown(o, methods, cells, md);
    if (!o.md.empty()) std::ofstream(o.md) << md.str();
    else std::printf("\n%s", md.str().c_str());
    for (auto& w : ws) PQfinish(w->conn);
    PQfinish(admin);
    bool bad = false;
    for (auto& c : cells) bad = bad || !c.valid;
    return bad ? 3 : 0;
}
