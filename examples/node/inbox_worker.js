#!/usr/bin/env node
// An inbox worker for whizbang in Node.js with node-postgres (npm "pg"): claim work, apply its
// effect exactly once, retry, dead-letter. The same worker as examples/inbox_worker.py.
//
//   node inbox_worker.js [--consumer NAME] [--batch 10] [--lease 30] [--wait 10] [--max-idle S] [--bigint]
//   node inbox_worker.js --produce N [--streams 3] [--tag demo] [--consumer NAME]
//
// Worker mode loops:
//   1. claim_work(instance, 'inbox', batch, lease, p_wait => --wait seconds; --poll is its old
//      name) on its own (autocommit), so the leases are visible to the other workers at once.
//      When nothing is claimable the call waits in the server and returns as soon as a
//      transaction that stored work for the consumer commits (no client-side sleep loop; one
//      statement, so it works through pgbouncer in transaction mode too), or with no rows when
//      the wait is up. With --max-idle the wait is cut to the idle time left;
//   2. for each claimed message, in the order claim_work returned them (oldest first per stream),
//      one transaction runs the handler (the business effect: a row in inbox_demo_ledger) and
//      complete_work with the message's lease token, and commits only when complete_work answers
//      'completed'. Effect and completion commit together: the effect happens exactly once;
//   3. when the handler throws, the transaction is rolled back (no effect) and fail_work records
//      the error: 'retry_scheduled' or 'dead_lettered' (max_attempts reached, or the handler threw
//      a PermanentError). The rest of that stream's messages in the batch are released, not
//      processed, so that the stream keeps its order;
//   4. a timer renews the leases of the messages the worker still holds, every third of the lease,
//      on a second connection. It runs while a handler awaits I/O; a handler that blocks the event
//      loop (CPU work) blocks the renewals too: move such work to a worker thread.
// It stops on SIGINT or SIGTERM (after the current message, releasing the rest of the batch) or
// after --max-idle seconds in which claims found no work, and prints one JSON line of counts.
// A claim waiting in the server when the signal comes is canceled, so the worker stops at once:
// a short second connection runs pg_cancel_backend(client.processID), and the claim ends with
// 57014 (query_canceled), holding nothing. Only a claim is canceled, never a handler's
// transaction. Through a pooler processID is the pooler's key, not a server pid: the worker
// sees that at connect (pg_backend_pid() differs), cancels nothing, and stops when the wait ends.
//
// Produce mode stores N demo messages over --streams streams with store_inbox_messages, in one
// call. Ids derive from --tag (UUIDv5), so running the same command again is a redelivery.
//
// Two things node-postgres does that a whizbang client must know:
//   - JSON batches: pg turns a JS *array* parameter into a PostgreSQL array literal ('{...}'),
//     not into JSON, so `query('... store_inbox_messages($1)', [messages])` fails with "invalid
//     input syntax for type json". Pass JSON.stringify(messages) and cast it: $1::jsonb.
//   - bigint: lease tokens are bigint (int8), which pg returns as strings by default, because a
//     JS number holds integers exactly only up to 2^53. Keep them as strings (the default here)
//     or parse them as BigInt (--bigint: types.setTypeParser(20, BigInt)); pass them back as
//     they came, in an array cast to ::bigint[]. Never parseInt/Number them: a token above 2^53
//     would come back changed, and complete_work would answer lease_lost.
//
// Connection settings come from the PG* environment variables (PGHOST, PGPORT, PGUSER,
// PGPASSWORD, PGDATABASE), as for psql. The database needs the extension; both modes create
// the demo table inbox_demo_ledger when it is missing. Needs Node.js 18+ and pg 8 (npm install).
'use strict';

const crypto = require('node:crypto');
const pg = require('pg');

const DEMO_NAMESPACE = '6f1c8a52-3d1e-4f7b-9a43-1c2e5b7d9e01'; // UUIDv5 namespace of demo ids (as in the Python example)
const MAX_ERROR_CHARS = 2000;

const CLAIM_SQL = `
  SELECT message_id, stream_id, handler_name, message_type, envelope, attempts, lease_token, consumer
    FROM whizbang.claim_work(p_instance_id => $1, p_source => 'inbox', p_max_rows => $2,
                             p_lease_seconds => $3, p_max_per_stream => $4, p_consumer => $5,
                             p_wait => make_interval(secs => $6))`;
const COMPLETE_SQL = `
  SELECT outcome FROM whizbang.complete_work('inbox', $1::uuid[], $2::bigint[], $3)`;
const FAIL_SQL = `
  SELECT outcome, scheduled_for
    FROM whizbang.fail_work('inbox', $1::uuid[], $2::text[], $3::bigint[], $4::boolean[], $5)`;
const RENEW_SQL = `
  SELECT message_id, outcome FROM whizbang.renew_leases('inbox', $1::uuid[], $2::bigint[], $3, $4)`;
const RELEASE_SQL = `
  SELECT message_id, outcome FROM whizbang.release_work('inbox', $1::uuid[], $2::bigint[], $3)`;
// $1 is JSON text (JSON.stringify of the JS array), cast to jsonb. count(*) is bigint, which pg
// would return as a string: ::integer makes it a JS number (a batch count fits).
const STORE_SQL = `
  SELECT count(*)::integer AS stored FROM whizbang.store_inbox_messages($1::jsonb, p_consumer => $2)`;
const DEMO_TABLE_SQL = `
  CREATE TABLE IF NOT EXISTS inbox_demo_ledger (
      entry_id   bigserial   PRIMARY KEY,
      message_id uuid        NOT NULL,  -- no unique constraint: the demo shows whizbang's guarantee
      stream_id  uuid,
      account    text        NOT NULL,
      seq        integer,
      amount     numeric     NOT NULL,
      worker     text        NOT NULL,
      applied_at timestamptz NOT NULL DEFAULT clock_timestamp()
  )`;

const CANCEL_SQL = 'SELECT pg_cancel_backend($1)';
const QUERY_CANCELED = '57014';

const log = (...parts) => console.error(new Date().toISOString().slice(11, 19), ...parts);
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

async function connect() {
  const client = new pg.Client(); // PG* environment variables
  await client.connect();
  return client;
}

async function ensureDemoTable(client) {
  // Several workers may start at once: serialise the CREATE ... IF NOT EXISTS.
  await client.query('BEGIN');
  await client.query("SELECT pg_advisory_xact_lock(hashtext('inbox_demo_ledger'))");
  await client.query(DEMO_TABLE_SQL);
  await client.query('COMMIT');
}

// ---------------------------------------------------------------------------------------------
// Handlers: they get the client inside the message's transaction and apply the effect with it.
// ---------------------------------------------------------------------------------------------
class PermanentError extends Error {} // retrying cannot help: dead-lettered at once (p_retryable false)

async function postToLedger(client, msg, workerName) {
  const env = msg.envelope && typeof msg.envelope === 'object' ? msg.envelope : {}; // jsonb arrives parsed
  if (env.sleep) await sleep(Number(env.sleep) * 1000); // a slow handler: renewals keep its lease
  if (env.fail) throw new Error(`demo failure requested by message ${msg.message_id} (attempt ${msg.attempts})`);
  if (!('amount' in env) || !('account' in env)) throw new PermanentError('envelope has no account or amount');
  await client.query(
    `INSERT INTO inbox_demo_ledger (message_id, stream_id, account, seq, amount, worker)
     VALUES ($1, $2, $3, $4, $5, $6)`,
    [msg.message_id, msg.stream_id, env.account, env.seq ?? null, env.amount, workerName]);
}

const HANDLERS = { 'ledger.post': postToLedger };

// Groups messages by consumer: every call below takes one consumer, and claim_work with
// p_consumer NULL may return several.
function byConsumer(messages) {
  const groups = new Map();
  for (const m of messages) {
    if (!groups.has(m.consumer)) groups.set(m.consumer, { ids: [], tokens: [] });
    groups.get(m.consumer).ids.push(m.message_id);
    groups.get(m.consumer).tokens.push(m.lease_token); // a string or a BigInt, passed back unchanged
  }
  return groups;
}

// ---------------------------------------------------------------------------------------------
// Lease keeper: renews the leases of the messages this worker still holds, on its own connection.
// ---------------------------------------------------------------------------------------------
class LeaseKeeper {
  constructor(leaseSeconds) {
    this.leaseSeconds = leaseSeconds;
    this.held = new Map(); // message id -> claimed row
    this.renewed = 0;
    this.client = null;
    this.busy = false;
    this.timer = setInterval(() => this.renew(), Math.max(leaseSeconds / 3, 0.2) * 1000);
  }

  hold(messages) { for (const m of messages) this.held.set(m.message_id, m); }
  drop(messageId) { this.held.delete(messageId); }

  async renew() {
    if (this.busy || this.held.size === 0) return; // one round at a time
    this.busy = true;
    try {
      if (!this.client) this.client = await connect();
      for (const [consumer, { ids, tokens }] of byConsumer([...this.held.values()])) {
        const res = await this.client.query(RENEW_SQL, [ids, tokens, this.leaseSeconds, consumer]);
        for (const { message_id: id, outcome } of res.rows) {
          if (outcome === 'renewed') this.renewed += 1;
          // lease_lost: another worker re-claimed it; not_found: it is done. The handler's
          // complete_work will say so too and roll back.
          else if (this.held.has(id)) log('renew', id, outcome);
        }
      }
    } catch (e) {
      log('lease keeper:', e.message);
      if (this.client) this.client.end().catch(() => {});
      this.client = null;
    } finally {
      this.busy = false;
    }
  }

  async stop() {
    clearInterval(this.timer);
    while (this.busy) await sleep(10);
    if (this.client) await this.client.end();
  }
}

// ---------------------------------------------------------------------------------------------
// Worker
// ---------------------------------------------------------------------------------------------
class Worker {
  constructor(opts) {
    this.opts = opts;
    this.instance = opts.instance || crypto.randomUUID();
    this.name = 'worker-' + this.instance.slice(0, 8);
    this.stopping = false;
    this.claiming = false;   // a claim is in flight (the only statement a stop cancels)
    this.cancelable = false; // client.processID is the server backend's pid (no pooler between)
    this.canceling = null;   // the running cancelClaim(), if any
    this.counts = { claimed: 0, completed: 0, retry_scheduled: 0, dead_lettered: 0, lease_lost: 0,
                    not_found: 0, released: 0 };
  }

  // Claims a batch, waiting in the server up to `wait` seconds for work; [] when stopped.
  async claim(wait) {
    if (this.stopping) return [];
    this.claiming = true; // from here on a stop request cancels the claim (requestStop)
    try {
      // A statement outside BEGIN commits on its own: the leases are visible to everyone at once.
      const res = await this.client.query(CLAIM_SQL, [this.instance, this.opts.batch, this.opts.lease,
                                                      this.opts.maxPerStream, this.opts.consumer, wait]);
      return res.rows;
    } catch (e) {
      if (e.code === QUERY_CANCELED && this.stopping) return []; // canceled by the stop: it holds nothing
      throw e;
    } finally {
      this.claiming = false;
      // A pg_cancel_backend already sent must be done before this connection runs anything else:
      // it then reaches the backend idle, where a cancel is ignored, never the handler's statements.
      await this.canceling;
    }
  }

  requestStop(signal) {
    log(this.name, `got ${signal}: stopping after the current message`);
    this.stopping = true;
    if (this.claiming && this.cancelable && !this.canceling) {
      this.canceling = this.cancelClaim().finally(() => { this.canceling = null; });
    }
  }

  // Cancels the waiting claim from a short second connection, again every 100 ms until the claim
  // has ended: a cancel that comes before the claim reached the server finds the backend idle
  // and does nothing.
  async cancelClaim() {
    let canceler = null;
    try {
      while (this.claiming) {
        if (!canceler) canceler = await connect();
        if (!this.claiming) break;
        await canceler.query(CANCEL_SQL, [this.client.processID]);
        if (this.claiming) await sleep(100);
      }
    } catch (e) {
      log(this.name, 'could not cancel the waiting claim:', e.message); // it then ends with its wait
    } finally {
      if (canceler) await canceler.end().catch(() => {});
    }
  }

  // Runs the handler and complete_work in one transaction; returns the outcome word.
  async handle(msg) {
    const handler = HANDLERS[msg.handler_name];
    try {
      await this.client.query('BEGIN');
      if (!handler) throw new PermanentError(`no handler for HandlerName ${JSON.stringify(msg.handler_name)}`);
      await handler(this.client, msg, this.name);
      const res = await this.client.query(COMPLETE_SQL, [[msg.message_id], [msg.lease_token], msg.consumer]);
      const outcome = res.rows[0].outcome;
      // completed: effect + completion commit atomically. lease_lost (another worker re-claimed
      // the message after our lease ran out) or not_found (completed or dead-lettered meanwhile):
      // our effect must not commit.
      await this.client.query(outcome === 'completed' ? 'COMMIT' : 'ROLLBACK');
      return outcome;
    } catch (e) {
      await this.client.query('ROLLBACK'); // no effect; throws (and ends the worker) if the connection is gone
      const error = `${e.constructor.name}: ${e.message}`.slice(0, MAX_ERROR_CHARS);
      const retryable = !(e instanceof PermanentError);
      const res = await this.client.query(FAIL_SQL, [[msg.message_id], [error], [msg.lease_token], [retryable],
                                                     msg.consumer]);
      const { outcome, scheduled_for: scheduledFor } = res.rows[0];
      log(this.name, 'failed', msg.message_id, 'attempt', msg.attempts, '->', outcome,
          scheduledFor ? scheduledFor.toISOString() : '', '|', error);
      return outcome;
    }
  }

  async release(messages) {
    for (const [consumer, { ids, tokens }] of byConsumer(messages)) {
      const res = await this.client.query(RELEASE_SQL, [ids, tokens, consumer]);
      this.counts.released += res.rows.filter((r) => r.outcome === 'released').length;
    }
    for (const m of messages) this.keeper.drop(m.message_id);
  }

  async processBatch(batch) {
    const blockedStreams = new Set(); // streams whose earlier message in this batch did not complete
    for (let i = 0; i < batch.length; i++) {
      const msg = batch[i];
      if (this.stopping) return this.release(batch.slice(i));
      if (msg.stream_id !== null && blockedStreams.has(msg.stream_id)) {
        // Keep the stream's order: it waits for the retry. fail_work has given it back already
        // (this release then answers lease_lost); a lost lease has not.
        await this.release([msg]);
        continue;
      }
      const outcome = await this.handle(msg);
      this.keeper.drop(msg.message_id);
      this.counts[outcome] = (this.counts[outcome] || 0) + 1;
      if (outcome === 'completed') log(this.name, 'completed', msg.message_id, 'attempt', msg.attempts,
                                       'token', String(msg.lease_token));
      else if (outcome !== 'dead_lettered' && msg.stream_id !== null) blockedStreams.add(msg.stream_id);
    }
  }

  async run() {
    this.client = await connect();
    // processID is the pid of the server backend only on a direct connection; through a pooler
    // it is the pooler's key, and pg_cancel_backend must not be given it.
    const { rows: [{ pid }] } = await this.client.query('SELECT pg_backend_pid() AS pid');
    this.cancelable = pid === this.client.processID;
    if (!this.cancelable) log(this.name, 'behind a pooler: a stop waits for the claim\'s wait to end');
    await ensureDemoTable(this.client);
    process.on('SIGINT', (signal) => this.requestStop(signal));
    process.on('SIGTERM', (signal) => this.requestStop(signal));
    this.keeper = new LeaseKeeper(this.opts.lease);
    log(this.name, 'instance', this.instance, `consumer ${JSON.stringify(this.opts.consumer)}`,
        `int8 as ${this.opts.bigint ? 'BigInt' : 'string'}`);
    let idleSince = Date.now();
    try {
      while (!this.stopping) {
        let wait = this.opts.wait;
        if (this.opts.maxIdle !== null) {
          const idle = (Date.now() - idleSince) / 1000;
          if (idle >= this.opts.maxIdle) {
            log(this.name, `no work for ${this.opts.maxIdle}s: stopping`);
            break;
          }
          wait = Math.min(wait, this.opts.maxIdle - idle);
        }
        const batch = await this.claim(wait);
        if (batch.length === 0) continue;
        this.counts.claimed += batch.length;
        this.keeper.hold(batch);
        await this.processBatch(batch);
        idleSince = Date.now();
      }
    } finally {
      await this.keeper.stop();
    }
    console.log(JSON.stringify({ ...this.counts, renewed: this.keeper.renewed, instance: this.instance,
                                 int8: this.opts.bigint ? 'bigint' : 'string' }));
    await this.client.end();
  }
}

// ---------------------------------------------------------------------------------------------
// Produce mode
// ---------------------------------------------------------------------------------------------
function uuidv5(name, namespace) {
  const hash = crypto.createHash('sha1').update(Buffer.from(namespace.replace(/-/g, ''), 'hex')).update(name).digest();
  hash[6] = (hash[6] & 0x0f) | 0x50; // version 5
  hash[8] = (hash[8] & 0x3f) | 0x80; // RFC 4122 variant
  const h = hash.subarray(0, 16).toString('hex');
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
}

function demoMessages(count, streams, tag) {
  const messages = [];
  for (let i = 0; i < count; i++) {
    const k = i % streams;
    messages.push({
      MessageId: uuidv5(`${tag}/message/${i}`, DEMO_NAMESPACE),
      StreamId: uuidv5(`${tag}/stream/${k}`, DEMO_NAMESPACE),
      HandlerName: 'ledger.post',
      MessageType: 'LedgerEntryRequested',
      Envelope: { account: `acct-${k}`, seq: Math.floor(i / streams), amount: i + 1 },
    });
  }
  return messages;
}

async function produce(opts) {
  const client = await connect();
  try {
    await ensureDemoTable(client);
    const messages = demoMessages(opts.produce, opts.streams, opts.tag);
    // The batch goes as JSON text with an explicit ::jsonb cast (see the top of this file).
    const res = await client.query(STORE_SQL, [JSON.stringify(messages), opts.consumer]);
    const stored = res.rows[0].stored;
    console.log(`stored ${stored} new of ${messages.length} messages (${messages.length - stored} duplicates)`);
  } finally {
    await client.end();
  }
}

// ---------------------------------------------------------------------------------------------
// Command line
// ---------------------------------------------------------------------------------------------
function parseArgs(argv) {
  const opts = { consumer: '', instance: null, batch: 10, lease: 30, maxPerStream: 100, wait: 10, maxIdle: null,
                 produce: null, streams: 3, tag: 'demo', bigint: false };
  const numeric = { '--batch': 'batch', '--lease': 'lease', '--max-per-stream': 'maxPerStream',
                    '--wait': 'wait', '--poll': 'wait' /* its old name */,
                    '--max-idle': 'maxIdle', '--produce': 'produce', '--streams': 'streams' };
  const text = { '--consumer': 'consumer', '--instance': 'instance', '--tag': 'tag' };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === '--bigint') opts.bigint = true;
    else if (a === '-h' || a === '--help') usage(0);
    else if (a in numeric || a in text) {
      if (i + 1 >= argv.length) usage(2, `${a} needs a value`);
      const v = argv[++i];
      if (a in text) opts[text[a]] = v;
      else if (!Number.isFinite(Number(v))) usage(2, `${a} needs a number, got ${JSON.stringify(v)}`);
      else opts[numeric[a]] = Number(v);
    } else usage(2, `unknown argument ${JSON.stringify(a)}`);
  }
  if (opts.produce !== null && (opts.produce < 0 || opts.streams < 1)) usage(2, '--produce must be >= 0 and --streams >= 1');
  if (opts.batch < 1 || opts.lease < 1 || opts.maxPerStream < 1 || opts.wait < 0) {
    usage(2, '--batch, --lease and --max-per-stream must be at least 1, --wait at least 0');
  }
  return opts;
}

function usage(code, message) {
  if (message) console.error(`inbox_worker.js: ${message}`);
  console.error('usage: node inbox_worker.js [--consumer NAME] [--instance UUID] [--batch N] [--lease S]\n' +
                '                           [--max-per-stream N] [--wait S] [--max-idle S] [--bigint]\n' +
                '       node inbox_worker.js --produce N [--streams K] [--tag T] [--consumer NAME]');
  process.exit(code);
}

async function main() {
  const opts = parseArgs(process.argv.slice(2));
  // int8 (OID 20) as BigInt instead of pg's default string; both keep every digit.
  if (opts.bigint) pg.types.setTypeParser(20, BigInt);
  if (opts.produce !== null) await produce(opts);
  else await new Worker(opts).run();
}

main().catch((e) => {
  log('fatal:', e.stack || e.message);
  process.exit(1);
});
