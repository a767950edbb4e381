-- Charge intents: written before a processor call, marked done by the
-- transaction that records the charge, settled (refunded or voided) when a
-- node died in between. See accounts/intents.go.
CREATE TABLE charge_intents (
	id              text PRIMARY KEY,
	user_id         text NOT NULL REFERENCES users (id),
	subscription_id text NOT NULL, -- pre-allocated: the subscription may never exist
	charge_id       text NOT NULL,
	kind            text NOT NULL,
	amount          text NOT NULL,
	idempotency_key text NOT NULL UNIQUE,
	status          text NOT NULL,
	processor_ref   text NOT NULL,
	created_at      timestamptz NOT NULL,
	updated_at      timestamptz NOT NULL
);
CREATE INDEX charge_intents_open ON charge_intents (updated_at) WHERE status IN ('pending', 'settling');

-- The built-in test processor's ledger, written in its own transactions as an
-- outside processor would keep it: no reference to the account tables.
CREATE TABLE test_charges (
	idempotency_key text PRIMARY KEY,
	ref             text NOT NULL UNIQUE,
	user_id         text NOT NULL,
	method_id       text NOT NULL,
	amount          text NOT NULL,
	description     text NOT NULL,
	declined        boolean NOT NULL,
	refunded        boolean NOT NULL,
	created_at      timestamptz NOT NULL
);

-- Claimed renewals still pending, for the settlement of abandoned claims.
CREATE INDEX charges_pending ON charges (created_at) WHERE status = 'pending';
