-- The central audit store (docs/ledger.md, "PostgreSQL"). Applied once, in one transaction, by
-- src/ledger/postgres-migrations.ts (at start and by `gov migrate`) under an advisory lock.

-- Every audit row of every source. row_bytes is the row exactly as the LMDB ledger stores it
-- (src/ledger/row-format.ts): the hash chain covers it, and verify() walks it with the same code. The other
-- columns are copies of header fields for indexes and filters; verify() checks them against the hashed
-- header, so an edited column is reported like an edited row.
CREATE TABLE gov_audit_rows (
  -- Arrival order across the fleet: the order GET /v1/audit/executions pages in, and its cursor.
  id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  source text NOT NULL,
  -- Position in the source's own chain (each source's seq starts at 1).
  seq bigint NOT NULL CHECK (seq > 0),
  envelope_id text NOT NULL,
  phase text NOT NULL,
  agent_id text NOT NULL,
  decision text NOT NULL,
  parent_envelope_id text,
  ts timestamptz NOT NULL,
  row_bytes bytea NOT NULL,
  CONSTRAINT gov_audit_rows_source_seq UNIQUE (source, seq),
  CONSTRAINT gov_audit_rows_envelope UNIQUE (envelope_id)
);
-- The spec allows exactly one post-check per pre-check, fleet-wide.
CREATE UNIQUE INDEX gov_audit_rows_post_check ON gov_audit_rows (parent_envelope_id)
  WHERE phase = 'post_check' AND parent_envelope_id IS NOT NULL;
-- The filters of GET /v1/audit/executions, each with the paging order.
CREATE INDEX gov_audit_rows_source_id ON gov_audit_rows (source, id);
CREATE INDEX gov_audit_rows_agent_id ON gov_audit_rows (agent_id, id);
CREATE INDEX gov_audit_rows_decision_id ON gov_audit_rows (decision, id);
CREATE INDEX gov_audit_rows_ts ON gov_audit_rows (ts);

-- The head of each source chain, written in the same transaction as the source's rows. Appends lock it
-- (SELECT ... FOR UPDATE), which serializes writers of one source without blocking other sources; verify()
-- compares each chain with it, so rows cut from a chain's tail are found.
CREATE TABLE gov_source_heads (
  source text PRIMARY KEY,
  seq bigint NOT NULL,
  hash text,
  updated_at timestamptz NOT NULL DEFAULT now()
);

-- Per-agent counters over every source (validate and post_check rows by outcome; last activity).
CREATE TABLE gov_agent_stats (
  agent_id text COLLATE "C" PRIMARY KEY,
  executions bigint NOT NULL DEFAULT 0,
  outcomes jsonb NOT NULL DEFAULT '{}',
  -- The timestamp as the row carried it, and as an instant for comparing.
  last_activity text,
  last_activity_at timestamptz
);

-- Durable state beside the ledger (kill switch, manifests, review queue, policy versions): KvStore.
CREATE TABLE gov_kv (
  ns text COLLATE "C" NOT NULL,
  key text COLLATE "C" NOT NULL,
  value text NOT NULL,
  updated_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (ns, key)
);

-- Store-wide facts (the audit encryption key's fingerprint).
CREATE TABLE gov_meta (
  key text PRIMARY KEY,
  value text NOT NULL
);

-- Append-only in the database itself. DELETE and TRUNCATE are refused, and so is every UPDATE except the
-- documented erasure (gov_erase_payload below): it must be announced for that very row, and it may only turn
-- row_bytes into the erased form of the same row (flags = erased, salt and payload dropped; header,
-- prev_hash, commitment and hash unchanged, so the chain still verifies), every other column unchanged.
CREATE FUNCTION gov_audit_rows_guard() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  h integer;
BEGIN
  IF TG_OP <> 'UPDATE' THEN
    RAISE EXCEPTION 'gov_audit_rows is append-only: % is refused', TG_OP USING ERRCODE = 'insufficient_privilege';
  END IF;
  IF current_setting('gov.erasing', true) IS DISTINCT FROM OLD.envelope_id THEN
    RAISE EXCEPTION 'gov_audit_rows is append-only: UPDATE is refused (erase a payload with gov_erase_payload)'
      USING ERRCODE = 'insufficient_privilege';
  END IF;
  h := get_byte(OLD.row_bytes, 2) * 256 + get_byte(OLD.row_bytes, 3);
  IF (NEW.id, NEW.source, NEW.seq, NEW.envelope_id, NEW.phase, NEW.agent_id, NEW.decision, NEW.parent_envelope_id, NEW.ts)
       IS DISTINCT FROM
     (OLD.id, OLD.source, OLD.seq, OLD.envelope_id, OLD.phase, OLD.agent_id, OLD.decision, OLD.parent_envelope_id, OLD.ts)
     OR NEW.row_bytes IS DISTINCT FROM set_byte(substring(OLD.row_bytes FROM 1 FOR 100 + h), 1, 2) || '\x0000000000'::bytea
  THEN
    RAISE EXCEPTION 'gov_audit_rows: an erasure may only drop the payload and salt of a row' USING ERRCODE = 'insufficient_privilege';
  END IF;
  RETURN NEW;
END
$$;
CREATE TRIGGER gov_audit_rows_append_only BEFORE UPDATE OR DELETE ON gov_audit_rows
  FOR EACH ROW EXECUTE FUNCTION gov_audit_rows_guard();
CREATE TRIGGER gov_audit_rows_no_truncate BEFORE TRUNCATE ON gov_audit_rows
  FOR EACH STATEMENT EXECUTE FUNCTION gov_audit_rows_guard();

-- The erasure path: drops one row's payload and salt (personal-data erasure). SECURITY DEFINER, so an
-- application role needs EXECUTE on it and no UPDATE privilege on the table at all (docs/ledger.md).
-- false for an unknown envelope id; erasing an erased row changes nothing.
CREATE FUNCTION gov_erase_payload(p_envelope_id text) RETURNS boolean LANGUAGE plpgsql SECURITY DEFINER AS $$
DECLARE
  r record;
  h integer;
BEGIN
  SELECT id, row_bytes INTO r FROM gov_audit_rows WHERE envelope_id = p_envelope_id FOR UPDATE;
  IF NOT FOUND THEN
    RETURN false;
  END IF;
  IF get_byte(r.row_bytes, 1) = 2 THEN
    RETURN true;
  END IF;
  h := get_byte(r.row_bytes, 2) * 256 + get_byte(r.row_bytes, 3);
  PERFORM set_config('gov.erasing', p_envelope_id, true);
  UPDATE gov_audit_rows
     SET row_bytes = set_byte(substring(row_bytes FROM 1 FOR 100 + h), 1, 2) || '\x0000000000'::bytea
   WHERE id = r.id;
  PERFORM set_config('gov.erasing', '', true);
  RETURN true;
END
$$;
-- A SECURITY DEFINER function must not resolve names through the caller's search_path.
DO $$
BEGIN
  EXECUTE format('ALTER FUNCTION gov_erase_payload(text) SET search_path = %I, pg_temp', current_schema());
END
$$;

-- Adds counters: {"approve": 2} + {"approve": 1, "block": 1} = {"approve": 3, "block": 1}.
CREATE FUNCTION gov_add_counts(a jsonb, b jsonb) RETURNS jsonb LANGUAGE sql IMMUTABLE AS $$
  SELECT coalesce(jsonb_object_agg(k, n), '{}'::jsonb)
    FROM (SELECT k, sum(v::bigint) AS n
            FROM (SELECT * FROM jsonb_each_text(a) UNION ALL SELECT * FROM jsonb_each_text(b)) AS e(k, v)
           GROUP BY k) AS s
$$;

-- One batch of one source's rows, in one statement (one round trip, committed when it returns):
--   1. lock the source's head row, creating it at seq 0 for a new source;
--   2. 'moved' (nothing written) unless the head is what the writer built the rows on: another process
--      appended to this source in between, and the writer rebuilds the rows on the head returned;
--   3. 'conflict' (nothing written) when an envelope id is already stored or a pre-check already has its
--      post-check; the writer refuses those rows and retries the rest;
--   4. insert the rows (seq = p_seq + 1, 2, ...), add the agent counters, move the head: 'ok'.
-- A conflict with a concurrent batch of another source shows as a unique violation (or, when two batches
-- wait on each other's keys, a deadlock PostgreSQL breaks) at step 4: 'retry', nothing written.
-- p_blob holds the stored rows back to back, p_lengths their sizes (one bytea travels in binary).
CREATE FUNCTION gov_append_rows(
  p_source text, p_seq bigint, p_hash text, p_new_hash text,
  p_envelopes text[], p_phases text[], p_agents text[], p_decisions text[], p_parents text[], p_ts_ms bigint[],
  p_lengths integer[], p_blob bytea, p_stats jsonb
) RETURNS jsonb LANGUAGE plpgsql
-- Plans for the tables as they are: a generic plan cached while gov_audit_rows was empty would keep
-- scanning it whole for duplicates (docs/performance.md, "Central store on PostgreSQL").
SET plan_cache_mode = force_custom_plan
AS $$
DECLARE
  head record;
  dup_envelopes jsonb;
  dup_post_checks jsonb;
  n integer := cardinality(p_envelopes);
  post_parents text[] := ARRAY(SELECT p FROM unnest(p_parents, p_phases) AS x(p, ph) WHERE ph = 'post_check' AND p IS NOT NULL);
BEGIN
  SELECT seq, hash INTO head FROM gov_source_heads WHERE source = p_source FOR UPDATE;
  IF NOT FOUND THEN
    INSERT INTO gov_source_heads (source, seq, hash) VALUES (p_source, 0, NULL) ON CONFLICT (source) DO NOTHING;
    SELECT seq, hash INTO head FROM gov_source_heads WHERE source = p_source FOR UPDATE;
  END IF;
  IF head.seq <> p_seq OR head.hash IS DISTINCT FROM p_hash THEN
    RETURN jsonb_build_object('status', 'moved', 'seq', head.seq, 'hash', head.hash);
  END IF;

  SELECT jsonb_agg(envelope_id) INTO dup_envelopes FROM gov_audit_rows WHERE envelope_id = ANY (p_envelopes);
  IF cardinality(post_parents) > 0 THEN
    SELECT jsonb_object_agg(parent_envelope_id, envelope_id) INTO dup_post_checks
      FROM gov_audit_rows WHERE phase = 'post_check' AND parent_envelope_id = ANY (post_parents);
  END IF;
  IF dup_envelopes IS NOT NULL OR dup_post_checks IS NOT NULL THEN
    RETURN jsonb_build_object('status', 'conflict', 'envelopes', coalesce(dup_envelopes, '[]'::jsonb),
                              'post_checks', coalesce(dup_post_checks, '{}'::jsonb));
  END IF;

  BEGIN
    INSERT INTO gov_audit_rows (source, seq, envelope_id, phase, agent_id, decision, parent_envelope_id, ts, row_bytes)
    SELECT p_source, p_seq + r.i, r.envelope_id, r.phase, r.agent_id, r.decision, r.parent, to_timestamp(r.ts_ms / 1000.0),
           substring(p_blob FROM (r.ends - r.len + 1)::integer FOR r.len)
      FROM (SELECT u.*, sum(u.len) OVER (ORDER BY u.i) AS ends
              FROM unnest(p_envelopes, p_phases, p_agents, p_decisions, p_parents, p_ts_ms, p_lengths)
                   WITH ORDINALITY AS u(envelope_id, phase, agent_id, decision, parent, ts_ms, len, i)) AS r
     ORDER BY r.i;
  EXCEPTION WHEN unique_violation OR deadlock_detected THEN
    RETURN jsonb_build_object('status', 'retry');
  END;

  -- In agent id order, so that concurrent batches of different sources lock counters in one order.
  INSERT INTO gov_agent_stats AS s (agent_id, executions, outcomes, last_activity, last_activity_at)
  SELECT d.agent_id, d.executions, d.outcomes, d.last_activity, to_timestamp(d.last_ms / 1000.0)
    FROM jsonb_to_recordset(p_stats) AS d(agent_id text, executions bigint, outcomes jsonb, last_activity text, last_ms bigint)
   ORDER BY d.agent_id COLLATE "C"
  ON CONFLICT (agent_id) DO UPDATE SET
    executions = s.executions + EXCLUDED.executions,
    outcomes = gov_add_counts(s.outcomes, EXCLUDED.outcomes),
    last_activity = CASE WHEN s.last_activity_at IS NULL OR EXCLUDED.last_activity_at > s.last_activity_at
                         THEN EXCLUDED.last_activity ELSE s.last_activity END,
    last_activity_at = greatest(s.last_activity_at, EXCLUDED.last_activity_at);

  UPDATE gov_source_heads SET seq = p_seq + n, hash = p_new_hash, updated_at = now() WHERE source = p_source;
  RETURN jsonb_build_object('status', 'ok');
END
$$;
