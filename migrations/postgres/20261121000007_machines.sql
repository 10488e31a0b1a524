-- A worker's class names the hardware it stands for: workers of one class
-- are interchangeable, and a study compares speeds only within a class.
ALTER TABLE workers ADD COLUMN machine_class TEXT;
-- The class of machine a trial is queued for, then the one it ran on.
ALTER TABLE trials ADD COLUMN machine TEXT;
