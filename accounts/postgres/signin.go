package postgres

import (
	"time"

	"github.com/timeblock/timeblock/accounts"
)

func (t *tx) CreateSignInToken(s *accounts.SignInToken) error {
	err := t.execOne(`INSERT INTO sign_in_tokens (token_hash, email, created_at, expires_at) VALUES ($1, $2, $3, $4)`,
		s.TokenHash, s.Email, ts(s.CreatedAt), ts(s.ExpiresAt))
	return wrap(err, "create sign-in token")
}

// TakeSignInToken deletes and returns in one statement: of two uses of a
// link at once, the second finds no row.
func (t *tx) TakeSignInToken(tokenHash string) (*accounts.SignInToken, error) {
	var s accounts.SignInToken
	err := t.write(func(db dbtx) error {
		return db.QueryRow(t.ctx, `DELETE FROM sign_in_tokens WHERE token_hash = $1
			RETURNING token_hash, email, created_at, expires_at`, tokenHash).
			Scan(&s.TokenHash, &s.Email, &s.CreatedAt, &s.ExpiresAt)
	})
	if err != nil {
		return nil, wrap(err, "take sign-in token")
	}
	s.CreatedAt, s.ExpiresAt = s.CreatedAt.UTC(), s.ExpiresAt.UTC()
	return &s, nil
}

func (t *tx) DeleteSignInTokensExpired(now time.Time) (int, error) {
	var n int64
	err := t.write(func(db dbtx) error {
		tag, err := db.Exec(t.ctx, `DELETE FROM sign_in_tokens WHERE expires_at <= $1`, ts(now))
		n = tag.RowsAffected()
		return err
	})
	return int(n), wrap(err, "delete expired sign-in tokens")
}

// CountSignInTokens reads the address's rows in the caller's SERIALIZABLE
// transaction: two nodes counting the same address at once and both adding
// a token is a serialization failure, retried, so the limit holds across
// nodes. The table holds only live links (a few per address), so no index
// on email is needed.
func (t *tx) CountSignInTokens(email string, since time.Time) (int, time.Time, error) {
	var (
		n      int
		oldest *time.Time
	)
	err := t.db.QueryRow(t.ctx, `SELECT count(*), min(created_at) FROM sign_in_tokens WHERE email = $1 AND created_at >= $2`,
		email, ts(since)).Scan(&n, &oldest)
	if err != nil {
		return 0, time.Time{}, wrap(err, "count sign-in tokens")
	}
	return n, fromNull(oldest), nil
}
