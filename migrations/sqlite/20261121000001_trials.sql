-- Trials: one configuration run on one engine, with its medians.
CREATE TABLE trials (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    profile TEXT NOT NULL,
    model TEXT NOT NULL,
    settings TEXT NOT NULL,            -- JSON object: setting name -> value
    state TEXT NOT NULL,
    command TEXT,                      -- JSON: {program, args, env}
    created_ms BIGINT NOT NULL,
    started_ms BIGINT,
    finished_ms BIGINT,
    load_ms REAL,
    ttft_ms REAL,
    prefill_tps REAL,
    decode_tps REAL,
    client_decode_tps REAL,
    prompt_tokens BIGINT,
    tokens_requested BIGINT,
    tokens_generated BIGINT,
    n_ctx BIGINT,
    props TEXT,                        -- JSON: what the engine reported running
    failure_kind TEXT,
    error TEXT,
    log_tail TEXT
);
CREATE INDEX trials_state ON trials (state);

-- Samples: every recorded request of a trial.
CREATE TABLE samples (
    trial_id BIGINT NOT NULL REFERENCES trials (id) ON DELETE CASCADE,
    idx BIGINT NOT NULL,
    ttft_ms REAL NOT NULL,
    total_ms REAL NOT NULL,
    client_decode_tps REAL,
    prompt_n BIGINT NOT NULL,
    prompt_ms REAL NOT NULL,
    prompt_tps REAL NOT NULL,
    predicted_n BIGINT NOT NULL,
    predicted_ms REAL NOT NULL,
    predicted_tps REAL NOT NULL,
    PRIMARY KEY (trial_id, idx)
);
