-- Cost history, kept as it happens so it survives restarts and nodes that are gone.
--
-- Each HyperPod node's lifetime: launched (HyperPod's LaunchTime) until it left the node list
-- (`ended_ms`, when this server noticed; NULL while it runs). Instance-hours come from here.
CREATE TABLE node_lifetimes (
    cluster         TEXT NOT NULL,
    instance_id     TEXT NOT NULL,
    instance_group  TEXT NOT NULL,
    instance_type   TEXT NOT NULL,
    launched_ms     INTEGER NOT NULL,
    ended_ms        INTEGER,
    PRIMARY KEY (cluster, instance_id)
);

-- GPU-seconds per UTC day, node and holder, from the samples of the watch summary: a holder is
-- a namespace and a workload (`training/<job>`, `deployment/<name>`, …); the holder with an
-- empty namespace and workload `idle` is allocatable GPUs nobody requested.
CREATE TABLE gpu_seconds (
    cluster      TEXT NOT NULL,
    day          TEXT NOT NULL,
    instance_id  TEXT NOT NULL,
    namespace    TEXT NOT NULL,
    workload     TEXT NOT NULL,
    seconds      REAL NOT NULL,
    PRIMARY KEY (cluster, day, instance_id, namespace, workload)
);

-- When each cluster was last sampled: the next sample credits the time since (capped, so a
-- server that was down never credits its absence to whoever holds the GPUs now).
CREATE TABLE cost_samples (
    cluster  TEXT PRIMARY KEY,
    at_ms    INTEGER NOT NULL
);
