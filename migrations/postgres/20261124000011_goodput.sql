-- Requests a second answered within the load probe's latency objective,
-- at the highest arrival rate that held it; 0 when none did.
ALTER TABLE trials ADD COLUMN goodput_rps DOUBLE PRECISION;
