-- The operator's audit log (accounts/audit.go): one row per operator action
-- (deliver a key, cancel a subscription, move a pool), written in the
-- transaction of the action. Pages are read newest first by (at, id).
CREATE TABLE operator_audit (
	id     text PRIMARY KEY,
	at     timestamptz NOT NULL,
	actor  text NOT NULL,
	action text NOT NULL,
	target text NOT NULL,
	detail text NOT NULL
);
CREATE INDEX operator_audit_at ON operator_audit (at DESC, id DESC);
