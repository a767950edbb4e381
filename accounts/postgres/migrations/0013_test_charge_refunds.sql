-- The built-in test processor's partial refunds (operator refunds, issue
-- 39): refund idempotency key → the amount it returned.
ALTER TABLE test_charges ADD COLUMN refunds jsonb NOT NULL DEFAULT '{}';
