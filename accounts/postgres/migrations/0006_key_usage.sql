-- Usage per key per UTC hour (accounts/usage.go). Each node adds its
-- counts in batches (INSERT ... ON CONFLICT DO UPDATE adding to the row), so
-- a row holds the sum over every node. refused maps a refusal reason to its
-- count. key_id is a consumption or combined key id, with no foreign key:
-- the usage of a deleted key stays until it ages out (90 days, pruned by
-- the lifecycle worker).
CREATE TABLE key_usage (
	key_id        text NOT NULL,
	hour          timestamptz NOT NULL,
	admitted      bigint NOT NULL DEFAULT 0,
	refused       jsonb NOT NULL DEFAULT '{}'::jsonb,
	input_tokens  bigint NOT NULL DEFAULT 0,
	output_tokens bigint NOT NULL DEFAULT 0,
	seconds       double precision NOT NULL DEFAULT 0,
	PRIMARY KEY (key_id, hour)
);
CREATE INDEX key_usage_hour ON key_usage (hour);
