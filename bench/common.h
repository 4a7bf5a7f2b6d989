// Shared machinery of the benchmark load drivers (driver.cpp: dedup, inbox.cpp: inbox,
// outbox.cpp: outbox, purge.cpp: retention purge).
//
// Connections and admin statements, COPY, UUIDv7 ids, the CPU and WAL accounting of a timed
// window (the connections' server backends, the driver itself and everything else on the
// machine, from /proc), the start gate that releases all threads together, the repetition of
// windows disturbed by other work, and the folding of rounds into a median with its range.
// For the message drivers (inbox, outbox): ~1 KB JSON envelopes, the per-connection worker
// with its counters and problems, the options every run takes, and the result tables; for the
// inbox and purge drivers, store_inbox_messages' p_messages and its checked call.
#pragma once

#include <libpq-fe.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cctype>
#include <cinttypes>
#include <cmath>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <sys/resource.h>
#include <unistd.h>

namespace bench {
using Clock = std::chrono::steady_clock;
using Uuid = std::array<std::uint8_t, 16>;

constexpr unsigned kUuidArrayOid = 2951;  // uuid[]
constexpr unsigned kUuidOid = 2950;
constexpr unsigned kTextOid = 25;

inline double seconds_since(Clock::time_point t0, Clock::time_point t1) {
    return std::chrono::duration<double>(t1 - t0).count();
}

inline std::vector<std::string> split(const std::string& s, char sep) {
    std::vector<std::string> out;
    std::string cur;
    std::istringstream in(s);
    while (std::getline(in, cur, sep))
        if (!cur.empty()) out.push_back(cur);
    return out;
}

// ---------------------------------------------------------------------------------------------
// Id generation (client side, before timing)

class IdGenerator {
public:
    IdGenerator(bool v7, std::uint64_t seed) : v7_(v7), rng_(seed) {}

    Uuid next() {
        Uuid u{};
        std::uint64_t a = rng_(), b = rng_();
        if (!v7_) {
            for (int i = 0; i < 8; ++i) u[i] = static_cast<std::uint8_t>(a >> (56 - 8 * i));
            for (int i = 0; i < 8; ++i) u[8 + i] = static_cast<std::uint8_t>(b >> (56 - 8 * i));
            u[6] = static_cast<std::uint8_t>((u[6] & 0x0f) | 0x40);
            u[8] = static_cast<std::uint8_t>((u[8] & 0x3f) | 0x80);
            return u;
        }
        // Version 7: 48-bit Unix ms, then 74 bits that are drawn fresh on a new millisecond and
        // incremented within one, so ids from one generator are strictly increasing.
        auto ms = static_cast<std::uint64_t>(
            std::chrono::duration_cast<std::chrono::milliseconds>(
                std::chrono::system_clock::now().time_since_epoch())
                .count());
        if (ms > last_ms_) {
            last_ms_ = ms;
            hi_ = a & 0xfff;                 // 12 bits (rand_a)
            lo_ = b & 0x3fffffffffffffffULL;  // 62 bits (rand_b)
        } else if (++lo_ > 0x3fffffffffffffffULL) {
            lo_ = 0;
            if (++hi_ > 0xfff) {  // 74 bits exhausted inside one ms: borrow the next ms
                hi_ = 0;
                ++last_ms_;
            }
        }
        std::uint64_t m = last_ms_;
        for (int i = 0; i < 6; ++i) u[i] = static_cast<std::uint8_t>(m >> (40 - 8 * i));
        u[6] = static_cast<std::uint8_t>(0x70 | (hi_ >> 8));
        u[7] = static_cast<std::uint8_t>(hi_ & 0xff);
        u[8] = static_cast<std::uint8_t>(0x80 | (lo_ >> 56));
        for (int i = 1; i < 8; ++i) u[8 + i] = static_cast<std::uint8_t>(lo_ >> (56 - 8 * i));
        return u;
    }

private:
    bool v7_;
    std::mt19937_64 rng_;
    std::uint64_t last_ms_ = 0, hi_ = 0, lo_ = 0;
};

inline std::string uuid_text(const Uuid& u) {
    static const char* hex = "0123456789abcdef";
    std::string s;
    s.reserve(36);
    for (int i = 0; i < 16; ++i) {
        if (i == 4 || i == 6 || i == 8 || i == 10) s.push_back('-');
        s.push_back(hex[u[i] >> 4]);
        s.push_back(hex[u[i] & 15]);
    }
    return s;
}

inline void put_be32(std::string& s, std::uint32_t v) {
    char b[4] = {static_cast<char>(v >> 24), static_cast<char>(v >> 16),
                 static_cast<char>(v >> 8), static_cast<char>(v)};
    s.append(b, 4);
}

// uuid[] in the binary array format of array_send: ndim, has-nulls, element type, then per
// dimension length and lower bound, then each element as length + 16 bytes.
inline std::string binary_uuid_array(const Uuid* ids, std::size_t n) {
    std::string s;
    s.reserve(20 + n * 20);
    put_be32(s, 1);
    put_be32(s, 0);
    put_be32(s, kUuidOid);
    put_be32(s, static_cast<std::uint32_t>(n));
    put_be32(s, 1);
    for (std::size_t i = 0; i < n; ++i) {
        put_be32(s, 16);
        s.append(reinterpret_cast<const char*>(ids[i].data()), 16);
    }
    return s;
}

// ---------------------------------------------------------------------------------------------
// Connections

struct PgResult {
    PGresult* r;
    explicit PgResult(PGresult* p) : r(p) {}
    ~PgResult() { PQclear(r); }
    PgResult(const PgResult&) = delete;
    PgResult& operator=(const PgResult&) = delete;
};

inline PGconn* connect_or_die(const std::string& dsn) {
    PGconn* c = PQconnectdb(dsn.c_str());
    if (PQstatus(c) != CONNECTION_OK) {
        std::fprintf(stderr, "connection failed: %s", PQerrorMessage(c));
        std::exit(1);
    }
    PQclear(PQexec(c, "SET application_name = 'whizbang-bench'"));
    return c;
}

inline std::string one_line(const char* msg) {
    std::string s = msg ? msg : "";
    for (auto& ch : s)
        if (ch == '\n' || ch == '\t' || ch == '|') ch = ' ';
    while (!s.empty() && s.back() == ' ') s.pop_back();
    return s;
}

// Runs a statement that must succeed; returns the first value of the first row ("" if none).
inline std::string exec_admin(PGconn* c, const std::string& sql) {
    PgResult r(PQexec(c, sql.c_str()));
    auto st = PQresultStatus(r.r);
    if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK)
        throw std::runtime_error(sql + ": " + one_line(PQerrorMessage(c)));
    if (st == PGRES_TUPLES_OK && PQntuples(r.r) > 0 && PQnfields(r.r) > 0)
        return PQgetvalue(r.r, 0, 0);
    return "";
}

// Sends one COPY FROM STDIN with the given text rows; returns rows copied or throws.
inline long copy_in(PGconn* c, const std::string& sql, const std::string& rows) {
    {
        PgResult r(PQexec(c, sql.c_str()));
        if (PQresultStatus(r.r) != PGRES_COPY_IN)
            throw std::runtime_error("COPY did not start: " + one_line(PQerrorMessage(c)));
    }
    bool ok = PQputCopyData(c, rows.data(), static_cast<int>(rows.size())) == 1;
    ok = PQputCopyEnd(c, ok ? nullptr : "client could not send data") == 1 && ok;
    long n = -1;
    std::string err;
    while (PGresult* res = PQgetResult(c)) {
        if (PQresultStatus(res) == PGRES_COMMAND_OK) n = std::atol(PQcmdTuples(res));
        else err = one_line(PQresultErrorMessage(res));
        PQclear(res);
    }
    if (!ok || n < 0) throw std::runtime_error("COPY failed: " + (err.empty() ? one_line(PQerrorMessage(c)) : err));
    return n;
}

// utime + stime of a local process in clock ticks (/proc/<pid>/stat fields 14 and 15); -1 if
// unreadable (server on another machine).
inline long proc_stat_ticks(int pid) {
    std::ifstream st("/proc/" + std::to_string(pid) + "/stat");
    std::string line;
    if (!std::getline(st, line)) return -1;
    auto close = line.rfind(')');
    if (close == std::string::npos) return -1;
    std::istringstream in(line.substr(close + 2));
    std::string field;
    long ut = -1, stt = -1;
    for (int i = 3; i <= 15 && in >> field; ++i) {
        if (i == 14) ut = std::stol(field);
        if (i == 15) stt = std::stol(field);
    }
    return ut < 0 || stt < 0 ? -1 : ut + stt;
}

// CPU time a local process has used, in seconds (schedstat: ns on CPU; else stat: ticks);
// negative when it cannot be read (server on another machine).
inline double process_cpu_seconds(int pid) {
    std::ifstream ss("/proc/" + std::to_string(pid) + "/schedstat");
    unsigned long long ns = 0;
    if (ss >> ns) return ns / 1e9;
    const long ticks = proc_stat_ticks(pid);
    return ticks < 0 ? -1 : static_cast<double>(ticks) / sysconf(_SC_CLK_TCK);
}

inline double backends_cpu_seconds(const std::vector<int>& pids) {
    double sum = 0;
    for (int p : pids) {
        double c = process_cpu_seconds(p);
        if (c < 0) return -1;
        sum += c;
    }
    return sum;
}

// Busy CPU seconds of the whole machine (all cores) from /proc/stat; negative if unreadable.
inline double machine_busy_seconds() {
    std::ifstream st("/proc/stat");
    std::string cpu;
    unsigned long long v[8] = {};
    if (!(st >> cpu) || cpu != "cpu") return -1;
    for (auto& x : v)
        if (!(st >> x)) return -1;
    // user nice system idle iowait irq softirq steal: everything but idle and iowait
    return static_cast<double>(v[0] + v[1] + v[2] + v[5] + v[6] + v[7]) / sysconf(_SC_CLK_TCK);
}

// CPU seconds of this process, all threads.
inline double self_cpu_seconds() {
    rusage ru{};
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_utime.tv_sec + ru.ru_stime.tv_sec + (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

// A start line for the timed phase: the coordinator releases all threads at once.
class StartGate {
public:
    void arrive_and_wait() {
        std::unique_lock<std::mutex> lk(mu_);
        ++arrived_;
        cv_.notify_all();
        cv_.wait(lk, [&] { return open_; });
    }
    void wait_for(int n) {
        std::unique_lock<std::mutex> lk(mu_);
        cv_.wait(lk, [&] { return arrived_ >= n; });
    }
    void open() {
        std::lock_guard<std::mutex> lk(mu_);
        open_ = true;
        cv_.notify_all();
    }

private:
    std::mutex mu_;
    std::condition_variable cv_;
    int arrived_ = 0;
    bool open_ = false;
};

// ---------------------------------------------------------------------------------------------
// Results

struct CellResult {
    std::string method, label, mode;
    int batch = 0, conns = 0;
    long ids = 0, calls = 0;
    double secs = 0, ids_per_s = 0, calls_per_s = 0, p50 = 0, p99 = 0, wal_per_id = 0;
    double cpu_us_per_id = -1;  // CPU of the connections' server backends, per id
    double client_cpu_pct = -1;  // driver CPU, % of the machine during the timed window
    double other_cpu_pct = -1;   // everything else (other server processes, other work), same unit
    int attempts = 1;            // windows measured for this result (disturbed ones are repeated)
    std::string check = "ok";
    bool valid = false;  // produced a usable figure
    int rounds = 1;
    double min_ids_per_s = 0, max_ids_per_s = 0;  // across rounds
};

// Folds the rounds of each cell into one result: the median ids/s (for an even count, the mean
// of the middle two), the other columns from the round nearest to it, and the min-max spread.
inline std::vector<CellResult> aggregate(const std::vector<CellResult>& all, double max_other) {
    std::vector<CellResult> out;
    std::vector<std::vector<const CellResult*>> groups;
    for (auto& r : all) {
        bool placed = false;
        for (auto& g : groups)
            if (g[0]->method == r.method && g[0]->mode == r.mode && g[0]->batch == r.batch) {
                g.push_back(&r);
                placed = true;
                break;
            }
        if (!placed) groups.push_back({&r});
    }
    for (auto& g : groups) {
        std::vector<double> v;
        std::string checks;
        bool valid = true;
        for (auto* r : g) {
            v.push_back(r->ids_per_s);
            valid = valid && r->valid;
            if (r->check != "ok" && checks.find(r->check) == std::string::npos)
                checks += (checks.empty() ? "" : "; ") + r->check;
        }
        std::sort(v.begin(), v.end());
        double med = v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
        const CellResult* rep = g[0];
        for (auto* r : g)
            if (std::fabs(r->ids_per_s - med) < std::fabs(rep->ids_per_s - med)) rep = r;
        std::vector<double> cpu;
        for (auto* r : g)
            if (r->cpu_us_per_id >= 0) cpu.push_back(r->cpu_us_per_id);
        std::sort(cpu.begin(), cpu.end());
        CellResult c = *rep;
        c.ids_per_s = med;
        if (cpu.size() == g.size())
            c.cpu_us_per_id = cpu.size() % 2 ? cpu[cpu.size() / 2]
                                             : (cpu[cpu.size() / 2 - 1] + cpu[cpu.size() / 2]) / 2;
        c.rounds = static_cast<int>(g.size());
        c.min_ids_per_s = v.front();
        c.max_ids_per_s = v.back();
        c.valid = valid;
        c.check = checks.empty() ? "ok" : checks;
        int repeated = 0, disturbed = 0;
        double worst = 0;
        for (auto* r : g) {
            repeated += r->attempts - 1;
            if (r->other_cpu_pct > max_other) {
                ++disturbed;
                worst = std::max(worst, r->other_cpu_pct);
            }
        }
        if (repeated) c.check += "; " + std::to_string(repeated) + " window(s) repeated";
        if (disturbed)
            c.check += "; " + std::to_string(disturbed) + " of " + std::to_string(g.size()) +
                       " round(s) disturbed (other up to " + std::to_string(static_cast<int>(worst)) + " %)";
        out.push_back(c);
    }
    return out;
}

inline double percentile(std::vector<double>& v, double p) {
    if (v.empty()) return 0;
    std::size_t k = static_cast<std::size_t>(std::ceil(p * v.size())) - 1;
    k = std::min(k, v.size() - 1);
    std::nth_element(v.begin(), v.begin() + k, v.end());
    return v[k];
}

inline std::string fmt(const char* f, double v) {
    char b[64];
    std::snprintf(b, sizeof b, f, v);
    return b;
}

inline std::string fmt_int(double v) {
    std::string s = std::to_string(static_cast<long long>(std::llround(v)));
    std::string out;
    int n = 0;
    for (auto it = s.rbegin(); it != s.rend(); ++it) {
        if (n && n % 3 == 0 && *it != '-') out.insert(out.begin(), ',');
        out.insert(out.begin(), *it);
        ++n;
    }
    return out;
}

template <typename W, typename F>
void for_each_worker(std::vector<std::unique_ptr<W>>& ws, F f) {
    std::vector<std::thread> ts;
    for (std::size_t i = 0; i < ws.size(); ++i) ts.emplace_back([&, i] { f(*ws[i], i); });
    for (auto& t : ts) t.join();
}

// ---------------------------------------------------------------------------------------------
// A timed window

// What a timed window measured besides the work itself.
struct Window {
    double secs = 0;             // from the release to the end of the slowest thread
    double backend_cpu_s = -1;   // CPU of the connections' server backends (-1: not readable)
    double client_cpu_pct = -1;  // CPU of the driver, % of all cores
    double other_cpu_pct = -1;   // everything else (other server processes, other work), same unit
    double wal_bytes = 0;        // WAL inserted during the window
};

// Runs body(i, deadline) on one thread per connection; the threads are released together once
// all have arrived. Around the window it reads the WAL insert position, the CPU time of the
// connections' server backends, of the driver and of the whole machine.
template <typename Body>
Window timed_window(PGconn* admin, const std::vector<PGconn*>& conns, double seconds, Body body) {
    StartGate gate;
    Clock::time_point start;
    std::mutex start_mu;
    std::vector<double> end_s(conns.size(), 0);
    std::vector<std::thread> ts;
    for (std::size_t i = 0; i < conns.size(); ++i) {
        ts.emplace_back([&, i] {
            gate.arrive_and_wait();
            Clock::time_point t_start;
            {
                std::lock_guard<std::mutex> lk(start_mu);
                t_start = start;
            }
            const auto deadline = t_start + std::chrono::duration_cast<Clock::duration>(
                                                std::chrono::duration<double>(seconds));
            body(i, deadline);
            end_s[i] = seconds_since(t_start, Clock::now());
        });
    }
    std::vector<int> backend_pids;
    for (auto* c : conns) backend_pids.push_back(PQbackendPID(c));
    gate.wait_for(static_cast<int>(conns.size()));
    std::string lsn0 = exec_admin(admin, "SELECT pg_current_wal_insert_lsn()");
    double cpu0 = backends_cpu_seconds(backend_pids);
    double busy0 = machine_busy_seconds(), self0 = self_cpu_seconds();
    {
        std::lock_guard<std::mutex> lk(start_mu);
        start = Clock::now();
    }
    gate.open();
    for (auto& t : ts) t.join();
    double cpu1 = backends_cpu_seconds(backend_pids);
    double busy1 = machine_busy_seconds(), self1 = self_cpu_seconds();
    double window = seconds_since(start, Clock::now());
    std::string wal = exec_admin(admin, "SELECT pg_wal_lsn_diff(pg_current_wal_insert_lsn(), '" + lsn0 + "')");

    Window w;
    for (double s : end_s) w.secs = std::max(w.secs, s);
    w.wal_bytes = std::atof(wal.c_str());
    if (cpu0 >= 0 && cpu1 >= 0) w.backend_cpu_s = cpu1 - cpu0;
    if (cpu0 >= 0 && cpu1 >= 0 && busy0 >= 0 && busy1 >= 0 && window > 0) {
        double capacity = window * std::max(1L, sysconf(_SC_NPROCESSORS_ONLN));
        w.client_cpu_pct = 100.0 * (self1 - self0) / capacity;
        w.other_cpu_pct = std::max(0.0, 100.0 * ((busy1 - busy0) - (cpu1 - cpu0) - (self1 - self0)) / capacity);
    }
    return w;
}

// Measures one cell: a window in which other work took more than max_other % of the cores is
// measured again (up to `retries` times, while `budget`, the extra windows left for the whole
// run, lasts); the least disturbed attempt is kept. attempt() must not throw.
template <typename F>
CellResult measure_cell(int retries, double max_other, long& budget, const std::string& what, F attempt) {
    CellResult r;
    int tries = 0;
    for (int i = 0; i <= retries; ++i) {
        CellResult a = attempt();
        ++tries;
        if (i == 0 || !a.valid || a.other_cpu_pct < r.other_cpu_pct) r = a;
        if (!a.valid || a.other_cpu_pct < 0 || a.other_cpu_pct <= max_other) break;
        if (i == retries || budget <= 0) break;
        --budget;
        std::fprintf(stderr, "  %s: %.0f%% of the cores went to other work, measuring again\n", what.c_str(),
                     a.other_cpu_pct);
    }
    r.attempts = tries;
    return r;
}

// ---------------------------------------------------------------------------------------------
// Options every message-driver run takes

struct RunOptions {
    int conns = 2;
    int rounds = 3;
    int retries = 1;
    double retry_budget = 0.5;
    double max_other = 20;
    double seconds = 2.0;
    int envelope_bytes = 1000;  // JSON text of each Envelope
    std::string dsn, tsv_path, md_path;
};

// Reads the --key=value arguments: take(key, value) returns false for a key it does not know.
// --help, an unknown key or a bad number (std::logic_error from take) end in usage().
template <typename Take>
void parse_key_values(int argc, char** argv, Take take, void (*usage)(const char*)) {
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        const auto eq = a.find('=');
        const std::string key = a.substr(0, eq);
        const std::string val = eq == std::string::npos ? "" : a.substr(eq + 1);
        if (key == "--help" || key == "-h") usage("help requested");
        bool known = false;
        try {
            known = take(key, val);
        } catch (const std::logic_error&) {
            usage(("bad value in " + a).c_str());
        }
        if (!known) usage(("unknown option " + a).c_str());
    }
}

// Takes --conns, --rounds, --retries, --max-other, --retry-budget, --seconds, --envelope-bytes,
// --dsn, --tsv, --md; false for any other key. Throws std::logic_error on a bad number.
inline bool parse_run_option(const std::string& key, const std::string& val, RunOptions& o) {
    if (key == "--conns") o.conns = std::stoi(val);
    else if (key == "--rounds") o.rounds = std::stoi(val);
    else if (key == "--retries") o.retries = std::stoi(val);
    else if (key == "--max-other") o.max_other = std::stod(val);
    else if (key == "--retry-budget") o.retry_budget = std::stod(val);
    else if (key == "--seconds") o.seconds = std::stod(val);
    else if (key == "--envelope-bytes") o.envelope_bytes = std::stoi(val);
    else if (key == "--dsn") o.dsn = val;
    else if (key == "--tsv") o.tsv_path = val;
    else if (key == "--md") o.md_path = val;
    else return false;
    return true;
}

inline bool has(const std::vector<std::string>& v, const std::string& s) {
    return std::find(v.begin(), v.end(), s) != v.end();
}

// ---------------------------------------------------------------------------------------------
// Messages (client side, before timing)

// The current time as timestamptz text (UTC, microseconds).
inline std::string now_text() {
    auto us = std::chrono::duration_cast<std::chrono::microseconds>(
                  std::chrono::system_clock::now().time_since_epoch()).count();
    std::time_t secs = static_cast<std::time_t>(us / 1000000);
    std::tm tm{};
    gmtime_r(&secs, &tm);
    char b[64];
    std::snprintf(b, sizeof b, "%04d-%02d-%02d %02d:%02d:%02d.%06d+00", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
                  tm.tm_hour, tm.tm_min, tm.tm_sec, static_cast<int>(us % 1000000));
    return b;
}

// Builds messages: a UUIDv7 id and a JSON envelope of exactly `envelope_bytes` characters
// (ids, a hop, an order with lines, padded by a note), different for every message. No
// character needs escaping in JSON strings or in COPY text.
class MessageFactory {
public:
    MessageFactory(std::uint64_t seed, int envelope_bytes) : ids_(true, seed), rng_(seed ^ 0x5bd1e995), size_(envelope_bytes) {}

    Uuid next_id() { return ids_.next(); }

    std::string envelope(const Uuid& id, const std::string& ts) {
        std::string s;
        s.reserve(size_ + 64);
        s += "{\"MessageId\":\"" + uuid_text(id) + "\",\"CorrelationId\":\"" + uuid_text(random_uuid()) +
             "\",\"CausationId\":\"" + uuid_text(random_uuid()) +
             "\",\"Hops\":[{\"Type\":\"Current\",\"ServiceName\":\"orders-api\",\"InstanceId\":\"" +
             uuid_text(random_uuid()) + "\",\"Topic\":\"orders\",\"Timestamp\":\"" + ts +
             "\"}],\"Payload\":{\"OrderId\":\"" + uuid_text(random_uuid()) + "\",\"CustomerId\":\"" +
             uuid_text(random_uuid()) + "\",\"Currency\":\"EUR\",\"Lines\":[";
        const std::string tail_open = "],\"Note\":\"";
        const std::string tail_close = "\"}}";
        char line[128];
        for (int n = 0;; ++n) {
            std::uint64_t r = rng_();
            int len = std::snprintf(line, sizeof line, "%s{\"Sku\":\"SKU-%05u\",\"Quantity\":%u,\"UnitPrice\":%u.%02u}",
                                    n ? "," : "", static_cast<unsigned>(r % 100000), static_cast<unsigned>((r >> 20) % 9 + 1),
                                    static_cast<unsigned>((r >> 28) % 500), static_cast<unsigned>((r >> 40) % 100));
            if (s.size() + len + tail_open.size() + tail_close.size() + 8 > static_cast<std::size_t>(size_)) break;
            s.append(line, len);
        }
        s += tail_open;
        static const char letters[] = "abcdefghijklmnopqrstuvwxyz ";
        while (s.size() + tail_close.size() < static_cast<std::size_t>(size_)) s.push_back(letters[rng_() % 27]);
        s += tail_close;
        return s;
    }

    Uuid random_uuid() {
        Uuid u{};
        std::uint64_t a = rng_(), b = rng_();
        for (int i = 0; i < 8; ++i) u[i] = static_cast<std::uint8_t>(a >> (56 - 8 * i));
        for (int i = 0; i < 8; ++i) u[8 + i] = static_cast<std::uint8_t>(b >> (56 - 8 * i));
        u[6] = static_cast<std::uint8_t>((u[6] & 0x0f) | 0x40);
        u[8] = static_cast<std::uint8_t>((u[8] & 0x3f) | 0x80);
        return u;
    }

private:
    IdGenerator ids_;
    std::mt19937_64 rng_;
    int size_;
};

// ---------------------------------------------------------------------------------------------
// Statements on a worker's connection

// Runs a command; "" or "ERROR: <statement>: <message>".
inline std::string exec_ok(PGconn* c, const char* sql) {
    PgResult r(PQexec(c, sql));
    if (PQresultStatus(r.r) != PGRES_COMMAND_OK) return "ERROR: " + std::string(sql) + ": " + one_line(PQerrorMessage(c));
    return "";
}

inline void prepare_or_die(PGconn* c, const std::string& name, const std::string& sql) {
    PgResult r(PQprepare(c, name.c_str(), sql.c_str(), 0, nullptr));
    if (PQresultStatus(r.r) != PGRES_COMMAND_OK) {
        std::fprintf(stderr, "cannot prepare %s: %s\n", name.c_str(), PQresultErrorMessage(r.r));
        std::exit(1);
    }
}

// ---------------------------------------------------------------------------------------------
// Workers: one connection and one thread each

// What every driver's worker counts in a cell; drivers derive their worker from it.
struct LoadWorker {
    PGconn* conn = nullptr;
    long timed_msgs = 0, timed_calls = 0, sent_msgs = 0;
    bool exhausted = false;
    long mismatches = 0;
    std::string first_problem, error;
    std::vector<double> lat_ms;

    explicit LoadWorker(PGconn* c) : conn(c) {}

    void reset_counts() {
        timed_msgs = timed_calls = sent_msgs = 0;
        exhausted = false;
        mismatches = 0;
        first_problem.clear();
        error.clear();
        lat_ms.clear();
    }

    // Counts a problem ("" is none); the first one and the first ERROR are kept.
    void note(const std::string& problem) {
        if (problem.empty()) return;
        ++mismatches;
        if (first_problem.empty()) first_problem = problem;
        if (problem.rfind("ERROR:", 0) == 0 && error.empty()) error = problem;
    }
};

template <typename W>
std::vector<PGconn*> conns_of(std::vector<std::unique_ptr<W>>& ws) {
    std::vector<PGconn*> c;
    for (auto& w : ws) c.push_back(w->conn);
    return c;
}

// Fills the result's rates and CPU/WAL columns from the workers and the window.
template <typename W>
void fill_result(CellResult& res, std::vector<std::unique_ptr<W>>& ws, const Window& win) {
    std::vector<double> lat;
    res.secs = win.secs;
    for (auto& w : ws) {
        res.ids += w->timed_msgs;
        res.calls += w->timed_calls;
        lat.insert(lat.end(), w->lat_ms.begin(), w->lat_ms.end());
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
}

template <typename W>
std::string problems_of(std::vector<std::unique_ptr<W>>& ws) {
    long mismatches = 0;
    std::string first;
    for (auto& w : ws) {
        mismatches += w->mismatches;
        if (first.empty()) first = w->first_problem;
    }
    return mismatches ? std::to_string(mismatches) + " bad calls, first: " + first : "";
}

// How many entries of `v` repeat an earlier one (sorts `v`).
inline long count_repeats(std::vector<std::string>& v) {
    std::sort(v.begin(), v.end());
    return static_cast<long>(v.size()) - static_cast<long>(std::unique(v.begin(), v.end()) - v.begin());
}

// A cell that could not be measured, with the reason in its check column.
inline CellResult failed_cell(const std::string& method, const std::string& label, const std::string& mode, int batch,
                              const std::exception& e) {
    CellResult a;
    a.method = method;
    a.label = label;
    a.mode = mode;
    a.batch = batch;
    a.check = e.what();
    return a;
}

// ---------------------------------------------------------------------------------------------
// Reporting

// The progress lines on stdout: a header, then one line per measured round of a cell.
inline void print_cell_header() {
    std::printf("%-62s %-6s %6s %10s %9s %8s %8s %9s %7s %7s %8s  %s\n", "method", "part", "batch", "msgs/s", "calls/s",
                "p50 ms", "p99 ms", "CPU us/m", "client%", "other%", "WAL B/m", "check");
    std::fflush(stdout);
}

inline void print_cell(const CellResult& r, int round) {
    std::printf("%-62s %-6s %6d %10s %9s %8.3f %8.3f %9.2f %7.0f %7.0f %8.0f  %s (round %d, windows %d)\n",
                r.label.c_str(), r.mode.c_str(), r.batch, fmt_int(r.ids_per_s).c_str(), fmt_int(r.calls_per_s).c_str(),
                r.p50, r.p99, r.cpu_us_per_id, r.client_cpu_pct, r.other_cpu_pct, r.wal_per_id, r.check.c_str(),
                round, r.attempts);
    std::fflush(stdout);
}

// The raw results file: one line per cell (rounds folded).
inline void write_tsv_header(std::ostream& t) {
    t << "part\tmethod\tbatch_or_pending\tconns\trounds\tmin_msgs_per_s\tmax_msgs_per_s\tmsgs\tcalls\tseconds\tmsgs_per_s"
         "\tcalls_per_s\tp50_ms\tp99_ms\tcpu_us_per_msg\tclient_cpu_pct\tother_cpu_pct\twal_bytes_per_msg\tp90_ms\tcheck\n";
}

inline void write_tsv_row(std::ostream& t, const CellResult& r) {
    t << r.mode << '\t' << r.method << '\t' << r.batch << '\t' << r.conns << '\t' << r.rounds << '\t'
      << fmt("%.0f", r.min_ids_per_s) << '\t' << fmt("%.0f", r.max_ids_per_s) << '\t' << r.ids << '\t' << r.calls
      << '\t' << fmt("%.3f", r.secs) << '\t' << fmt("%.0f", r.ids_per_s) << '\t' << fmt("%.0f", r.calls_per_s)
      << '\t' << fmt("%.3f", r.p50) << '\t' << fmt("%.3f", r.p99) << '\t' << fmt("%.2f", r.cpu_us_per_id) << '\t'
      << fmt("%.1f", r.client_cpu_pct) << '\t' << fmt("%.1f", r.other_cpu_pct) << '\t'
      << fmt("%.1f", r.wal_per_id) << "\t\t" << r.check << '\n';
}

inline const CellResult* find_cell(const std::vector<CellResult>& rs, const std::string& mode, const std::string& method,
                                   int batch) {
    for (auto& r : rs)
        if (r.mode == mode && r.method == method && r.batch == batch && r.valid) return &r;
    return nullptr;
}

// Rate of a divided by rate of b, "n/a" when either is missing.
inline std::string ratio_text(const CellResult* a, const CellResult* b) {
    if (!a || !b || b->ids_per_s <= 0) return "n/a";
    return fmt("%.2f", a->ids_per_s / b->ids_per_s) + "x";
}

// Server CPU per message of x divided by n's: above 1 favours n.
inline std::string cpu_rel(const CellResult* n, const CellResult* x) {
    if (!n || !x || n->cpu_us_per_id <= 0 || x->cpu_us_per_id < 0) return "n/a";
    return fmt("%.2f", x->cpu_us_per_id / n->cpu_us_per_id);
}

inline void cell_row(std::ostream& md, const CellResult& r, bool with_batch) {
    md << "| " << r.label << " | ";
    if (with_batch) md << r.batch << " | ";
    md << (r.ids ? fmt_int(r.ids_per_s) : "-") << " | "
       << (r.ids ? fmt_int(r.min_ids_per_s) + "-" + fmt_int(r.max_ids_per_s) : "-") << " | "
       << (r.ids ? fmt_int(r.calls_per_s) : "-") << " | " << fmt("%.3f", r.p50) << " | " << fmt("%.3f", r.p99) << " | "
       << (r.cpu_us_per_id >= 0 ? fmt("%.2f", r.cpu_us_per_id) : std::string("n/a")) << " | "
       << (r.client_cpu_pct >= 0 ? fmt("%.0f", r.client_cpu_pct) : std::string("n/a")) << " | "
       << (r.other_cpu_pct >= 0 ? fmt("%.0f", r.other_cpu_pct) : std::string("n/a")) << " | " << fmt("%.0f", r.wal_per_id)
       << " | " << fmt_int(r.ids) << " | " << fmt("%.2f", r.secs) << " | " << r.check << " |\n";
}

// What the columns of cell_row mean.
inline std::string columns_note(const RunOptions& o, const char* unit, const char* call) {
    std::ostringstream s;
    s << unit << "s/s = messages in the timed window / wall seconds, all " << o.conns
      << " connections together; with " << o.rounds << " round(s) per cell it is the median, the range is min-max over "
      "the rounds (the other columns are from the round nearest the median; CPU is its own median). p50/p99 are per "
      << call << ". CPU us/" << unit << " = CPU time of the " << o.conns << " server backends (from /proc; WAL writer, "
      "checkpointer and client not included) / messages: the server's own work, which other load on the machine "
      "disturbs less than the rate. client % / other % = CPU of the driver / of everything else (WAL writer, "
      "checkpointer, autovacuum, other work on the machine) as a share of all cores during the window; a window in "
      "which other % exceeded " << fmt("%.0f", o.max_other) << " was measured again (up to " << o.retries
      << " time(s), within a budget of " << fmt("%.0f", 100 * o.retry_budget) << " % extra windows for the run) and the "
      "least disturbed kept; a result still above it says 'disturbed'. WAL B/" << unit << " = WAL bytes written in the "
      "window / messages.";
    return s.str();
}


// ---------------------------------------------------------------------------------------------
// Inbox messages: store_inbox_messages' p_messages and its checked call (inbox.cpp, purge.cpp)

constexpr const char* kInboxHandler = "Orders.Handlers.OrderPlacedHandler";
constexpr const char* kInboxType = "Orders.Contracts.OrderPlaced, Orders.Contracts";
constexpr const char* kInboxMetadata = "{\"TenantId\":\"tenant-042\",\"Transport\":\"rabbitmq\",\"Attempt\":1}";

// whizbang's store: $1 p_messages (jsonb text), $2 consumer; prepare it under a name.
constexpr const char* kStoreInboxSql =
    "SELECT message_id, stream_id, was_newly_created"
    " FROM whizbang.store_inbox_messages($1::jsonb, NULL, NULL, now(), 10000, $2::text)";

// One element of p_messages (the envelope from MessageFactory).
inline std::string inbox_element(const Uuid& id, const std::string& envelope, const std::string& ts) {
    std::string s;
    s.reserve(envelope.size() + 300);
    s += "{\"MessageId\":\"" + uuid_text(id) + "\",\"HandlerName\":\"" + kInboxHandler + "\",\"MessageType\":\"" +
         kInboxType + "\",\"Envelope\":" + envelope + ",\"Metadata\":" + kInboxMetadata +
         ",\"IsEvent\":true,\"SentAt\":\"" + ts + "\"}";
    return s;
}

// n new messages as one p_messages array; their ids are appended to `ids`.
inline std::string inbox_batch_json(MessageFactory& f, std::size_t n, std::vector<Uuid>& ids) {
    const std::string ts = now_text();
    std::string json = "[";
    for (std::size_t k = 0; k < n; ++k) {
        Uuid id = f.next_id();
        ids.push_back(id);
        if (k) json.push_back(',');
        json += inbox_element(id, f.envelope(id, ts), ts);
    }
    json.push_back(']');
    return json;
}

// One call of a prepared store statement (kStoreInboxSql or one returning the same columns)
// with its checks: one row per message, in input order, all new. `full` checks every row, else
// the count and both ends. Returns "" or the problem ("ERROR: ..." when the call failed).
inline std::string store_inbox_call(PGconn* c, const std::string& statement, const std::string& json,
                                    const std::string& consumer, const Uuid* ids, int batch, bool full) {
    const char* values[2] = {json.c_str(), consumer.c_str()};
    PgResult r(PQexecPrepared(c, statement.c_str(), 2, values, nullptr, nullptr, 0));
    if (PQresultStatus(r.r) != PGRES_TUPLES_OK) return "ERROR: " + one_line(PQresultErrorMessage(r.r));
    int rows = PQntuples(r.r);
    if (rows != batch) return "returned " + std::to_string(rows) + " rows, expected " + std::to_string(batch);
    auto bad = [&](int i) -> std::string {
        std::string want = uuid_text(ids[i]);
        if (want != PQgetvalue(r.r, i, 0)) return "row " + std::to_string(i) + " is " + PQgetvalue(r.r, i, 0) + ", input has " + want;
        if (!PQgetisnull(r.r, i, 1)) return "row " + std::to_string(i) + " has a stream id";
        if (std::strcmp(PQgetvalue(r.r, i, 2), "t") != 0) return "row " + std::to_string(i) + " not newly created";
        return "";
    };
    if (!full) {
        std::string e = bad(0);
        return e.empty() ? bad(rows - 1) : e;
    }
    for (int i = 0; i < rows; ++i) {
        std::string e = bad(i);
        if (!e.empty()) return e;
    }
    return "";
}

}  // namespace bench
