-- Everything the probes measured (JSON), and the headline quality numbers.
ALTER TABLE trials ADD COLUMN measurement TEXT;
ALTER TABLE trials ADD COLUMN quality_score REAL;
ALTER TABLE trials ADD COLUMN context_pass_rate REAL;
-- The decode speed memory bandwidth allows, and how close the trial came.
ALTER TABLE trials ADD COLUMN ceiling_tps REAL;
ALTER TABLE trials ADD COLUMN pct_of_ceiling REAL;
-- Perplexity on the reference text, where measured.
ALTER TABLE trials ADD COLUMN perplexity REAL;
-- Load progress: how long earlier loads of the model took, and what the engine says now.
ALTER TABLE trials ADD COLUMN expected_load_ms REAL;
ALTER TABLE trials ADD COLUMN load_state TEXT;
