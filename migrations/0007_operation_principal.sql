-- Who started an operation, when people sign in (docs/access.md): STS's ARN of the person (a
-- pipeline's stages carry their pipeline's). NULL in single-user mode, and for operations
-- started before this column existed. Someone who does not administer the deployment sees the
-- operations they started, and every operation of a cluster they may read whole.
ALTER TABLE operations ADD COLUMN principal TEXT;
