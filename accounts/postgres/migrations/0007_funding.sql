-- Funding pools (accounts/funding.go): a goal and a deadline from the
-- configuration, and the run-time state of a pool's status. config_status
-- is the status the configuration last gave the pool; status_reason what
-- set the current one ('config' until the pool moves at run time, after
-- which a reload leaves it). Existing pools were set by their config.
ALTER TABLE pools
	ADD COLUMN funding_goal      text NOT NULL DEFAULT '',
	ADD COLUMN funding_deadline  timestamptz,
	ADD COLUMN config_status     text NOT NULL DEFAULT '',
	ADD COLUMN status_reason     text NOT NULL DEFAULT '',
	ADD COLUMN status_changed_at timestamptz;
UPDATE pools SET config_status = status, status_reason = 'config';

-- A pool's pledges, read by the funding pass and the pool's figures.
CREATE INDEX subscriptions_pool_status ON subscriptions (pool_id, status);
