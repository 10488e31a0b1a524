-- What a trial's numbers rest on (JSON): each speed per measured request,
-- and how many pass/fail items each share was counted over.
ALTER TABLE trials ADD COLUMN support TEXT;
