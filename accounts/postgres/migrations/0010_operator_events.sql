-- The outbox of operator events (accounts/operator_events.go): each event
-- waits here until the operator's webhook took it (status delivered) or
-- refused it for three days (failed). A claim moves next_attempt_at a lease
-- ahead, in a SERIALIZABLE transaction, so one node posts it at a time.
CREATE TABLE operator_events (
	id              text PRIMARY KEY,
	type            text NOT NULL,
	created_at      timestamptz NOT NULL,
	data            json NOT NULL, -- json, not jsonb: kept as written
	status          text NOT NULL,
	attempts        integer NOT NULL,
	next_attempt_at timestamptz NOT NULL,
	finished_at     timestamptz,
	last_error      text NOT NULL
);
CREATE INDEX operator_events_due ON operator_events (next_attempt_at) WHERE status = 'pending';
