// Storing new messages as work, for the inbox and the outbox (see work_store.h).
//
// Streams are numbered under a row lock of their counter (wh_*_streams), so the messages of one
// stream are ordered by the commit order of the storing transactions, and inside a batch by
// element order. Counters are locked in stream id order, and outbox rows are inserted in message
// id order, so overlapping batches wait for each other at most (DESIGN §1.5).
#include <algorithm>
#include <map>
#include <set>

#include "core/partition.h"
#include "pg/boundary/args.h"
#include "pg/ops/counters.h"
#include "pg/boundary/arrays.h"
#include "pg/lease/lease_store.h"
#include "pg/citus/shard_scope.h"
#include "pg/boundary/spi.h"
#include "pg/store/work_store.h"
#include "pg/wait/work_wait.h"

namespace whizbang::pg {
namespace {

WorkPlan number_streams_plan(
    "INSERT INTO whizbang.wh_inbox_streams AS s (consumer, stream_id, last_seq/*+SHARD , partition_number*/)"
    " SELECT $1, u.stream_id, u.n/*+SHARD , u.part*/"
    " FROM ROWS FROM (pg_catalog.unnest($2), pg_catalog.unnest($3)/*+SHARD , pg_catalog.unnest($4)*/)"
    "  AS u(stream_id, n/*+SHARD , part*/)"
    " ON CONFLICT (stream_id, consumer) DO UPDATE SET last_seq = s.last_seq OPERATOR(pg_catalog.+) excluded.last_seq"
    " RETURNING s.stream_id, s.last_seq",
    {TEXTOID, UUIDARRAYOID, INT8ARRAYOID, INT4ARRAYOID});

WorkPlan busy_streams_plan(
    "SELECT DISTINCT w.stream_id FROM whizbang.wh_inbox w"
    " WHERE w.consumer OPERATOR(pg_catalog.=) $1 AND w.stream_id OPERATOR(pg_catalog.=) ANY ($2)"
    "   AND w.processed_at IS NULL",
    {TEXTOID, UUIDARRAYOID});

// One row per new message, message and work state alike: the stream number, the partition,
// the due time and, with the row lease store, a pre-lease ($4-$6, applied where pre is true).
CachedPlan insert_inbox_plan(
    "INSERT INTO whizbang.wh_inbox (consumer, message_id, handler_name, message_type, envelope, metadata, scope,"
    "  stream_id, is_event, sent_at, received_at, partition_number, stream_seq, scheduled_for, lease_instance,"
    "  lease_token, lease_expiry)"
    " SELECT $1, u.id, u.handler, u.type, u.envelope, u.metadata, u.scope, u.stream_id, u.is_event, u.sent_at, $2,"
    "  u.part, u.seq, u.due, CASE WHEN u.pre THEN $4 END, CASE WHEN u.pre THEN $5 END, CASE WHEN u.pre THEN $6 END"
    " FROM ROWS FROM (pg_catalog.unnest($3), pg_catalog.unnest($7), pg_catalog.unnest($8), pg_catalog.unnest($9),"
    "  pg_catalog.unnest($10), pg_catalog.unnest($11), pg_catalog.unnest($12), pg_catalog.unnest($13),"
    "  pg_catalog.unnest($14), pg_catalog.unnest($15), pg_catalog.unnest($16), pg_catalog.unnest($17),"
    "  pg_catalog.unnest($18))"
    "  AS u(id, handler, type, envelope, metadata, scope, stream_id, is_event, sent_at, part, seq, due, pre)",
    {TEXTOID, TIMESTAMPTZOID, UUIDARRAYOID, UUIDOID, INT8OID, TIMESTAMPTZOID, TEXTARRAYOID, TEXTARRAYOID,
     JSONBARRAYOID, JSONBARRAYOID, JSONBARRAYOID, UUIDARRAYOID, BOOLARRAYOID, TIMESTAMPTZARRAYOID, INT4ARRAYOID,
     INT8ARRAYOID, TIMESTAMPTZARRAYOID, BOOLARRAYOID});

// No dedup table for the outbox (DESIGN §3.3): the primary key decides, and an id already stored
// is left as it is. Inserted in id order (see above).
CachedPlan insert_outbox_plan(
    "INSERT INTO whizbang.wh_outbox (message_id, destination, message_type, event_data, metadata, scope, stream_id,"
    "  is_event, created_at, partition_number, stream_seq, scheduled_for, lease_instance, lease_token, lease_expiry)"
    " SELECT u.id, u.destination, u.type, u.envelope, u.metadata, u.scope, u.stream_id, u.is_event, $2,"
    "  u.part, u.seq, u.due, CASE WHEN u.pre THEN $4 END, CASE WHEN u.pre THEN $5 END, CASE WHEN u.pre THEN $6 END"
    " FROM ROWS FROM (pg_catalog.unnest($3), pg_catalog.unnest($7), pg_catalog.unnest($8), pg_catalog.unnest($9),"
    "  pg_catalog.unnest($10), pg_catalog.unnest($11), pg_catalog.unnest($12), pg_catalog.unnest($13),"
    "  pg_catalog.unnest($15), pg_catalog.unnest($16), pg_catalog.unnest($17), pg_catalog.unnest($18))"
    "  AS u(id, destination, type, envelope, metadata, scope, stream_id, is_event, part, seq, due, pre)"
    " ORDER BY u.id"
    " ON CONFLICT (message_id) DO NOTHING"
    " RETURNING message_id",
    {TEXTOID, TIMESTAMPTZOID, UUIDARRAYOID, UUIDOID, INT8OID, TIMESTAMPTZOID, TEXTARRAYOID, TEXTARRAYOID,
     JSONBARRAYOID, JSONBARRAYOID, JSONBARRAYOID, UUIDARRAYOID, BOOLARRAYOID, TIMESTAMPTZARRAYOID, INT4ARRAYOID,
     INT8ARRAYOID, TIMESTAMPTZARRAYOID, BOOLARRAYOID});

// The split layout (before 0.14.0): the message row, then the work row of each message written
// ($19). Their parameters are the one-row inserts' ($4-$6 and $15-$18 unused by the message).
const std::vector<Oid> kSplitWorkTypes{TEXTOID, TIMESTAMPTZOID, UUIDARRAYOID, UUIDOID, INT8OID, TIMESTAMPTZOID,
                                       TEXTARRAYOID, TEXTARRAYOID, JSONBARRAYOID, JSONBARRAYOID, JSONBARRAYOID,
                                       UUIDARRAYOID, BOOLARRAYOID, TIMESTAMPTZARRAYOID, INT4ARRAYOID, INT8ARRAYOID,
                                       TIMESTAMPTZARRAYOID, BOOLARRAYOID, BOOLARRAYOID};
CachedPlan split_inbox_message_plan(
    "INSERT INTO whizbang.wh_inbox/*message*/ (consumer, message_id, handler_name, message_type, envelope, metadata,"
    "  scope, stream_id, is_event, sent_at, received_at/*+SHARD , partition_number*/)"
    " SELECT $1, u.id, u.handler, u.type, u.envelope, u.metadata, u.scope, u.stream_id, u.is_event, u.sent_at, $2"
    "  /*+SHARD , u.part*/"
    " FROM ROWS FROM (pg_catalog.unnest($3), pg_catalog.unnest($7), pg_catalog.unnest($8), pg_catalog.unnest($9),"
    "  pg_catalog.unnest($10), pg_catalog.unnest($11), pg_catalog.unnest($12), pg_catalog.unnest($13),"
    "  pg_catalog.unnest($14), pg_catalog.unnest($15))"
    "  AS u(id, handler, type, envelope, metadata, scope, stream_id, is_event, sent_at, part)",
    std::vector<Oid>(kSplitWorkTypes.begin(), kSplitWorkTypes.end() - 1));
CachedPlan split_outbox_message_plan(
    "INSERT INTO whizbang.wh_outbox/*message*/ (message_id, destination, message_type, event_data, metadata, scope,"
    "  stream_id, is_event, created_at/*+SHARD , partition_number*/)"
    " SELECT u.id, u.destination, u.type, u.envelope, u.metadata, u.scope, u.stream_id, u.is_event, $2"
    "  /*+SHARD , u.part*/"
    " FROM ROWS FROM (pg_catalog.unnest($3), pg_catalog.unnest($7), pg_catalog.unnest($8), pg_catalog.unnest($9),"
    "  pg_catalog.unnest($10), pg_catalog.unnest($11), pg_catalog.unnest($12), pg_catalog.unnest($13),"
    "  pg_catalog.unnest($15))"
    "  AS u(id, destination, type, envelope, metadata, scope, stream_id, is_event, part)"
    " ORDER BY u.id"
    " ON CONFLICT (message_id) DO NOTHING"
    " RETURNING message_id",
    std::vector<Oid>(kSplitWorkTypes.begin(), kSplitWorkTypes.end() - 1));
WorkPlan split_work_plan(
    "INSERT INTO whizbang.wh_inbox (consumer, message_id, stream_id, stream_seq, partition_number, scheduled_for,"
    "  lease_instance, lease_token, lease_expiry)"
    " SELECT $1, u.id, u.stream_id, u.seq, u.part, u.due,"
    "  CASE WHEN u.pre THEN $4 END, CASE WHEN u.pre THEN $5 END, CASE WHEN u.pre THEN $6 END"
    " FROM ROWS FROM (pg_catalog.unnest($3), pg_catalog.unnest($12), pg_catalog.unnest($16), pg_catalog.unnest($15),"
    "  pg_catalog.unnest($17), pg_catalog.unnest($18), pg_catalog.unnest($19))"
    "  AS u(id, stream_id, seq, part, due, pre, written)"
    " WHERE u.written",
    kSplitWorkTypes);

WorkPlan insert_preleased_plan(
    "INSERT INTO whizbang.wh_inbox_preleased (instance_id, consumer, message_id, lease_token/*+SHARD , partition_number*/)"
    " SELECT $1, $2, u.id, $3/*+SHARD , u.part*/"
    " FROM ROWS FROM (pg_catalog.unnest($4)/*+SHARD , pg_catalog.unnest($5)*/) AS u(id/*+SHARD , part*/)",
    {UUIDOID, TEXTOID, INT8OID, UUIDARRAYOID, INT4ARRAYOID});


// The distribution column of rows written for `keys` (docs/scaleout.md): their partition inside a
// routed call on a Citus node (shard_scope.h), NULL on a single server.
Datum distribution_column(const std::vector<core::Uuid>& keys, int partition_count) {
    std::vector<std::optional<int>> parts(keys.size());
    if (in_shard_scope())
        for (std::size_t k = 0; k < keys.size(); ++k) parts[k] = core::partition_of(keys[k], partition_count);
    return nullable_int4_array(parts);
}

// Per new message (by input index): its arrival number within its stream.
std::map<std::size_t, int64_t> number_streams(Source source, Datum consumer, const std::vector<Message>& messages,
                                              const std::vector<std::size_t>& fresh, int partition_count) {
    std::map<core::Uuid, int64_t> per_stream;  // sorted: counters are locked in one order
    for (std::size_t i : fresh)
        if (messages[i].stream_id) ++per_stream[*messages[i].stream_id];
    std::map<std::size_t, int64_t> seq;
    if (per_stream.empty()) return seq;
    std::vector<core::Uuid> streams;
    std::vector<int64_t> counts;
    for (const auto& [stream, n] : per_stream) {
        streams.push_back(stream);
        counts.push_back(n);
    }
    uint64 rows = number_streams_plan[source].execute(
        {consumer, uuid_array(streams), int8_array(counts), distribution_column(streams, partition_count)});
    std::map<core::Uuid, int64_t> next;  // first number of this batch, per stream
    for (uint64 r = 0; r < rows; ++r) {
        bool isnull = false;
        core::Uuid stream = uuid_from_datum(spi_value(r, 1, &isnull));
        int64_t last = DatumGetInt64(spi_value(r, 2, &isnull));
        next[stream] = last - per_stream[stream] + 1;
    }
    for (std::size_t i : fresh)
        if (messages[i].stream_id) seq[i] = next[*messages[i].stream_id]++;
    return seq;
}

// Streams of `fresh` that already have unfinished work: their new rows wait their turn.
std::set<core::Uuid> busy_streams(Source source, Datum consumer, const std::vector<Message>& messages,
                                  const std::vector<std::size_t>& fresh) {
    std::set<core::Uuid> wanted, busy;
    for (std::size_t i : fresh)
        if (messages[i].stream_id) wanted.insert(*messages[i].stream_id);
    if (wanted.empty()) return busy;
    uint64 rows = busy_streams_plan[source].execute({consumer, uuid_array(std::vector<core::Uuid>(wanted.begin(), wanted.end()))});
    for (uint64 r = 0; r < rows; ++r) {
        bool isnull = false;
        busy.insert(uuid_from_datum(spi_value(r, 1, &isnull)));
    }
    return busy;
}

// Writes the rows of messages[rows[k]] (message and work state, DESIGN §3.2/§3.3); returns the
// elements of `rows` that were written (the outbox leaves an id already stored as it is).
std::vector<std::size_t> write_rows(const StoreOptions& o, const std::vector<Message>& messages,
                                    const std::vector<std::size_t>& rows) {
    const Source source = o.source;
    Datum consumer = text_datum(o.consumer);
    // Numbered before the insert: an outbox id found stored already leaves a gap in its
    // stream's numbers, which orders nothing differently.
    std::map<std::size_t, int64_t> seq = number_streams(source, consumer, messages, rows, o.partition_count);
    std::set<core::Uuid> busy;
    int64_t token = 0;
    if (o.instance) {
        busy = busy_streams(source, consumer, messages, rows);
        token = next_lease_token();
    }

    const std::size_t n = rows.size();
    std::vector<core::Uuid> ids(n);
    std::vector<std::optional<core::Uuid>> streams(n);
    std::vector<std::string> targets(n), types(n);
    std::vector<Datum> envelopes(n), metadata(n), scopes(n), seq_values(n);
    std::vector<char> no_nulls(n, 0), metadata_nulls(n, 0), scope_nulls(n, 0), is_event(n), seq_nulls(n), pre_leased(n);
    std::vector<std::optional<TimestampTz>> sent(n);
    std::vector<TimestampTz> due(n);
    std::vector<int> partitions(n);
    for (std::size_t k = 0; k < n; ++k) {
        const Message& m = messages[rows[k]];
        ids[k] = m.id;
        streams[k] = m.stream_id;
        targets[k] = m.target;
        types[k] = m.message_type;
        envelopes[k] = m.envelope;
        metadata[k] = m.metadata.value_or(0);
        metadata_nulls[k] = !m.metadata;
        scopes[k] = m.scope.value_or(0);
        scope_nulls[k] = !m.scope;
        is_event[k] = m.is_event;
        sent[k] = m.sent_at;
        due[k] = m.scheduled_for.value_or(o.now);
        partitions[k] = core::partition_of(m.stream_id.value_or(m.id), o.partition_count);
        auto s = seq.find(rows[k]);
        seq_nulls[k] = s == seq.end();
        seq_values[k] = s == seq.end() ? (Datum)0 : Int64GetDatum(s->second);
        // Only rows the instance would be handed now anyway: due, and with no other unfinished
        // row in their stream — the first new row of an idle stream. The rows after it wait
        // for it like any follower.
        const bool due_now = due[k] <= o.now;
        pre_leased[k] = o.instance && due_now && !(m.stream_id && busy.count(*m.stream_id));
        if (m.stream_id) busy.insert(*m.stream_id);
    }
    // Row lease store: the pre-lease is written into the row. Shared-memory store: the rows carry
    // no lease; theirs is taken in shared memory once the row is written (below).
    const bool in_rows = o.instance && !shared_leases_active();
    const char nulls[] = {' ', ' ', ' ', in_rows ? ' ' : 'n', in_rows ? ' ' : 'n', in_rows ? ' ' : 'n',
                          ' ', ' ', ' ', ' ', ' ', ' ', ' ', ' ', ' ', ' ', ' ', ' ', '\0'};
    const std::vector<Datum> args{consumer,
                                  TimestampTzGetDatum(o.now),
                                  uuid_array(ids),
                                  in_rows ? PointerGetDatum(o.instance->data()) : (Datum)0,
                                  Int64GetDatum(token),
                                  TimestampTzGetDatum(o.lease_expiry),
                                  text_array(targets),
                                  text_array(types),
                                  datum_array(envelopes, no_nulls, JSONBOID),
                                  datum_array(metadata, metadata_nulls, JSONBOID),
                                  datum_array(scopes, scope_nulls, JSONBOID),
                                  uuid_array(streams),
                                  bool_array(is_event),
                                  optional_timestamptz_array(sent),
                                  int4_array(partitions),
                                  datum_array(seq_values, seq_nulls, INT8OID),
                                  timestamptz_array(due),
                                  bool_array(in_rows ? pre_leased : std::vector<char>(n, 0))};
    std::vector<char> written(n, 1);
    const bool split = split_layout();
    if (source == Source::inbox) {
        (split ? split_inbox_message_plan : insert_inbox_plan).execute(args, nulls);
    } else {
        uint64 stored = (split ? split_outbox_message_plan : insert_outbox_plan).execute(args, nulls);
        std::set<core::Uuid> ok;
        for (uint64 r = 0; r < stored; ++r) {
            bool isnull = false;
            ok.insert(uuid_from_datum(spi_value(r, 1, &isnull)));
        }
        for (std::size_t k = 0; k < n; ++k) written[k] = ok.count(ids[k]) > 0;
    }
    if (split) {
        std::vector<Datum> work_args = args;
        work_args.push_back(bool_array(written));
        std::string work_nulls(nulls);
        work_nulls.push_back(' ');
        split_work_plan[source].execute(work_args, work_nulls.c_str());
    }
    for (std::size_t k = 0; k < n; ++k) pre_leased[k] = pre_leased[k] && written[k];
    if (o.instance && !in_rows)
        for (std::size_t k = 0; k < n; ++k) {
            if (!pre_leased[k]) continue;
            const Message& m = messages[rows[k]];
            shm::Lease lease;
            lease.instance = *o.instance;
            lease.token = token;
            lease.expiry = o.lease_expiry;
            lease.has_stream = m.stream_id.has_value();
            if (m.stream_id) lease.stream = *m.stream_id;
            lease.seq = seq_nulls[k] ? 0 : DatumGetInt64(seq_values[k]);
            shm::Lease old;
            pre_leased[k] = shm::take({source, ids[k], o.consumer}, lease, o.now, &old) == shm::Take::taken;
        }
    // Waiting claims are woken for these rows when this transaction commits.
    for (std::size_t k = 0; k < n; ++k)
        if (written[k] && !pre_leased[k]) note_work(source, o.consumer, streams[k].value_or(ids[k]), due[k], o.now);
    if (o.instance) {
        std::vector<core::Uuid> leased, leased_keys;
        for (std::size_t k = 0; k < n; ++k)
            if (pre_leased[k]) {
                leased.push_back(ids[k]);
                leased_keys.push_back(streams[k].value_or(ids[k]));
            }
        if (!leased.empty())
            insert_preleased_plan[source].execute({PointerGetDatum(o.instance->data()), consumer,
                                                   Int64GetDatum(token), uuid_array(leased),
                                                   distribution_column(leased_keys, o.partition_count)});
    }
    std::vector<std::size_t> out;
    for (std::size_t k = 0; k < n; ++k)
        if (written[k]) out.push_back(rows[k]);
    return out;
}

}  // namespace

std::vector<bool> store_new(const StoreOptions& o, const std::vector<Message>& messages,
                            const std::vector<std::size_t>& fresh) {
    std::vector<std::size_t> rows = fresh;
    if (o.source == Source::outbox) {  // a repeated id inside the batch: its first occurrence is stored
        rows.clear();
        std::set<core::Uuid> seen;
        for (std::size_t i : fresh)
            if (seen.insert(messages[i].id).second) rows.push_back(i);
    }
    std::vector<std::size_t> written = rows.empty() ? rows : write_rows(o, messages, rows);
    std::vector<bool> out(fresh.size(), false);
    std::set<std::size_t> done(written.begin(), written.end());
    for (std::size_t k = 0; k < fresh.size(); ++k) out[k] = done.count(fresh[k]) > 0;
    count(o.source, o.consumer, core::Counter::stored, written.size());
    return out;
}

}  // namespace whizbang::pg
