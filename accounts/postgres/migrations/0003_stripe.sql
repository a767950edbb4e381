-- Billing records of a real payment processor (accounts.BillingTx).

-- The processor's customer of each user, created once and remembered.
CREATE TABLE processor_customers (
	processor   text NOT NULL,
	user_id     text NOT NULL REFERENCES users (id),
	customer_id text NOT NULL,
	PRIMARY KEY (processor, user_id)
);

-- Webhook events already acted on: a redelivery finds its id here.
CREATE TABLE webhook_events (
	id          text PRIMARY KEY,
	type        text NOT NULL,
	received_at timestamptz NOT NULL
);
CREATE INDEX webhook_events_received_at ON webhook_events (received_at);

-- Purchase requests made with an Idempotency-Key, and their answers
-- (status 0 while the request runs).
CREATE TABLE idempotent_requests (
	user_id     text NOT NULL REFERENCES users (id),
	key         text NOT NULL,
	fingerprint text NOT NULL,
	resource_id text NOT NULL,
	status      integer NOT NULL,
	body        bytea NOT NULL,
	created_at  timestamptz NOT NULL,
	PRIMARY KEY (user_id, key)
);
CREATE INDEX idempotent_requests_created_at ON idempotent_requests (created_at);
