-- The card a charge is made on, fixed when its intent (or a renewal's claim)
-- is written: a retry under the same processor idempotency key re-sends the
-- same request, which a processor such as Stripe requires (the same key with
-- another card is refused). '' for records made before it was kept: a retry
-- of one asks the processor what became of the key first.
ALTER TABLE charge_intents ADD COLUMN method_id text NOT NULL DEFAULT '';
ALTER TABLE charges ADD COLUMN method_id text NOT NULL DEFAULT '';
