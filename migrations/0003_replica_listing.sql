-- GET /v1/audit/executions pages across the whole fleet: the gateway replicas' own rows (gov_audit_rows) and
-- the rows replicated from sidecars (gov_replica_rows), newest arrival first, with one cursor. Replicated
-- rows get the columns the listing filters on, copied from their hashed header as gov_audit_rows has them
-- (verify checks each against the header), and an arrival id drawn from gov_audit_rows' own identity
-- sequence, so that one number orders the rows of both tables.

ALTER TABLE gov_replica_rows
  ADD COLUMN id bigint,
  ADD COLUMN phase text,
  ADD COLUMN agent_id text,
  ADD COLUMN decision text,
  ADD COLUMN parent_envelope_id text,
  ADD COLUMN ts timestamptz;

-- A header field as text, or NULL when it is absent or not a string.
CREATE FUNCTION pg_temp.gov_header_text(h jsonb, k text) RETURNS text LANGUAGE sql IMMUTABLE AS $$
  SELECT CASE WHEN jsonb_typeof(h -> k) = 'string' THEN h ->> k END
$$;

-- The header's timestamp, or the epoch when it does not read as one (ingest refuses such rows now).
CREATE FUNCTION pg_temp.gov_header_ts(h jsonb) RETURNS timestamptz LANGUAGE plpgsql STABLE AS $$
BEGIN
  RETURN (h ->> 'timestamp')::timestamptz;
EXCEPTION WHEN others THEN
  RETURN 'epoch'::timestamptz;
END
$$;

-- Rows replicated before this migration: columns from their header (row_bytes: uint16 header length at
-- bytes 3-4, the header JSON from byte 37; src/ledger/row-format.ts), arrival ids in the order they were
-- stored. This is the one UPDATE the table ever takes, so its append-only trigger is lifted for this
-- transaction only.
ALTER TABLE gov_replica_rows DISABLE TRIGGER gov_replica_rows_append_only;
UPDATE gov_replica_rows r
   SET id = o.id,
       phase = coalesce(pg_temp.gov_header_text(o.h, 'phase'), ''),
       agent_id = coalesce(pg_temp.gov_header_text(o.h, 'agent_id'), ''),
       decision = coalesce(pg_temp.gov_header_text(o.h, 'decision'), ''),
       parent_envelope_id = pg_temp.gov_header_text(o.h, 'parent_envelope_id'),
       ts = pg_temp.gov_header_ts(o.h)
  FROM (SELECT s.source, s.seq, nextval(pg_get_serial_sequence('gov_audit_rows', 'id')) AS id,
               convert_from(substring(s.row_bytes FROM 37 FOR get_byte(s.row_bytes, 2) * 256 + get_byte(s.row_bytes, 3)), 'UTF8')::jsonb AS h
          FROM (SELECT source, seq, row_bytes FROM gov_replica_rows ORDER BY stored_at, source, seq) AS s) AS o
 WHERE r.source = o.source AND r.seq = o.seq;
ALTER TABLE gov_replica_rows ENABLE TRIGGER gov_replica_rows_append_only;
DROP FUNCTION pg_temp.gov_header_text(jsonb, text);
DROP FUNCTION pg_temp.gov_header_ts(jsonb);

-- New rows take their arrival id from the same sequence. Through a SECURITY DEFINER function, so that the
-- application role needs no privilege on gov_audit_rows' sequence (an identity column's inserts need none):
-- roles granted as docs/ledger.md said before this migration keep working.
DO $$
BEGIN
  EXECUTE format('CREATE FUNCTION gov_arrival_id() RETURNS bigint LANGUAGE sql VOLATILE SECURITY DEFINER SET search_path = %I, pg_temp AS %L',
                 current_schema(), format('SELECT nextval(%L::regclass)', pg_get_serial_sequence('gov_audit_rows', 'id')));
END
$$;
ALTER TABLE gov_replica_rows ALTER COLUMN id SET DEFAULT gov_arrival_id();
ALTER TABLE gov_replica_rows
  ALTER COLUMN id SET NOT NULL,
  ALTER COLUMN phase SET NOT NULL,
  ALTER COLUMN agent_id SET NOT NULL,
  ALTER COLUMN decision SET NOT NULL,
  ALTER COLUMN ts SET NOT NULL;

-- The filters of GET /v1/audit/executions, each with the paging order, as on gov_audit_rows.
CREATE UNIQUE INDEX gov_replica_rows_id ON gov_replica_rows (id);
CREATE INDEX gov_replica_rows_source_id ON gov_replica_rows (source, id);
CREATE INDEX gov_replica_rows_agent_id ON gov_replica_rows (agent_id, id);
CREATE INDEX gov_replica_rows_decision_id ON gov_replica_rows (decision, id);
CREATE INDEX gov_replica_rows_ts ON gov_replica_rows (ts);
-- GET /v1/audit/executions/{id} finds a replicated row by envelope id alone.
CREATE INDEX gov_replica_rows_envelope_id ON gov_replica_rows (envelope_id);
