// Shared machinery of the benchmark load drivers (driver.cpp: dedup, inbox.cpp: inbox,
// outbox.cpp: outbox).
//
// Connections and admin statements, COPY, UUIDv7 ids, the CPU and WAL accounting of a timed
// window (the connections' server backends, the driver itself and everything else on the
// machine, from /proc), the start gate that releases all threads together, the repetition of
// windows disturbed by other work, and the folding of rounds into a median with its range.
// For the message drivers (inbox, outbox): ~1 KB JSON envelopes, the per-connection worker
// with its counters and problems, the options every run takes, and the result tables.
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

// CPU time a local process has used, in seconds (schedstat: ns on CPU; else stat: ticks);
// negative when it cannot be read (server on another machine).
inline double process_cpu_seconds(int pid) {
    std::ifstream ss("/proc/" + std::to_string(pid) + "/schedstat");
    unsigned long long ns = 0;
    if (ss >> ns) return ns / 1e9;
    std::ifstream st("/proc/" + std::to_string(pid) + "/stat");
    std::string line;
    if (!std::getline(st, line)) return -1;
    auto close = line.rfind(')');
    if (close == std::string::npos) return -1;
    std::istringstream in(line.substr(close + 2));
    std::string field;
    unsigned long long ut = 0, stt = 0;
    for (int i = 3; i <= 15 && in >> field; ++i) {
        if (i == 14) ut = std::stoull(field);
        if (i == 15) stt = std::stoull(field);
    }
    return static_cast<double>(ut + stt) / sysconf(_SC_CLK_TCK);
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

}  // namespace bench
