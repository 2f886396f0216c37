-- The tables job.toml writes. `word_totals` needs a unique key on `word` for
-- the upsert; `word_events` takes every record as a new row.
CREATE TABLE IF NOT EXISTS word_totals (word text PRIMARY KEY, count bigint NOT NULL);
CREATE TABLE IF NOT EXISTS word_events (word text NOT NULL, count bigint NOT NULL);
