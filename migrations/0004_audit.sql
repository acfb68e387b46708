-- The audit trail: one row per mutating request (REST, UI or an agent's MCP tool call), whether
-- or not it started an operation. Never a secret: the principal says how the caller
-- authenticated (`token` or `loopback`), not with what.
CREATE TABLE audit (
    id            INTEGER PRIMARY KEY AUTOINCREMENT,
    at            TEXT NOT NULL,
    -- `api`, `browser` or `agent` (X-InstantStart-Actor).
    actor         TEXT NOT NULL,
    principal     TEXT NOT NULL,
    method        TEXT NOT NULL,
    -- The route template (`/api/clusters/{name}`) and the path as requested.
    route         TEXT NOT NULL,
    path          TEXT NOT NULL,
    status        INTEGER NOT NULL,
    -- `ok` (2xx), `refused` (4xx) or `error` (5xx).
    outcome       TEXT NOT NULL,
    request_id    TEXT NOT NULL,
    -- The operation the request started or acted on, when it names one.
    operation_id  TEXT
);
CREATE INDEX audit_actor ON audit(actor, id);
