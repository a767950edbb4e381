-- The most seats one user may pledge per block of a funding pool (the pool
-- option max_pledge_seats, accounts/funding.go); 0 is the default limit.
ALTER TABLE pools ADD COLUMN max_pledge_seats integer NOT NULL DEFAULT 0;
