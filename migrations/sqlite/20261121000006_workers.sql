-- Workers: Tunebook on other machines, running trials the server queues
-- for them. Each authenticates with a token only its SHA-256 is kept of.
CREATE TABLE workers (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    name TEXT NOT NULL UNIQUE,
    token_sha256 TEXT NOT NULL UNIQUE,
    hardware TEXT,                     -- JSON: CPU, memory, GPUs, bandwidth, as it registered
    profiles TEXT,                     -- JSON: the engine profiles and models it can run
    created_ms BIGINT NOT NULL,
    last_seen_ms BIGINT,
    revoked_ms BIGINT
);

-- A trial for workers waits with `target` set ('any', or one worker's
-- name); a worker that takes it holds a lease it renews while it runs. A
-- lease that runs out puts the trial back in the queue.
ALTER TABLE trials ADD COLUMN target TEXT;
ALTER TABLE trials ADD COLUMN worker_id BIGINT REFERENCES workers (id);
ALTER TABLE trials ADD COLUMN lease_expires_ms BIGINT;
ALTER TABLE trials ADD COLUMN attempts BIGINT NOT NULL DEFAULT 0;
CREATE INDEX trials_queue ON trials (state, target, id);
