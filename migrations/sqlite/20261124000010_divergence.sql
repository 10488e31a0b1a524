-- KL divergence of each trial's next-token distribution from the study's
-- reference configuration (llama-perplexity), where measured: its mean and
-- 99th percentile in nats, and the share of tokens whose likeliest next
-- token is the reference's.
ALTER TABLE trials ADD COLUMN kld_mean REAL;
ALTER TABLE trials ADD COLUMN kld_p99 REAL;
ALTER TABLE trials ADD COLUMN same_top_rate REAL;
