package accounts

// E-mail sign-in: a one-time link, mailed (or logged) through the notifier,
// is exchanged for a session. Sign-in through an operator's identity provider
// (Caddy's forward_auth) ends in the same place: a user found, or created
// under open sign-up, by e-mail.

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.uber.org/zap"
)

// Sign-up policies: who may become a user by signing in.
const (
	SignUpOpen   = "open"   // any address that signs in becomes a user
	SignUpInvite = "invite" // only users the operator created may sign in
)

// ViaIdentityProvider is the Principal.Via of a request an identity provider
// (forward_auth) vouched for.
const ViaIdentityProvider = "identity_provider"

// signInTokenPrefix marks sign-in link tokens, so one sent as a bearer
// credential gets a message that says what it is.
const signInTokenPrefix = "tok_"

// defaultSignInTTL is how long a sign-in link works.
const defaultSignInTTL = 15 * time.Minute

// noticeTimeout bounds sending one notice off the request path.
const noticeTimeout = time.Minute

// RequestSignIn sends a one-time sign-in link to email when the address may
// sign in: a user's, or any under open sign-up. The answer is the same
// either way, and the notice is sent in the background so that neither the
// answer nor its timing tells whether the address has an account. link
// turns a token into the URL the notice carries.
func (s *Service) RequestSignIn(ctx context.Context, email string, link func(token string) string) error {
	email, err := normalizeEmail(email)
	if err != nil {
		return err
	}
	now := s.clock()
	token := signInTokenPrefix + randomToken()
	rec := &SignInToken{TokenHash: HashKey(token), Email: email, CreatedAt: now, ExpiresAt: now.Add(s.signInTTL)}
	send := true
	err = s.store.Update(ctx, func(tx Tx) error {
		if _, err := tx.DeleteSignInTokensExpired(now); err != nil {
			return err
		}
		if s.signUp == SignUpInvite {
			if _, err := tx.GetUserByEmail(email); errors.Is(err, ErrNotFound) {
				send = false
				return nil
			} else if err != nil {
				return err
			}
		}
		return tx.CreateSignInToken(rec)
	})
	if err != nil {
		return fmt.Errorf("sign-in link for %s: %w", email, err)
	}
	if !send {
		s.logger.Info("sign-in requested for an address with no account; nothing sent (sign_up invite)",
			zap.String("email", email))
		return nil
	}
	url := link(token)
	go func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), noticeTimeout)
		defer cancel()
		if err := s.notifier.SignInLink(ctx, email, url, rec.ExpiresAt); err != nil {
			s.logger.Error("sending a sign-in link failed", zap.String("email", email), zap.Error(err))
		}
	}()
	return nil
}

// SignedIn is a new session.
type SignedIn struct {
	User         *User
	SessionToken string
	ExpiresAt    time.Time
}

// VerifySignIn uses a sign-in link's token: once, before it expires. It
// returns the user (created now under open sign-up) and a new session.
func (s *Service) VerifySignIn(ctx context.Context, token string) (*SignedIn, error) {
	now := s.clock()
	session := newSessionToken()
	expires := now.Add(s.sessionTTL)
	var user *User
	err := s.store.Update(ctx, func(tx Tx) error {
		rec, err := tx.TakeSignInToken(HashKey(token))
		if errors.Is(err, ErrNotFound) {
			return Unauthorized("this sign-in link was already used or is not one we sent; request a new link")
		}
		if err != nil {
			return err
		}
		if !now.Before(rec.ExpiresAt) {
			return Unauthorized("this sign-in link expired at %s; request a new link", rec.ExpiresAt.Format(time.RFC3339))
		}
		if user, err = s.userForSignInTx(tx, rec.Email, now); err != nil {
			return err
		}
		return tx.CreateSession(&Session{TokenHash: HashKey(session), UserID: user.ID, CreatedAt: now, ExpiresAt: expires})
	})
	var ae *Error
	if errors.As(err, &ae) {
		return nil, ae
	}
	if err != nil {
		return nil, fmt.Errorf("verify sign-in link: %w", err)
	}
	return &SignedIn{User: user, SessionToken: session, ExpiresAt: expires}, nil
}

// AuthenticateIdentity resolves the e-mail an identity provider vouched for
// to its user, creating one under open sign-up.
func (s *Service) AuthenticateIdentity(ctx context.Context, email string) (*Principal, error) {
	email, err := normalizeEmail(email)
	if err != nil {
		return nil, Unauthorized("the identity provider sent an unusable e-mail address: %s", err.(*Error).Message)
	}
	var user *User
	err = s.store.View(ctx, func(tx Tx) error {
		user, err = tx.GetUserByEmail(email)
		return err
	})
	if errors.Is(err, ErrNotFound) {
		now := s.clock()
		err = s.store.Update(ctx, func(tx Tx) error {
			user, err = s.userForSignInTx(tx, email, now)
			return err
		})
	}
	var ae *Error
	if errors.As(err, &ae) {
		return nil, ae
	}
	if err != nil {
		return nil, fmt.Errorf("authenticate %s: %w", email, err)
	}
	return &Principal{UserID: user.ID, Via: ViaIdentityProvider, CredentialID: user.ID}, nil
}

// userForSignInTx returns the user with email, creating them under open
// sign-up; under invitation only, an unknown address is a 401.
func (s *Service) userForSignInTx(tx Tx, email string, now time.Time) (*User, error) {
	u, err := tx.GetUserByEmail(email)
	if err == nil || !errors.Is(err, ErrNotFound) {
		return u, err
	}
	if s.signUp == SignUpInvite {
		return nil, Unauthorized("there is no account for %s and this site is by invitation only; ask the operator for one", email)
	}
	u = &User{ID: newID(), Email: email, CreatedAt: now}
	if err := tx.CreateUser(u); err != nil {
		return nil, err
	}
	s.logger.Info("new user signed up", zap.String("user_id", u.ID), zap.String("email", email))
	return u, nil
}

// SignOut ends the session of token; an unknown or already ended session is
// not an error.
func (s *Service) SignOut(ctx context.Context, token string) error {
	err := s.store.Update(ctx, func(tx Tx) error { return tx.DeleteSession(HashKey(token)) })
	if err != nil && !errors.Is(err, ErrNotFound) {
		return fmt.Errorf("sign out: %w", err)
	}
	return nil
}

// SessionUser returns the user a principal acts for, and when its session
// ends (zero for credentials that do not expire).
func (s *Service) SessionUser(ctx context.Context, p *Principal, token string) (*User, time.Time, error) {
	var (
		user    *User
		expires time.Time
	)
	err := s.store.View(ctx, func(tx Tx) error {
		var err error
		if user, err = tx.GetUser(p.UserID); err != nil {
			return err
		}
		if p.Via == ViaSession {
			sess, err := tx.GetSession(HashKey(token))
			if err != nil {
				return err
			}
			expires = sess.ExpiresAt
		}
		return nil
	})
	if errors.Is(err, ErrNotFound) {
		return nil, time.Time{}, Unauthorized("this session has ended; sign in again")
	}
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("session user: %w", err)
	}
	return user, expires, nil
}
