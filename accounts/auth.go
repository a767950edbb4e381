package accounts

// Authentication on /api/*: session tokens (issued by the operator endpoints)
// and management keys. Inference credentials are refused here, and account
// credentials are refused by the gate.

import (
	"context"
	"errors"
	"fmt"
	"net/mail"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"
)

// Ways a principal authenticated.
const (
	ViaSession       = "session"
	ViaManagementKey = "management_key"
)

// Principal is who an /api/* request acts for.
type Principal struct {
	UserID       string
	Via          string // ViaSession or ViaManagementKey
	CredentialID string // management key id; for a session, the first 12 hex chars of its token hash
}

const msgInferenceKeyOnAPI = "consumption keys and combined keys are for inference only; use a session token or a management key (mk_...)"

// Authenticate resolves an Authorization bearer credential (a session token
// or a management key) to its user. Every failure is a 401 that says what to
// send instead.
func (s *Service) Authenticate(ctx context.Context, token string) (*Principal, error) {
	token = strings.TrimSpace(token)
	switch {
	case token == "":
		return nil, Unauthorized("missing credentials: send Authorization: Bearer <session token or management key (mk_...)>")
	case strings.HasPrefix(token, "sk-"), strings.HasPrefix(token, "sk_"):
		return nil, Unauthorized(msgInferenceKeyOnAPI)
	case strings.HasPrefix(token, ManagementKeyPrefix):
		return s.authenticateManagementKey(ctx, token)
	case strings.HasPrefix(token, SessionTokenPrefix):
		return s.authenticateSession(ctx, token)
	case strings.HasPrefix(token, signInTokenPrefix):
		return nil, Unauthorized("a sign-in link's token is not a credential; exchange it with POST /api/auth/verify {token} for a session token")
	}
	return nil, Unauthorized("unknown credentials: send a session token (st_...) or a management key (mk_...) as Authorization: Bearer")
}

func (s *Service) authenticateSession(ctx context.Context, token string) (*Principal, error) {
	hash := HashKey(token)
	var sess *Session
	err := s.store.View(ctx, func(tx Tx) error {
		var err error
		sess, err = tx.GetSession(hash)
		return err
	})
	if errors.Is(err, ErrNotFound) {
		return nil, Unauthorized("unknown session, or one that has ended; sign in again")
	}
	if err != nil {
		return nil, fmt.Errorf("authenticate session: %w", err)
	}
	if !s.clock().Before(sess.ExpiresAt) {
		return nil, Unauthorized("session expired at %s; sign in again", sess.ExpiresAt.Format(time.RFC3339))
	}
	return &Principal{UserID: sess.UserID, Via: ViaSession, CredentialID: hash[:12]}, nil
}

func (s *Service) authenticateManagementKey(ctx context.Context, token string) (*Principal, error) {
	var mk *ManagementKey
	err := s.store.View(ctx, func(tx Tx) error {
		var err error
		mk, err = tx.GetManagementKeyByHash(HashKey(token))
		return err
	})
	if errors.Is(err, ErrNotFound) {
		return nil, Unauthorized("unknown or deleted management key")
	}
	if err != nil {
		return nil, fmt.Errorf("authenticate management key: %w", err)
	}
	if !mk.Active {
		return nil, Unauthorized("management key %s is revoked", mk.Prefix)
	}
	s.mkUsage.record(s, mk.ID, s.clock())
	return &Principal{UserID: mk.UserID, Via: ViaManagementKey, CredentialID: mk.ID}, nil
}

// CreateUser creates a user and a first session for them (operator endpoint).
// The email is normalized to lower case and must be unique.
func (s *Service) CreateUser(ctx context.Context, email, name string) (*User, string, error) {
	email, err := normalizeEmail(email)
	if err != nil {
		return nil, "", err
	}
	name = strings.TrimSpace(name)
	if err := checkLabel("name", name, false); err != nil {
		return nil, "", err
	}
	now := s.clock()
	u := &User{ID: newID(), Email: email, Name: name, CreatedAt: now}
	token := newSessionToken()
	err = s.store.Update(ctx, func(tx Tx) error {
		if _, err := tx.GetUserByEmail(email); err == nil {
			return Conflict("a user with email %s already exists", email)
		} else if !errors.Is(err, ErrNotFound) {
			return err
		}
		if err := tx.CreateUser(u); err != nil {
			return err
		}
		return tx.CreateSession(&Session{TokenHash: HashKey(token), UserID: u.ID, CreatedAt: now, ExpiresAt: now.Add(s.sessionTTL)})
	})
	if errors.Is(err, ErrConflict) {
		return nil, "", Conflict("a user with email %s already exists", email)
	}
	if err != nil {
		return nil, "", fmt.Errorf("create user %s: %w", email, err)
	}
	return u, token, nil
}

// CreateSession issues a new session token for an existing user (operator endpoint).
func (s *Service) CreateSession(ctx context.Context, userID string) (string, error) {
	token := newSessionToken()
	now := s.clock()
	err := s.store.Update(ctx, func(tx Tx) error {
		if _, err := tx.GetUser(userID); err != nil {
			return err
		}
		return tx.CreateSession(&Session{TokenHash: HashKey(token), UserID: userID, CreatedAt: now, ExpiresAt: now.Add(s.sessionTTL)})
	})
	if errors.Is(err, ErrNotFound) {
		return "", NotFound("user %s not found", userID)
	}
	if err != nil {
		return "", fmt.Errorf("create session for %s: %w", userID, err)
	}
	return token, nil
}

// normalizeEmail accepts a bare address (no display name), trimmed and lower-cased.
func normalizeEmail(email string) (string, error) {
	email = strings.ToLower(strings.TrimSpace(email))
	if email == "" {
		return "", Invalid("email is required")
	}
	addr, err := mail.ParseAddress(email)
	if err != nil || addr.Address != email || addr.Name != "" {
		return "", Invalid("email %q is not a valid address; send a bare address such as ada@example.com", email)
	}
	if len(email) > 254 {
		return "", Invalid("email is longer than 254 characters")
	}
	return email, nil
}

// maxLabel bounds names and labels of keys so a list stays readable.
const maxLabel = 200

// checkLabel validates a user-supplied name or label: the one check behind
// user names, key names, combined-key labels and management-key names.
func checkLabel(field, v string, required bool) error {
	if required && v == "" {
		return Invalid("%s is required", field)
	}
	if len([]rune(v)) > maxLabel {
		return Invalid("%s is longer than %d characters", field, maxLabel)
	}
	for i, r := range []rune(v) {
		if unsafeInLabel(r) {
			return Invalid("%s must not contain control characters or text-direction marks (U+%04X at character %d); use plain text", field, r, i+1)
		}
	}
	return nil
}

// unsafeInLabel reports the characters a name shown to people must not
// hold: C0 and C1 controls (U+0085 breaks a line in some viewers), and the
// bidirectional marks, embeddings, overrides and isolates that make a name
// read differently from what it is (U+202E turns "txt.exe" around).
func unsafeInLabel(r rune) bool {
	switch {
	case r < 0x20, r >= 0x7f && r <= 0x9f: // C0, DEL, C1
		return true
	case r == 0x061c, r == 0x200e, r == 0x200f: // Arabic letter mark, LRM, RLM
		return true
	case r >= 0x202a && r <= 0x202e: // LRE, RLE, PDF, LRO, RLO
		return true
	case r >= 0x2066 && r <= 0x2069: // LRI, RLI, FSI, PDI
		return true
	case r == 0x2028, r == 0x2029: // line and paragraph separators
		return true
	}
	return false
}

// usageFlushEvery is how often recorded management-key uses are written.
const usageFlushEvery = time.Minute

// usageBatch collects last-use times of management keys and writes them in
// one store call at most every usageFlushEvery, off the request path (SPEC.md
// §4: lastUsedAt is never written per request). The zero value is ready.
type usageBatch struct {
	mu        sync.Mutex
	pending   map[string]time.Time
	lastFlush time.Time
	flushing  bool
}

// record notes a use and starts a background flush when one is due.
func (b *usageBatch) record(s *Service, id string, t time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.pending == nil {
		b.pending = make(map[string]time.Time)
		if b.lastFlush.IsZero() {
			b.lastFlush = time.Now()
		}
	}
	if t.After(b.pending[id]) {
		b.pending[id] = t
	}
	if !b.flushing && time.Since(b.lastFlush) >= usageFlushEvery {
		b.flushing = true
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := s.FlushUsage(ctx); err != nil {
				s.logger.Warn("recording management key use", zap.Error(err))
			}
		}()
	}
}

// FlushUsage writes the management-key uses recorded so far. The usage
// batch flushes itself about once a minute; call FlushUsage at shutdown (and
// in tests) to write the rest.
func (s *Service) FlushUsage(ctx context.Context) error {
	b := &s.mkUsage
	b.mu.Lock()
	batch := b.pending
	b.pending = nil
	b.lastFlush = time.Now()
	b.mu.Unlock()
	defer func() {
		b.mu.Lock()
		b.flushing = false
		b.mu.Unlock()
	}()
	if len(batch) == 0 {
		return nil
	}
	return s.store.TouchLastUsed(ctx, LastUsedBatch{ManagementKeys: batch})
}
