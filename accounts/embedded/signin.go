package embedded

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/timeblock/timeblock/accounts"
)

type signInRecord struct {
	TokenHash string    `json:"token_hash"`
	Email     string    `json:"email"`
	CreatedAt time.Time `json:"created_at"`
	ExpiresAt time.Time `json:"expires_at"`
}

func (t *tx) CreateSignInToken(s *accounts.SignInToken) error {
	if t.exists(bucketSignInTokens, s.TokenHash) {
		return fmt.Errorf("create sign-in token: token hash already used: %w", accounts.ErrConflict)
	}
	r := &signInRecord{TokenHash: s.TokenHash, Email: s.Email, CreatedAt: ts(s.CreatedAt), ExpiresAt: ts(s.ExpiresAt)}
	if err := t.save(bucketSignInTokens, s.TokenHash, r); err != nil {
		return fmt.Errorf("create sign-in token: %w", err)
	}
	return nil
}

func (t *tx) TakeSignInToken(tokenHash string) (*accounts.SignInToken, error) {
	var r signInRecord
	if err := t.mustLoad(bucketSignInTokens, tokenHash, &r); err != nil {
		return nil, fmt.Errorf("take sign-in token: %w", err)
	}
	if err := t.bucket(bucketSignInTokens).Delete([]byte(tokenHash)); err != nil {
		return nil, fmt.Errorf("take sign-in token: %w", err)
	}
	return &accounts.SignInToken{TokenHash: r.TokenHash, Email: r.Email, CreatedAt: r.CreatedAt.UTC(), ExpiresAt: r.ExpiresAt.UTC()}, nil
}

func (t *tx) DeleteSignInTokensExpired(now time.Time) (int, error) {
	b := t.bucket(bucketSignInTokens)
	var expired [][]byte
	err := b.ForEach(func(k, v []byte) error {
		var r signInRecord
		if err := json.Unmarshal(v, &r); err != nil {
			return fmt.Errorf("decode %s record %q: %w", bucketSignInTokens, k, err)
		}
		if !now.Before(r.ExpiresAt) {
			expired = append(expired, k)
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("delete expired sign-in tokens: %w", err)
	}
	for _, k := range expired {
		if err := b.Delete(k); err != nil {
			return 0, fmt.Errorf("delete expired sign-in tokens: %w", err)
		}
	}
	return len(expired), nil
}

func (t *tx) CountSignInTokens(email string, since time.Time) (int, time.Time, error) {
	var (
		n      int
		oldest time.Time
	)
	err := t.bucket(bucketSignInTokens).ForEach(func(k, v []byte) error {
		var r signInRecord
		if err := json.Unmarshal(v, &r); err != nil {
			return fmt.Errorf("decode %s record %q: %w", bucketSignInTokens, k, err)
		}
		if r.Email == email && !r.CreatedAt.Before(since) {
			n++
			if oldest.IsZero() || r.CreatedAt.Before(oldest) {
				oldest = r.CreatedAt.UTC()
			}
		}
		return nil
	})
	if err != nil {
		return 0, time.Time{}, fmt.Errorf("count sign-in tokens: %w", err)
	}
	return n, oldest, nil
}
