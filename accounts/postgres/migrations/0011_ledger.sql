-- The ledger of money taken (accounts/ledger_records.go): one row per
-- successful payment, with its receipt number from ledger_numbers. A
-- sequence never makes two recording transactions wait for or conflict
-- with each other (a counter row would: under SERIALIZABLE, every charge
-- recorded at the same time as another would be retried, and one that gave
-- up would refund a paid purchase). The price is that a number taken by a
-- transaction that rolls back is not used: receipts are unique and
-- increasing, and may skip a number.
CREATE SEQUENCE ledger_numbers;

CREATE TABLE ledger_charges (
	id              text PRIMARY KEY,
	number          bigint NOT NULL UNIQUE,
	user_id         text NOT NULL REFERENCES users (id),
	subscription_id text NOT NULL, -- no reference: the record outlives any deletion
	pool_id         text NOT NULL,
	charge_id       text NOT NULL,
	kind            text NOT NULL,
	amount          text NOT NULL,
	currency        text NOT NULL,
	refunded_amount text NOT NULL,
	processor_ref   text NOT NULL,
	description     text NOT NULL,
	created_at      timestamptz NOT NULL
);
CREATE INDEX ledger_charges_user ON ledger_charges (user_id, number DESC);
CREATE UNIQUE INDEX ledger_charges_ref ON ledger_charges (processor_ref) WHERE processor_ref <> '';
