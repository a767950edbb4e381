-- What a subscription pays each period (the whole year on a yearly cycle),
-- fixed when it is bought so that a configuration reload (a new price or
-- annual discount) never changes what an existing subscription renews at.
-- '' for subscriptions bought before: a monthly one pays its monthly price, a
-- yearly one what its first charge paid (accounts.periodAmountTx).
ALTER TABLE subscriptions ADD COLUMN period_amount text NOT NULL DEFAULT '';
