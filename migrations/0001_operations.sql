-- Durable operations: every long-running stage is an operation made of ordered phases.
-- A phase that mutates the cloud is recorded as `submitting` before the call and
-- `submitted` (with the identifiers it created) right after, so a restart never replays it.

CREATE TABLE clusters (
    -- Cluster name as the user typed it; also the EKS cluster name.
    name            TEXT PRIMARY KEY NOT NULL,
    region          TEXT NOT NULL,
    -- The validated creation request (zones, CIDR overrides, instance choices).
    spec_json       TEXT NOT NULL,
    -- Identifiers recorded by stages (vpc id, subnet ids, EKS ARN, HyperPod ARN ...).
    resources_json  TEXT NOT NULL DEFAULT '{}',
    -- `active` | `deleting` | `deleted`.
    status          TEXT NOT NULL DEFAULT 'active',
    created_at      TEXT NOT NULL,
    updated_at      TEXT NOT NULL
);

CREATE TABLE operations (
    id               TEXT PRIMARY KEY NOT NULL,
    -- `cluster` (network + EKS), `dependencies`, `hyperpod`, `storage`, `pipeline`, `delete-cluster`.
    kind             TEXT NOT NULL,
    cluster          TEXT NOT NULL,
    params_json      TEXT NOT NULL,
    -- Client-supplied `Idempotency-Key` (or a derived one for pipeline children).
    idempotency_key  TEXT UNIQUE,
    -- SHA-256 of the request that created the operation; a reused key with another body is refused.
    request_hash     TEXT,
    -- `pending` | `running` | `succeeded` | `failed` | `cancelled`.
    state            TEXT NOT NULL,
    -- `browser` | `agent` | `api`: who asked for it (audit).
    actor            TEXT NOT NULL,
    -- Pipeline that owns this stage operation, if any.
    parent_id        TEXT REFERENCES operations(id),
    error_json       TEXT,
    cancel_requested INTEGER NOT NULL DEFAULT 0,
    created_at       TEXT NOT NULL,
    updated_at       TEXT NOT NULL
);

CREATE INDEX operations_cluster ON operations(cluster, kind, created_at);
CREATE INDEX operations_state ON operations(state);

CREATE TABLE phases (
    operation_id  TEXT NOT NULL REFERENCES operations(id) ON DELETE CASCADE,
    seq           INTEGER NOT NULL,
    name          TEXT NOT NULL,
    -- `pending` | `submitting` | `submitted` | `succeeded` | `failed` | `skipped`.
    state         TEXT NOT NULL,
    attempt       INTEGER NOT NULL DEFAULT 0,
    -- Latest human-readable progress line while watching.
    progress      TEXT,
    outputs_json  TEXT,
    error_json    TEXT,
    started_at    TEXT,
    finished_at   TEXT,
    PRIMARY KEY (operation_id, seq)
);

-- The active cluster is a single row.
CREATE TABLE settings (
    key    TEXT PRIMARY KEY NOT NULL,
    value  TEXT NOT NULL
);
