-- Memory peaks sampled from launch to stop.
ALTER TABLE trials ADD COLUMN peak_rss_bytes BIGINT;
ALTER TABLE trials ADD COLUMN mem_available_drop_bytes BIGINT;
ALTER TABLE trials ADD COLUMN peak_gpu_bytes BIGINT;
