#include "relay/connection.h"

#include <poll.h>
#include <sys/time.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <vector>

#include "relay/exit_codes.h"
#include "relay/log.h"

namespace whizbang::relay {
namespace {

namespace rep = core::replication;

struct ResultDeleter {
    void operator()(PGresult* r) const { PQclear(r); }
};
using Result = std::unique_ptr<PGresult, ResultDeleter>;

std::string trimmed(const char* s) {
    std::string t = s != nullptr ? s : "";
    while (!t.empty() && (t.back() == '\n' || t.back() == ' ')) t.pop_back();
    return t;
}

std::int64_t now_pg_us() {
    timeval tv{};
    gettimeofday(&tv, nullptr);
    return rep::postgres_us_from_unix(static_cast<std::int64_t>(tv.tv_sec) * 1000000 + tv.tv_usec);
}

}  // namespace

ReplicationConnection::ReplicationConnection(const std::string& conninfo) {
    // dbname first and expanded, replication after it: a conninfo that names replication
    // itself cannot turn the connection into a physical or plain one.
    std::vector<const char*> keys, values;
    if (!conninfo.empty()) keys.push_back("dbname"), values.push_back(conninfo.c_str());
    keys.push_back("replication"), values.push_back("database");
    keys.push_back("fallback_application_name"), values.push_back("whizbang-relay");
    keys.push_back(nullptr), values.push_back(nullptr);
    conn_ = PQconnectdbParams(keys.data(), values.data(), 1);
    if (conn_ == nullptr) throw ConnectionLost("out of memory for a connection");
    if (PQstatus(conn_) != CONNECTION_OK) {
        const std::string why = trimmed(PQerrorMessage(conn_));
        PQfinish(conn_);
        conn_ = nullptr;
        throw ConnectionLost("could not connect: " + why);
    }
}

ReplicationConnection::~ReplicationConnection() {
    if (conn_ != nullptr) PQfinish(conn_);
}

void ReplicationConnection::lost(const std::string& what) {
    throw ConnectionLost(what + ": " + trimmed(PQerrorMessage(conn_)));
}

std::string ReplicationConnection::literal(const std::string& s) {
    char* q = PQescapeLiteral(conn_, s.c_str(), s.size());
    if (q == nullptr) lost("could not quote a literal");
    std::string out(q);
    PQfreemem(q);
    return out;
}

std::string ReplicationConnection::identifier(const std::string& s) {
    char* q = PQescapeIdentifier(conn_, s.c_str(), s.size());
    if (q == nullptr) lost("could not quote an identifier");
    std::string out(q);
    PQfreemem(q);
    return out;
}

SlotState ReplicationConnection::check_slot(const std::string& slot, const std::string& publication) {
    const int version = PQserverVersion(conn_);
    // A replication connection takes simple queries only (no parameters): values are quoted.
    // two_phase exists from 14, conflicting in 16, invalidation_reason from 17.
    std::string sql =
        "SELECT plugin, slot_type, database, database OPERATOR(pg_catalog.=) pg_catalog.current_database(), "
        "confirmed_flush_lsn, wal_status, ";
    sql += version >= 140000 ? "two_phase, " : "false, ";
    sql += version >= 170000 ? "invalidation_reason, " : version >= 160000 ? "CASE WHEN conflicting THEN 'conflicting' END, " : "NULL, ";
    sql += "pg_catalog.current_database() FROM pg_catalog.pg_replication_slots WHERE slot_name OPERATOR(pg_catalog.=) " +
           literal(slot);
    Result r(PQexec(conn_, sql.c_str()));
    if (PQresultStatus(r.get()) != PGRES_TUPLES_OK) lost("could not read pg_replication_slots");
    if (PQntuples(r.get()) == 0)
        throw Fatal(kExitSlotUnusable, "replication slot \"" + slot + "\" does not exist; create it with SELECT pg_create_logical_replication_slot('" +
                                           slot + "', 'pgoutput')");
    auto get = [&](int col) { return std::string(PQgetvalue(r.get(), 0, col)); };
    auto null = [&](int col) { return PQgetisnull(r.get(), 0, col) != 0; };
    if (get(1) != "logical")
        throw Fatal(kExitSlotUnusable, "replication slot \"" + slot + "\" is a " + get(1) + " slot; whizbang-relay reads a logical slot with plugin pgoutput");
    if (get(0) != "pgoutput")
        throw Fatal(kExitSlotUnusable, "replication slot \"" + slot + "\" uses plugin " + get(0) + "; whizbang-relay reads pgoutput slots");
    if (get(3) != "t")
        throw Fatal(kExitSlotUnusable, "replication slot \"" + slot + "\" belongs to database " + get(2) + ", not " + get(8) +
                                           " (set --dbname to the slot's database)");
    if (get(6) == "t")
        throw Fatal(kExitSlotUnusable, "replication slot \"" + slot +
                                           "\" was created with two_phase: it would hand over a prepared transaction's messages at PREPARE "
                                           "TRANSACTION, before COMMIT PREPARED decides whether they happen. Create a slot without it: "
                                           "pg_create_logical_replication_slot(name, 'pgoutput', false, false)");
    if (get(5) == "lost" || !null(7)) {
        std::string why = get(5) == "lost" ? "its WAL was removed (wal_status lost, max_slot_wal_keep_size)" : "";
        if (!null(7)) why += std::string(why.empty() ? "" : "; ") + "invalidation_reason " + get(7);
        throw Fatal(kExitSlotLost, "replication slot \"" + slot + "\" has been invalidated: " + why +
                                       ". Messages emitted after its confirmed position " + (null(4) ? std::string("?") : get(4)) +
                                       " are LOST and cannot be relayed. Recover them from their source, then drop and "
                                       "create the slot again.");
    }
    if (get(5) == "unreserved")
        log_warning("replication slot \"" + slot + "\" is about to lose WAL it needs (wal_status unreserved): the relay must catch up "
                    "before max_slot_wal_keep_size is exceeded");
    SlotState state;
    state.wal_status = get(5);
    if (!null(4) && !rep::parse_lsn(get(4), state.confirmed_flush))
        lost("unreadable confirmed_flush_lsn '" + get(4) + "'");

    Result p(PQexec(conn_, ("SELECT 1 FROM pg_catalog.pg_publication WHERE pubname OPERATOR(pg_catalog.=) " + literal(publication)).c_str()));
    if (PQresultStatus(p.get()) != PGRES_TUPLES_OK) lost("could not read pg_publication");
    if (PQntuples(p.get()) == 0)
        throw Fatal(kExitSlotUnusable, "publication \"" + publication + "\" does not exist in database " + get(8) +
                                           "; create an empty one: CREATE PUBLICATION " + identifier(publication) +
                                           " (or name another with --publication)");
    return state;
}

void ReplicationConnection::start(const std::string& slot, const std::string& publication) {
    // publication_names is a string holding a list of identifiers: quoted as an identifier,
    // then the whole as a literal.
    const std::string sql = "START_REPLICATION SLOT " + identifier(slot) +
                            " LOGICAL 0/0 (proto_version '1', publication_names " + literal(identifier(publication)) +
                            ", messages 'true')";
    Result r(PQexec(conn_, sql.c_str()));
    if (PQresultStatus(r.get()) != PGRES_COPY_BOTH) lost("START_REPLICATION failed");
}

int ReplicationConnection::read(std::string& out) {
    char* buf = nullptr;
    const int n = PQgetCopyData(conn_, &buf, 1);
    if (n > 0) {
        out.assign(buf, static_cast<std::size_t>(n));
        PQfreemem(buf);
        return 1;
    }
    if (n == 0) return 0;
    if (n == -1) {
        // The server ended the stream: its result says why.
        Result r(PQgetResult(conn_));
        const std::string why = r ? trimmed(PQresultErrorMessage(r.get())) : "";
        throw ConnectionLost("the server ended the replication stream" + (why.empty() ? std::string() : ": " + why));
    }
    lost("the replication stream broke");
}

void ReplicationConnection::wait(int timeout_ms) {
    pollfd p{};
    p.fd = PQsocket(conn_);
    p.events = POLLIN;
    if (p.fd < 0) lost("no socket");
    const int rc = poll(&p, 1, timeout_ms);
    if (rc < 0 && errno != EINTR) throw ConnectionLost(std::string("poll failed: ") + std::strerror(errno));
    if (rc > 0 && PQconsumeInput(conn_) == 0) lost("the connection broke");
}

void ReplicationConnection::send_status(Lsn lsn, bool reply_requested) {
    const std::string msg = rep::encode_status_update(lsn, now_pg_us(), reply_requested);
    if (PQputCopyData(conn_, msg.data(), static_cast<int>(msg.size())) != 1 || PQflush(conn_) != 0)
        lost("could not send a status update");
}

}  // namespace whizbang::relay
