-- Baselines the native whizbang.dedup_insert_many is measured against (bench/run loads this).
--
-- Every baseline writes into its own copy of the dedup table, identical to
-- whizbang.wh_message_deduplication, so no method benefits from another's rows or caches:
--   bench.dedup_plpgsql  (a)  the seed's way: a PL/pgSQL loop, one INSERT ... ON CONFLICT
--                             DO NOTHING and one GET DIAGNOSTICS per id
--   bench.dedup_plain    (b)  one set-based INSERT ... SELECT unnest(...) ON CONFLICT DO NOTHING
--   bench.dedup_upsert   (b') the same with DO UPDATE observation_count + 1, because the native
--                             function writes on a duplicate too (it counts deliveries)
--   bench.dedup_copy     (c)  COPY of the same ids: the server's ingest ceiling
-- The statements for (b), (b') and (c) are prepared by the driver (bench/driver.cpp).

DROP SCHEMA IF EXISTS bench CASCADE;
CREATE SCHEMA bench;

-- When the extension is installed the copies are made from its table (LIKE ... INCLUDING ALL:
-- columns, defaults, constraints, indexes, storage), so they stay identical to whatever the
-- extension ships. Without it (baseline-only runs) the table of the design is spelled out.
DO $$
DECLARE
  t text;
BEGIN
  FOREACH t IN ARRAY ARRAY['dedup_plpgsql', 'dedup_plain', 'dedup_upsert', 'dedup_copy'] LOOP
    IF to_regclass('whizbang.wh_message_deduplication') IS NOT NULL THEN
      EXECUTE format('CREATE TABLE bench.%I (LIKE whizbang.wh_message_deduplication INCLUDING ALL)', t);
      -- Since 0.12.0 the table is partitioned (generations) and has no key of its own: the
      -- copies get what one generation has.
      IF (SELECT relkind FROM pg_class WHERE oid = 'whizbang.wh_message_deduplication'::regclass) = 'p' THEN
        EXECUTE format('ALTER TABLE bench.%I ADD CONSTRAINT %I PRIMARY KEY (message_id, consumer) WITH (fillfactor = 90)',
                       t, t || '_pkey');
      END IF;
    ELSE
      EXECUTE format($ddl$
        CREATE TABLE bench.%1$I (
          consumer          text        NOT NULL DEFAULT '',
          message_id        uuid        NOT NULL,
          first_seen_at     timestamptz NOT NULL DEFAULT now(),
          observation_count int         NOT NULL DEFAULT 1,
          conflict_count    int         NOT NULL DEFAULT 0,
          fingerprint       bytea,
          CONSTRAINT %2$I PRIMARY KEY (consumer, message_id)
        )$ddl$, t, t || '_pkey');
      EXECUTE format('CREATE INDEX ON bench.%I (first_seen_at)', t);
    END IF;
  END LOOP;
END
$$;

-- (a) The seed's row-at-a-time loop (seed 000, store_inbox_messages, dedup part only):
-- per id one INSERT ... ON CONFLICT ON CONSTRAINT ... DO NOTHING, GET DIAGNOSTICS ROW_COUNT,
-- one result row. Same signature shape and outcome words as the native function, minus the
-- fingerprint / sent-at arguments it does not need here.
CREATE FUNCTION bench.dedup_insert_many_plpgsql(
  p_message_ids uuid[],
  p_consumer    text        DEFAULT '',
  p_now         timestamptz DEFAULT now())
RETURNS TABLE(message_id uuid, outcome text)
LANGUAGE plpgsql
AS $$
DECLARE
  v_id      uuid;
  v_was_new int;
BEGIN
  FOREACH v_id IN ARRAY p_message_ids LOOP
    INSERT INTO bench.dedup_plpgsql (consumer, message_id, first_seen_at)
    VALUES (p_consumer, v_id, p_now)
    ON CONFLICT ON CONSTRAINT dedup_plpgsql_pkey DO NOTHING;

    GET DIAGNOSTICS v_was_new = ROW_COUNT;

    message_id := v_id;
    outcome := CASE WHEN v_was_new = 1 THEN 'new' ELSE 'duplicate' END;
    RETURN NEXT;
  END LOOP;
END
$$;

-- The copies must match the extension's table column for column; stop here if they do not.
DO $$
DECLARE
  t text;
  ref text;
  got text;
BEGIN
  IF to_regclass('whizbang.wh_message_deduplication') IS NULL THEN
    RETURN;
  END IF;
  SELECT string_agg(format('%s %s %s %s', attname, format_type(atttypid, atttypmod), attnotnull,
                           pg_get_expr(d.adbin, d.adrelid)), ', ' ORDER BY attnum)
    INTO ref
    FROM pg_attribute a LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
   WHERE attrelid = 'whizbang.wh_message_deduplication'::regclass AND attnum > 0 AND NOT attisdropped;
  FOREACH t IN ARRAY ARRAY['dedup_plpgsql', 'dedup_plain', 'dedup_upsert', 'dedup_copy'] LOOP
    SELECT string_agg(format('%s %s %s %s', attname, format_type(atttypid, atttypmod), attnotnull,
                             pg_get_expr(d.adbin, d.adrelid)), ', ' ORDER BY attnum)
      INTO got
      FROM pg_attribute a LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
     WHERE attrelid = format('bench.%I', t)::regclass AND attnum > 0 AND NOT attisdropped;
    IF got IS DISTINCT FROM ref THEN
      RAISE EXCEPTION 'bench.% differs from whizbang.wh_message_deduplication', t
        USING DETAIL = format('expected: %s; got: %s', ref, got);
    END IF;
  END LOOP;
END
$$;
