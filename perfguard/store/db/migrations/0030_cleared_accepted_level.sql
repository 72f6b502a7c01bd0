-- An accepted level withdrawn (`perfguard accept --clear ID`), kept with who cleared it
-- and when, as an acknowledgement is: from the next verdict on it no longer applies, and
-- the verdicts judged with it say so over them.
ALTER TABLE accepted_level ADD COLUMN cleared_at timestamptz, ADD COLUMN cleared_by text;
