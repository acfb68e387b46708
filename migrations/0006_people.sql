-- People (docs/access.md): who signed in, the tokens they gave their agents, the sign-in tokens
-- already used, and who administers the deployment. A session or an agent token is kept as the
-- SHA-256 of its secret, never the secret itself.
CREATE TABLE sessions (
    secret_hash    TEXT PRIMARY KEY,
    -- The IAM principal (user or role) the person signed in as, and STS's ARN of the caller
    -- (a role session names the person: `assumed-role/Dev/alice`).
    principal_arn  TEXT NOT NULL,
    arn            TEXT NOT NULL,
    created_at     TEXT NOT NULL,
    -- Seconds since the epoch.
    expires_at     INTEGER NOT NULL
);
CREATE TABLE agent_tokens (
    id             TEXT PRIMARY KEY,
    secret_hash    TEXT NOT NULL UNIQUE,
    principal_arn  TEXT NOT NULL,
    arn            TEXT NOT NULL,
    name           TEXT NOT NULL,
    -- 1: the agent may only read, whatever its person may do.
    read_only      INTEGER NOT NULL,
    created_at     TEXT NOT NULL,
    expires_at     INTEGER NOT NULL,
    revoked_at     TEXT
);
CREATE INDEX agent_tokens_arn ON agent_tokens(arn, created_at);
-- A sign-in token is accepted once: its signature is kept until STS would refuse it anyway.
CREATE TABLE used_sign_ins (
    signature      TEXT PRIMARY KEY,
    expires_at     INTEGER NOT NULL
);
CREATE TABLE admins (
    principal_arn  TEXT PRIMARY KEY,
    added_by       TEXT NOT NULL,
    added_at       TEXT NOT NULL
);
