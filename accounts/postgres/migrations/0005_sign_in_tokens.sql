-- One-time e-mail sign-in links (POST /api/auth/email). Only the token's hash
-- is kept; the row is deleted when the link is used, so a link works once.
CREATE TABLE sign_in_tokens (
	token_hash text PRIMARY KEY,
	email      text NOT NULL,
	created_at timestamptz NOT NULL,
	expires_at timestamptz NOT NULL
);
CREATE INDEX sign_in_tokens_expires_at ON sign_in_tokens (expires_at);
