-- Reports: notebooks written from a study's findings and edited by people.
CREATE TABLE reports (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    study_id BIGINT NOT NULL REFERENCES studies (id) ON DELETE CASCADE,
    title TEXT NOT NULL,
    created_ms BIGINT NOT NULL
);
CREATE INDEX reports_study ON reports (study_id, id);

-- Every saved state of a report; the highest version is the current one.
CREATE TABLE report_versions (
    report_id BIGINT NOT NULL REFERENCES reports (id) ON DELETE CASCADE,
    version BIGINT NOT NULL,
    title TEXT NOT NULL,
    notebook TEXT NOT NULL,            -- JSON: cells in order, dismissed findings
    note TEXT NOT NULL,                -- what made this version: edited, regenerated, …
    created_ms BIGINT NOT NULL,
    PRIMARY KEY (report_id, version)
);

-- Read-only links: an unguessable token showing one version of a report,
-- until revoked.
CREATE TABLE report_shares (
    token TEXT PRIMARY KEY,
    report_id BIGINT NOT NULL REFERENCES reports (id) ON DELETE CASCADE,
    version BIGINT NOT NULL,
    created_ms BIGINT NOT NULL,
    revoked_ms BIGINT
);
CREATE INDEX report_shares_report ON report_shares (report_id);
