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
    "SELECT DISTINCT w.stream_id FROM whizbang.wh_inbox_work w"
    " WHERE w.consumer OPERATOR(pg_catalog.=) $1 AND w.stream_id OPERATOR(pg_catalog.=) ANY ($2)"
    "   AND w.processed_at IS NULL",
    {TEXTOID, UUIDARRAYOID});

CachedPlan insert_inbox_plan(
    "INSERT INTO whizbang.wh_inbox (consumer, message_id, handler_name, message_type, envelope, metadata, scope,"
    "  stream_id, is_event, sent_at, received_at/*+SHARD , partition_number*/)"
    " SELECT $1, u.id, u.handler, u.type, u.envelope, u.metadata, u.scope, u.stream_id, u.is_event, u.sent_at, $2"
    "  /*+SHARD , u.part*/"
    " FROM ROWS FROM (pg_catalog.unnest($3), pg_catalog.unnest($4), pg_catalog.unnest($5), pg_catalog.unnest($6),"
    "  pg_catalog.unnest($7), pg_catalog.unnest($8), pg_catalog.unnest($9), pg_catalog.unnest($10),"
    "  pg_catalog.unnest($11)/*+SHARD , pg_catalog.unnest($12)*/)"
    "  AS u(id, handler, type, envelope, metadata, scope, stream_id, is_event, sent_at/*+SHARD , part*/)",
    {TEXTOID, TIMESTAMPTZOID, UUIDARRAYOID, TEXTARRAYOID, TEXTARRAYOID, JSONBARRAYOID, JSONBARRAYOID, JSONBARRAYOID,
     UUIDARRAYOID, BOOLARRAYOID, TIMESTAMPTZARRAYOID, INT4ARRAYOID});

// No dedup table for the outbox (DESIGN §3.3): the primary key decides, and an id already stored
// is left as it is. Inserted in id order (see above).
CachedPlan insert_outbox_plan(
    "INSERT INTO whizbang.wh_outbox (message_id, destination, message_type, event_data, metadata, scope, stream_id,"
    "  is_event, created_at/*+SHARD , partition_number*/)"
    " SELECT u.id, u.destination, u.type, u.envelope, u.metadata, u.scope, u.stream_id, u.is_event, $1"
    "  /*+SHARD , u.part*/"
    " FROM ROWS FROM (pg_catalog.unnest($2), pg_catalog.unnest($3), pg_catalog.unnest($4), pg_catalog.unnest($5),"
    "  pg_catalog.unnest($6), pg_catalog.unnest($7), pg_catalog.unnest($8), pg_catalog.unnest($9)"
    "  /*+SHARD , pg_catalog.unnest($10)*/)"
    "  AS u(id, destination, type, envelope, metadata, scope, stream_id, is_event/*+SHARD , part*/)"
    " ORDER BY u.id"
    " ON CONFLICT (message_id) DO NOTHING"
    " RETURNING message_id",
    {TIMESTAMPTZOID, UUIDARRAYOID, TEXTARRAYOID, TEXTARRAYOID, JSONBARRAYOID, JSONBARRAYOID, JSONBARRAYOID,
     UUIDARRAYOID, BOOLARRAYOID, INT4ARRAYOID});

WorkPlan insert_work_plan(
    "INSERT INTO whizbang.wh_inbox_work (consumer, message_id, stream_id, stream_seq, partition_number, scheduled_for,"
    "  lease_instance, lease_token, lease_expiry)"
    " SELECT $1, u.id, u.stream_id, u.seq, u.part, u.due,"
    "  CASE WHEN u.pre THEN $2 END, CASE WHEN u.pre THEN $3 END, CASE WHEN u.pre THEN $4 END"
    " FROM ROWS FROM (pg_catalog.unnest($5), pg_catalog.unnest($6), pg_catalog.unnest($7), pg_catalog.unnest($8),"
    "  pg_catalog.unnest($9), pg_catalog.unnest($10)) AS u(id, stream_id, seq, part, due, pre)",
    {TEXTOID, UUIDOID, INT8OID, TIMESTAMPTZOID, UUIDARRAYOID, UUIDARRAYOID, INT8ARRAYOID, INT4ARRAYOID,
     TIMESTAMPTZARRAYOID, BOOLARRAYOID});

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

// The message columns of messages[rows[k]], as SQL arrays.
struct MessageColumns {
    Datum ids, targets, types, envelopes, metadata, scopes, streams, is_event, sent, partitions;
};

MessageColumns message_columns(const std::vector<Message>& messages, const std::vector<std::size_t>& rows,
                               int partition_count) {
    const std::size_t n = rows.size();
    std::vector<core::Uuid> ids(n);
    std::vector<std::optional<core::Uuid>> streams(n);
    std::vector<std::string> targets(n), types(n);
    std::vector<Datum> envelopes(n), metadata(n), scopes(n);
    std::vector<char> no_nulls(n, 0), metadata_nulls(n, 0), scope_nulls(n, 0), is_event(n);
    std::vector<std::optional<TimestampTz>> sent(n);
    std::vector<core::Uuid> keys(n);  // the partition key: the stream, or the message
    for (std::size_t k = 0; k < n; ++k) {
        const Message& m = messages[rows[k]];
        ids[k] = m.id;
        keys[k] = m.stream_id.value_or(m.id);
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
    }
    return {uuid_array(ids), text_array(targets), text_array(types), datum_array(envelopes, no_nulls, JSONBOID),
            datum_array(metadata, metadata_nulls, JSONBOID), datum_array(scopes, scope_nulls, JSONBOID),
            uuid_array(streams), bool_array(is_event), optional_timestamptz_array(sent),
            distribution_column(keys, partition_count)};
}

// Writes the message rows; returns the elements of `fresh` that were written.
std::vector<std::size_t> write_messages(const StoreOptions& o, const std::vector<Message>& messages,
                                        const std::vector<std::size_t>& fresh) {
    if (o.source == Source::inbox) {
        MessageColumns c = message_columns(messages, fresh, o.partition_count);
        insert_inbox_plan.execute({text_datum(o.consumer), TimestampTzGetDatum(o.now), c.ids, c.targets, c.types,
                                   c.envelopes, c.metadata, c.scopes, c.streams, c.is_event, c.sent, c.partitions});
        return fresh;
    }
    // A repeated id inside the batch: its first occurrence is the one stored.
    std::vector<std::size_t> first;
    std::set<core::Uuid> seen;
    for (std::size_t i : fresh)
        if (seen.insert(messages[i].id).second) first.push_back(i);
    MessageColumns c = message_columns(messages, first, o.partition_count);
    uint64 rows = insert_outbox_plan.execute({TimestampTzGetDatum(o.now), c.ids, c.targets, c.types, c.envelopes,
                                              c.metadata, c.scopes, c.streams, c.is_event, c.partitions});
    std::set<core::Uuid> written;
    for (uint64 r = 0; r < rows; ++r) {
        bool isnull = false;
        written.insert(uuid_from_datum(spi_value(r, 1, &isnull)));
    }
    std::vector<std::size_t> stored;
    for (std::size_t i : first)
        if (written.count(messages[i].id)) stored.push_back(i);
    return stored;
}

// Writes the work rows (stream number, partition, due time, pre-lease) of messages[fresh[k]].
void write_work(const StoreOptions& o, const std::vector<Message>& messages, const std::vector<std::size_t>& fresh) {
    const Source source = o.source;
    Datum consumer = text_datum(o.consumer);
    std::map<std::size_t, int64_t> seq = number_streams(source, consumer, messages, fresh, o.partition_count);
    std::set<core::Uuid> busy;
    int64_t token = 0;
    if (o.instance) {
        busy = busy_streams(source, consumer, messages, fresh);
        token = next_lease_token();
    }

    const std::size_t n = fresh.size();
    std::vector<core::Uuid> ids(n);
    std::vector<std::optional<core::Uuid>> streams(n);
    std::vector<char> pre_leased(n);
    std::vector<TimestampTz> due(n);
    std::vector<int> partitions(n);
    std::vector<Datum> seq_values(n);
    std::vector<char> seq_nulls(n);
    for (std::size_t k = 0; k < n; ++k) {
        const Message& m = messages[fresh[k]];
        ids[k] = m.id;
        streams[k] = m.stream_id;
        due[k] = m.scheduled_for.value_or(o.now);
        partitions[k] = core::partition_of(m.stream_id.value_or(m.id), o.partition_count);
        auto s = seq.find(fresh[k]);
        seq_nulls[k] = s == seq.end();
        seq_values[k] = s == seq.end() ? (Datum)0 : Int64GetDatum(s->second);
        // Only rows the instance would be handed now anyway: due, and with no other unfinished
        // row in their stream — the first new row of an idle stream. The rows after it wait
        // for it like any follower.
        const bool due_now = due[k] <= o.now;
        pre_leased[k] = o.instance && due_now && !(m.stream_id && busy.count(*m.stream_id));
        if (m.stream_id) busy.insert(*m.stream_id);
    }
    // Shared-memory store: the rows carry no lease; the store takes theirs in shared memory
    // (dropped again if this transaction aborts).
    const bool in_rows = o.instance && !shared_leases_active();
    if (o.instance && !in_rows)
        for (std::size_t k = 0; k < n; ++k) {
            if (!pre_leased[k]) continue;
            const Message& m = messages[fresh[k]];
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
    const char nulls[] = {' ', in_rows ? ' ' : 'n', in_rows ? ' ' : 'n', in_rows ? ' ' : 'n',
                          ' ', ' ', ' ', ' ', ' ', ' ', '\0'};
    insert_work_plan[source].execute({consumer, o.instance ? PointerGetDatum(o.instance->data()) : (Datum)0,
                                      Int64GetDatum(token), TimestampTzGetDatum(o.lease_expiry), uuid_array(ids),
                                      uuid_array(streams), datum_array(seq_values, seq_nulls, INT8OID),
                                      int4_array(partitions), timestamptz_array(due),
                                      bool_array(in_rows ? pre_leased : std::vector<char>(n, 0))},
                                     nulls);
    // Waiting claims are woken for these rows when this transaction commits.
    for (std::size_t k = 0; k < n; ++k)
        if (!pre_leased[k]) note_work(source, o.consumer, streams[k].value_or(ids[k]), due[k], o.now);
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
}

}  // namespace

std::vector<bool> store_new(const StoreOptions& o, const std::vector<Message>& messages,
                            const std::vector<std::size_t>& fresh) {
    std::vector<std::size_t> written = write_messages(o, messages, fresh);
    if (!written.empty()) write_work(o, messages, written);
    std::vector<bool> out(fresh.size(), false);
    std::set<std::size_t> done(written.begin(), written.end());
    for (std::size_t k = 0; k < fresh.size(); ++k) out[k] = done.count(fresh[k]) > 0;
    return out;
}

}  // namespace whizbang::pg
