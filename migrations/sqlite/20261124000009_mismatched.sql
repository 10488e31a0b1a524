-- Settings the engine did not run as asked: a JSON object of each
-- setting and what ran instead (see engine_bridge::applied).
ALTER TABLE trials ADD COLUMN mismatched TEXT;
