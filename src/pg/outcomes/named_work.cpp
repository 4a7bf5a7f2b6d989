// The shared part of the calls that name work rows by message id (named_work.h).
#include <algorithm>
#include <cstring>

#include "pg/boundary/args.h"
#include "pg/boundary/arrays.h"
#include "pg/boundary/required_privileges.h"
#include "pg/boundary/spi.h"
#include "pg/lease/lease_store.h"
#include "pg/outcomes/named_work.h"
#include "pg/store/dedup.h"

namespace whizbang::pg {
namespace {

WorkPlan lock_named_plan(
    "SELECT w.message_id, w.lease_token, w.attempts, w.stream_id, w.stream_seq, w.lease_expiry, w.scheduled_for"
    "  FROM whizbang.wh_inbox w"
    " WHERE w.message_id OPERATOR(pg_catalog.=) ANY ($2) AND w.consumer OPERATOR(pg_catalog.=) $1"
    "   AND w.processed_at IS NULL"
    " ORDER BY w.message_id FOR UPDATE OF w",
    {TEXTOID, UUIDARRAYOID});

}  // namespace

// `tokens_arg` < 0: the function takes no tokens (cancel_work).
void read_named(FunctionCallInfo fcinfo, Named& n, int tokens_arg, bool tokens_required, int consumer_arg_no,
                int now_arg) {
    n.source = *source_arg(fcinfo, 0, false);
    n.ids = uuid_array_arg(fcinfo, 1, "p_message_ids", false).value_or(std::vector<core::Uuid>{});
    if (tokens_required) require_not_null(fcinfo, tokens_arg, "p_lease_tokens");
    n.lease_required = tokens_required;
    if (tokens_arg >= 0) n.tokens = int8_array_arg(fcinfo, tokens_arg, "p_lease_tokens");
    if (n.tokens) require_same_length(n.ids.size(), "p_message_ids", n.tokens->size(), "p_lease_tokens");
    // DESIGN §3.4: p_consumer is ignored for the outbox.
    if (n.source == Source::inbox) n.consumer = consumer_arg(fcinfo, consumer_arg_no);
    n.now = timestamptz_arg(fcinfo, now_arg, "p_now");
}

void lock_named(Named& n) {
    n.consumer_datum = text_datum(n.consumer);
    if (n.ids.empty()) return;
    uint64 rows = lock_named_plan[n.source].execute({n.consumer_datum, uuid_array(n.ids)});
    for (uint64 r = 0; r < rows; ++r) {
        bool isnull = false, token_null = false;
        core::Uuid id = uuid_from_datum(spi_value(r, 1, &isnull));
        Datum token = spi_value(r, 2, &token_null);
        Row row;
        if (!token_null) row.token = DatumGetInt64(token);
        row.attempts = DatumGetInt32(spi_value(r, 3, &isnull));
        bool no_stream = false;
        Datum stream = spi_value(r, 4, &no_stream);
        if (!no_stream) {
            row.stream = uuid_from_datum(stream);
            row.seq = DatumGetInt64(spi_value(r, 5, &isnull));
        }
        bool no_expiry = false;
        Datum expiry = spi_value(r, 6, &no_expiry);
        if (!no_expiry) row.lease_expiry = DatumGetTimestampTz(expiry);
        row.due = DatumGetTimestampTz(spi_value(r, 7, &isnull));
        if (shared_leases_active()) {
            // The row's lease lives in shared memory; one this transaction is already ending
            // is no lease any more.
            const std::optional<shm::Lease> lease = shm::get({n.source, id, n.consumer});
            if (lease && !lease->ending) {
                row.token = lease->token;
                row.lease_expiry = lease->expiry;
                row.attempts = lease->attempts;
            }
        }
        n.rows[id] = row;
    }
}

// The named rows whose existence decides between not_found and lease_lost when they hold no
// lease of the caller's.
static WorkPlan unfinished_plan(
    "SELECT w.message_id FROM whizbang.wh_inbox w"
    " WHERE w.message_id OPERATOR(pg_catalog.=) ANY ($2) AND w.consumer OPERATOR(pg_catalog.=) $1"
    "   AND w.processed_at IS NULL",
    {TEXTOID, UUIDARRAYOID});

// Shared-memory store, calls with tokens: the rows a caller holds are known from their leases,
// so no row is locked first. A row is written only by the holder of its lease (claims write
// only rows whose lease they took over), so fenced calls never wait for each other; the rows
// they delete or update are locked by those statements.
void read_held(Named& n) {
    // As the table store's row locks would, refuse where the change could not be written.
    pg_call([] {
        PreventCommandIfReadOnly("a lease change");
        PreventCommandDuringRecovery("a lease change");
    });
    n.consumer_datum = text_datum(n.consumer);
    std::vector<core::Uuid> unleased;
    for (const core::Uuid& id : n.ids) {
        if (n.rows.count(id)) continue;
        const std::optional<shm::Lease> lease = shm::get({n.source, id, n.consumer});
        if (!lease || lease->ending) {
            unleased.push_back(id);
            continue;
        }
        Row row;
        row.token = lease->token;
        row.attempts = lease->attempts;
        if (lease->has_stream) row.stream = lease->stream;
        row.seq = lease->seq;
        row.lease_expiry = lease->expiry;
        n.rows[id] = row;
    }
    if (unleased.empty()) return;
    uint64 rows = unfinished_plan[n.source].execute({n.consumer_datum, uuid_array(unleased)});
    for (uint64 r = 0; r < rows; ++r) {
        bool isnull = false;
        n.rows[uuid_from_datum(spi_value(r, 1, &isnull))] = Row{};  // no lease: lease_lost
    }
}

void find_named(Named& n) {
    if (shared_leases_active() && n.tokens) read_held(n);
    else lock_named(n);
}

bool end_shared_lease(const Named& n, std::size_t i) {
    if (!shared_leases_active()) return true;
    bool mismatch = false;
    std::optional<int64_t> token;
    if (n.tokens) {
        token = (*n.tokens)[i];
    } else {
        // Unfenced (and cancel_work): the lease the row had when it was locked, or none; a claim
        // that took the row over since then keeps it.
        auto it = n.rows.find(n.ids[i]);
        token = it != n.rows.end() && it->second.token ? *it->second.token : shm::kNoLease;
    }
    (void)shm::end({n.source, n.ids[i], n.consumer}, token, &mismatch);
    return !mismatch;
}

const char* refusal(const Named& n, std::size_t i) {
    auto it = n.rows.find(n.ids[i]);
    if (it == n.rows.end()) return "not_found";
    // Only a NULL array skips fencing (DESIGN §3.4); a NULL element is a token that is nobody's
    // current one. Renewal and release also need a current lease to act on.
    if (!n.tokens) return n.lease_required ? "lease_lost" : nullptr;
    const std::optional<int64_t> given = (*n.tokens)[i];
    if (!given || !it->second.token || *given != *it->second.token) return "lease_lost";
    return nullptr;
}

void add_run_after(const Named& n, const Row& row, std::vector<RunAfter>& runs) {
    if (row.stream && row.token) runs.push_back({n.consumer, *row.stream, row.seq, *row.token});
}

void emit(FunctionCallInfo fcinfo, const Named& n, const std::vector<Outcome>& outcomes) {
    ReturnSetInfo* rsinfo = reinterpret_cast<ReturnSetInfo*>(fcinfo->resultinfo);
    std::vector<Datum> words(outcomes.size());
    for (std::size_t i = 0; i < outcomes.size(); ++i) words[i] = text_datum(outcomes[i].word);
    pg_call([&] {
        for (std::size_t i = 0; i < outcomes.size(); ++i) {
            Datum values[3] = {PointerGetDatum(n.ids[i].data()), words[i],
                               outcomes[i].scheduled_for ? TimestampTzGetDatum(*outcomes[i].scheduled_for) : (Datum)0};
            bool nulls[3] = {false, false, !outcomes[i].scheduled_for};
            tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
        }
    });
}

// Inbox messages with unfinished work under another consumer, of the ids named.
static CachedPlan other_consumers_plan(
    "SELECT w.message_id, w.consumer::pg_catalog.text FROM whizbang.wh_inbox w"
    " WHERE w.message_id OPERATOR(pg_catalog.=) ANY ($2) AND w.consumer OPERATOR(pg_catalog.<>) $1"
    "   AND w.processed_at IS NULL"
    " ORDER BY w.message_id, w.consumer",
    {TEXTOID, UUIDARRAYOID});

// not_found stays the outcome (the outcome words are DESIGN's), but an inbox id that has work
// under another consumer than p_consumer is almost always a call with the wrong p_consumer (or
// none): a NOTICE says so, per such id, with the consumer to pass. Asked only when an outcome
// is not_found; needs an open SPI connection.
void explain_not_found(const char* function, const Named& n, const std::vector<Outcome>& outcomes) {
    if (n.source != Source::inbox) return;
    std::vector<core::Uuid> missing;
    for (std::size_t i = 0; i < outcomes.size(); ++i)
        if (strcmp(outcomes[i].word, "not_found") == 0) missing.push_back(n.ids[i]);
    if (missing.empty()) return;
    std::sort(missing.begin(), missing.end());
    missing.erase(std::unique(missing.begin(), missing.end()), missing.end());
    const uint64 rows = other_consumers_plan.execute({n.consumer_datum, uuid_array(missing)});
    std::map<core::Uuid, std::string> others;
    for (uint64 r = 0; r < rows; ++r) {
        bool isnull = false;
        const core::Uuid id = uuid_from_datum(spi_value(r, 1, &isnull));
        std::string& list = others[id];
        list += (list.empty() ? "'" : ", '") + text_from_datum(spi_value(r, 2, &isnull)) + "'";
    }
    for (const auto& [id, consumers] : others) {
        const std::string message = std::string("whizbang.") + function + ": message " + core::to_string(id) +
                                    " is not_found for consumer '" + n.consumer + "': it has work for consumer " +
                                    consumers;
        const std::string hint = "Pass the consumer the message was stored for: p_consumer => " +
                                 consumers.substr(0, consumers.find(',')) + ".";
        pg_call([&] {
            ereport(NOTICE, (errmsg_internal("%s", message.c_str()),
                             errdetail("not_found means that the message has no unfinished work for p_consumer "
                                       "(the default consumer is '')."),
                             errhint("%s", hint.c_str())));
        });
    }
}

void require_source_privileges(const char* function, Source source) {
    CallShape shape;
    shape.inbox = source == Source::inbox;
    shape.outbox = source == Source::outbox;
    require_privileges(function, shape);
}

}  // namespace whizbang::pg
