-- Studies: a search over configurations, run unattended.
CREATE TABLE studies (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    name TEXT NOT NULL,
    definition TEXT NOT NULL,          -- JSON: the study as written
    state TEXT NOT NULL,               -- running, paused, done, stopped, failed
    stop_reason TEXT,
    created_ms BIGINT NOT NULL,
    finished_ms BIGINT
);

-- A trial may belong to a study: as its baseline, a re-run of the
-- baseline, or a configuration a strategy proposed (with why).
ALTER TABLE trials ADD COLUMN study_id BIGINT REFERENCES studies (id);
ALTER TABLE trials ADD COLUMN role TEXT;
ALTER TABLE trials ADD COLUMN note TEXT;
-- How far the baseline had drifted when this trial ran, where it had.
ALTER TABLE trials ADD COLUMN drift_pct REAL;
CREATE INDEX trials_study ON trials (study_id, id);

-- What happened in a study, in order (started, paused, drift, stopped, …).
CREATE TABLE study_events (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    study_id BIGINT NOT NULL REFERENCES studies (id) ON DELETE CASCADE,
    at_ms BIGINT NOT NULL,
    kind TEXT NOT NULL,
    message TEXT NOT NULL
);
CREATE INDEX study_events_study ON study_events (study_id, id);
