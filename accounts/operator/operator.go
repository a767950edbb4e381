// Package operator is the operator's side of the business (SPEC.md §8): who
// is an operator, the lists they run the business from (every pool with its
// seats sold and money, every subscription), the actions they take on
// subscriptions and pools, and the audit log of those actions. It is a
// service over the store, beside accounts.Service: the lists are its own
// reads; the actions are accounts.Service's (the same code the admin API
// and the buyers use), run with an audit record that Service writes in the
// transaction of the effect (accounts.WithAudit).
package operator

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/timeblock/timeblock/accounts"
)

// SessionMaxAge is how long after sign-in a session reaches the operator's
// endpoints: a stolen or forgotten operator session is worth far more than a
// buyer's, so it lasts a working day rather than the buyers' 30 days. Older
// sessions keep working on the rest of /api.
const SessionMaxAge = 12 * time.Hour

// Paging of the lists.
const (
	DefaultLimit = 50
	MaxLimit     = 200
)

// ErrNotOperator is returned for every request that may not reach the
// operator's endpoints; the API answers it exactly as an unknown endpoint,
// so that they are not revealed.
var ErrNotOperator = errors.New("not an operator")

// LanesInUse counts a key's requests in flight in the given pools, on every
// node (the gate's count; api.Options.LanesInUse).
type LanesInUse func(ctx context.Context, keyID string, poolIDs []string) (int, error)

// Config builds a Service.
type Config struct {
	Store    accounts.Store
	Accounts *accounts.Service // runs the actions
	// Operators are the operators' e-mail addresses (the sign-in e-mail, or
	// the identity header's value), compared without regard to case.
	Operators  []string
	Now        func() time.Time // nil: time.Now
	LanesInUse LanesInUse       // nil: lanesInUse is 0
}

// Service serves the operator.
type Service struct {
	store     accounts.Store
	svc       *accounts.Service
	operators map[string]bool
	now       func() time.Time
	lanes     LanesInUse
}

// New builds the service.
func New(cfg Config) *Service {
	s := &Service{store: cfg.Store, svc: cfg.Accounts, operators: make(map[string]bool), now: cfg.Now, lanes: cfg.LanesInUse}
	if s.now == nil {
		s.now = time.Now
	}
	for _, e := range cfg.Operators {
		s.operators[strings.ToLower(strings.TrimSpace(e))] = true
	}
	return s
}

// IsOperator reports whether email is an operator's.
func (s *Service) IsOperator(email string) bool {
	return s != nil && s.operators[strings.ToLower(strings.TrimSpace(email))]
}

// Actor is the operator a request acts for.
type Actor struct {
	UserID string
	Email  string
}

// Authorize decides whether the principal p, authenticated with the session
// token sessionToken (for Via session), may use the operator's endpoints:
// a session or identity-provider sign-in of an operator's user. Management
// keys never may: they are long-lived script credentials, and scripts have
// Caddy's admin API. Anything else is ErrNotOperator; an operator's session
// older than SessionMaxAge is a 401 that says to sign in again.
func (s *Service) Authorize(ctx context.Context, p *accounts.Principal, sessionToken string) (*Actor, error) {
	if s == nil || len(s.operators) == 0 || p == nil {
		return nil, ErrNotOperator
	}
	if p.Via != accounts.ViaSession && p.Via != accounts.ViaIdentityProvider {
		return nil, ErrNotOperator
	}
	var (
		user *accounts.User
		sess *accounts.Session
	)
	err := s.store.View(ctx, func(tx accounts.Tx) error {
		var err error
		if user, err = tx.GetUser(p.UserID); err != nil {
			return err
		}
		if p.Via == accounts.ViaSession {
			sess, err = tx.GetSession(accounts.HashKey(sessionToken))
		}
		return err
	})
	if errors.Is(err, accounts.ErrNotFound) {
		return nil, ErrNotOperator
	}
	if err != nil {
		return nil, fmt.Errorf("operator: %w", err)
	}
	if !s.IsOperator(user.Email) {
		return nil, ErrNotOperator
	}
	if sess != nil && !s.now().Before(sess.CreatedAt.Add(SessionMaxAge)) {
		return nil, accounts.Unauthorized("operator sessions last %s from sign-in; this one began at %s: sign in again",
			SessionMaxAge, sess.CreatedAt.UTC().Format(time.RFC3339))
	}
	return &Actor{UserID: user.ID, Email: user.Email}, nil
}

// cursor is the position of a list's last row: its time and id.
type cursor struct {
	at time.Time
	id string
}

// older reports whether the row (at, id) comes after c in a list ordered
// newest first (by time, then id, both descending).
func (c cursor) older(at time.Time, id string) bool {
	at = at.Truncate(time.Microsecond)
	return at.Before(c.at) || at.Equal(c.at) && id < c.id
}

func (c cursor) String() string {
	return base64.RawURLEncoding.EncodeToString([]byte(strconv.FormatInt(c.at.UnixMicro(), 10) + "/" + c.id))
}

func parseCursor(s string) (cursor, error) {
	if s == "" {
		return cursor{}, nil
	}
	bad := accounts.Invalid("before must be the nextCursor of a previous page")
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return cursor{}, bad
	}
	at, id, ok := strings.Cut(string(b), "/")
	us, err := strconv.ParseInt(at, 10, 64)
	if !ok || err != nil || id == "" {
		return cursor{}, bad
	}
	return cursor{at: time.UnixMicro(us).UTC(), id: id}, nil
}

// pageLimit checks a requested page size (0: the default).
func pageLimit(limit int) (int, error) {
	switch {
	case limit == 0:
		return DefaultLimit, nil
	case limit < 0 || limit > MaxLimit:
		return 0, accounts.Invalid("limit must be a whole number between 1 and %d", MaxLimit)
	}
	return limit, nil
}
