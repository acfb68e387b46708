-- State of the built-in simulated AWS account and Kubernetes clusters (`--cloud sandbox`).
-- Kept in the same file as the operations so that a restart sees one consistent world.

CREATE TABLE sandbox_resources (
    -- e.g. `vpc`, `subnet`, `eks-cluster`, `hyperpod-cluster`, `k8s:PersistentVolume`.
    kind        TEXT NOT NULL,
    id          TEXT NOT NULL,
    -- Optional unique name within the kind (EKS and HyperPod cluster names, bucket names).
    name        TEXT,
    data_json   TEXT NOT NULL,
    -- Milliseconds since the epoch; lifecycles are derived from it and the time scale.
    created_ms  INTEGER NOT NULL,
    deleted_ms  INTEGER,
    PRIMARY KEY (kind, id)
);

CREATE UNIQUE INDEX sandbox_resources_name ON sandbox_resources(kind, name)
    WHERE name IS NOT NULL AND deleted_ms IS NULL;

-- Count of every simulated mutating API call, so tests can prove no mutation was replayed.
CREATE TABLE sandbox_calls (
    api       TEXT PRIMARY KEY NOT NULL,
    accepted  INTEGER NOT NULL DEFAULT 0,
    rejected  INTEGER NOT NULL DEFAULT 0
);
