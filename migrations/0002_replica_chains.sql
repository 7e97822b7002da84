-- Rows replicated from sidecars (POST /v1/audit/ingest) on a PostgreSQL central gateway: the ReplicaStore
-- port, src/ledger/postgres-replicas.ts. As in the LMDB central store they are kept apart from the rows the
-- gateway replicas write themselves (gov_audit_rows): each sidecar's chain is its own source chain, stored
-- byte for byte as the sidecar chained it, verified on ingest and by GET /v1/audit/chain/verify.

CREATE TABLE gov_replica_rows (
  source text COLLATE "C" NOT NULL,
  seq bigint NOT NULL CHECK (seq > 0),
  envelope_id text COLLATE "C" NOT NULL,
  row_bytes bytea NOT NULL,
  -- When the central store wrote the row, in the ingest transaction that commits right after (one UPDATE
  -- of the head later): the end of the replication lag as bench/replication.js measures it.
  stored_at timestamptz NOT NULL DEFAULT clock_timestamp(),
  PRIMARY KEY (source, seq),
  -- Idempotence by envelope id within a source chain, as the LMDB store's [source, envelope id] index.
  CONSTRAINT gov_replica_rows_envelope UNIQUE (source, envelope_id)
);

-- Each source's head, moved in the same transaction as its rows. An ingest locks it (SELECT ... FOR UPDATE)
-- and plans the batch against it, so batches of one source apply one at a time across every gateway
-- replica on this database (a retry racing its original, two replicas behind a load balancer), while
-- batches of different sources run side by side.
CREATE TABLE gov_replica_heads (
  source text COLLATE "C" PRIMARY KEY,
  seq bigint NOT NULL CHECK (seq >= 0),
  hash text,
  updated_at timestamptz NOT NULL DEFAULT now()
);

-- Append-only in the database itself: a replicated row is never changed or removed (the sidecar keeps no
-- other copy once it has pruned its payload). There is no erasure path for replicated rows yet.
CREATE FUNCTION gov_replica_rows_guard() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION 'gov_replica_rows is append-only: % is refused', TG_OP USING ERRCODE = 'insufficient_privilege';
END
$$;
CREATE TRIGGER gov_replica_rows_append_only BEFORE UPDATE OR DELETE ON gov_replica_rows
  FOR EACH ROW EXECUTE FUNCTION gov_replica_rows_guard();
CREATE TRIGGER gov_replica_rows_no_truncate BEFORE TRUNCATE ON gov_replica_rows
  FOR EACH STATEMENT EXECUTE FUNCTION gov_replica_rows_guard();
