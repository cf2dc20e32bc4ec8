-- The PostgreSQL schema of the metadata store (postgres_metadata_store.h),
-- embedded into the server at build time. The same tables, columns and keys
-- as the SQLite schema (metadata_schema.sql), so that the shared statements
-- of sql_metadata_ops.h mean the same thing on both; integers are BIGINT and
-- payloads BYTEA.
--
-- Each "-- migration N" section moves a database from schema version N-1 to
-- N. The store creates the table bnn_metadata_schema (one row: the version)
-- itself, then runs the sections a database lacks in order, each in one
-- transaction that also records its number, while it holds an advisory lock
-- so that replicas starting together migrate once. A database whose version
-- is newer than the last section is refused. A released section is never
-- edited: a change is a new section at the end.
--
-- Every record is kept whole in `payload` (its protobuf message in the
-- checksummed record frame); the other columns are copies of the fields
-- that lookups, filters, ordering and uniqueness use. Lists are newest first
-- and paged by (created_unix_ms, id) descending, which the indexes cover.

-- migration 1: datasets, snapshots, jobs (loss curves inside their records),
-- models
CREATE TABLE store_info (
  key TEXT PRIMARY KEY,
  value TEXT NOT NULL
);

CREATE TABLE datasets (
  dataset_id TEXT PRIMARY KEY,
  -- NULL for a dataset without a (unique) name.
  name TEXT UNIQUE,
  created_unix_ms BIGINT NOT NULL,
  latest_version BIGINT NOT NULL
);
CREATE INDEX datasets_by_created ON datasets (created_unix_ms DESC, dataset_id DESC);

CREATE TABLE dataset_versions (
  dataset_id TEXT NOT NULL REFERENCES datasets (dataset_id) ON DELETE CASCADE,
  version BIGINT NOT NULL,
  -- Hex SHA-256 of the blob holding the version's dataset file.
  rows_blob TEXT NOT NULL,
  payload BYTEA NOT NULL,
  PRIMARY KEY (dataset_id, version)
);
CREATE INDEX dataset_versions_by_blob ON dataset_versions (rows_blob);

CREATE TABLE snapshots (
  snapshot_id TEXT PRIMARY KEY,
  dataset_id TEXT NOT NULL,
  method TEXT NOT NULL,
  created_unix_ms BIGINT NOT NULL,
  -- Hex SHA-256 of the blob holding the snapshot file.
  payload_blob TEXT NOT NULL,
  payload BYTEA NOT NULL
);
CREATE INDEX snapshots_by_created ON snapshots (created_unix_ms DESC, snapshot_id DESC);
CREATE INDEX snapshots_by_dataset ON snapshots (dataset_id, created_unix_ms DESC, snapshot_id DESC);
CREATE INDEX snapshots_by_method ON snapshots (method, created_unix_ms DESC, snapshot_id DESC);
CREATE INDEX snapshots_by_blob ON snapshots (payload_blob);

CREATE TABLE jobs (
  job_id TEXT PRIMARY KEY,
  -- store.JobRecord.State number.
  state BIGINT NOT NULL,
  dataset_id TEXT NOT NULL,
  method TEXT NOT NULL,
  -- NULL when the job is filed under no model.
  model_name TEXT,
  created_unix_ms BIGINT NOT NULL,
  payload BYTEA NOT NULL
);
CREATE INDEX jobs_by_created ON jobs (created_unix_ms DESC, job_id DESC);
CREATE INDEX jobs_by_state ON jobs (state, created_unix_ms DESC, job_id DESC);
CREATE INDEX jobs_by_dataset ON jobs (dataset_id, created_unix_ms DESC, job_id DESC);
CREATE INDEX jobs_by_method ON jobs (method, created_unix_ms DESC, job_id DESC);
CREATE INDEX jobs_by_model ON jobs (model_name, created_unix_ms DESC, job_id DESC);

CREATE TABLE models (
  name TEXT PRIMARY KEY,
  created_unix_ms BIGINT NOT NULL,
  payload BYTEA NOT NULL
);
CREATE INDEX models_by_created ON models (created_unix_ms DESC, name DESC);

CREATE TABLE model_versions (
  model_name TEXT NOT NULL REFERENCES models (name) ON DELETE CASCADE,
  version BIGINT NOT NULL,
  -- A published snapshot cannot be deleted while a version points at it.
  snapshot_id TEXT NOT NULL REFERENCES snapshots (snapshot_id),
  payload BYTEA NOT NULL,
  PRIMARY KEY (model_name, version)
);
CREATE INDEX model_versions_by_snapshot ON model_versions (snapshot_id);

CREATE TABLE model_aliases (
  model_name TEXT NOT NULL REFERENCES models (name) ON DELETE CASCADE,
  alias TEXT NOT NULL,
  version BIGINT NOT NULL,
  payload BYTEA NOT NULL,
  PRIMARY KEY (model_name, alias),
  FOREIGN KEY (model_name, version) REFERENCES model_versions (model_name, version)
);
CREATE INDEX model_aliases_by_version ON model_aliases (model_name, version);

-- migration 2: job claims. The heartbeat of the process running a job
-- (store.JobRecord.heartbeat_unix_ms; 0 when none runs it): a worker claims
-- the oldest job to resume (INTERRUPTED, or RUNNING or CANCELLING with a
-- heartbeat older than the takeover time) or else the oldest QUEUED one,
-- through jobs_by_state.
ALTER TABLE jobs ADD COLUMN heartbeat_unix_ms BIGINT NOT NULL DEFAULT 0;
