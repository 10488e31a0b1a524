-- The largest probed context size whose recall passed at every depth.
ALTER TABLE trials ADD COLUMN context_tokens BIGINT;
