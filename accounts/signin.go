package accounts

// E-mail sign-in: a one-time link, mailed (or logged) through the notifier,
// is exchanged for a session. Sign-in through an operator's identity provider
// (Caddy's forward_auth) ends in the same place: a user found, or created
// under open sign-up, by e-mail.

import (
	"context"
	"errors"
	"fmt"
	"net/http"
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

// Sign-in links one e-mail address may be sent in each SignInWindow: enough
// for a typo and a retry, too few to mail-bomb anyone. They are counted in
// the store (the links asked for the address in the window and not yet
// used), so the limit holds across every node on one database.
const (
	SignInLinksPerEmail = 5
	SignInWindow        = 15 * time.Minute
)

// TooManySignInLinks is the Data of the 429 RequestSignIn answers once an
// address has been sent SignInLinksPerEmail links in SignInWindow.
type TooManySignInLinks struct {
	RetryAfter int `json:"retryAfter"` // seconds until the oldest of them leaves the window
}

// noticeTimeout bounds sending one notice off the request path.
const noticeTimeout = time.Minute

// RequestSignIn sends a one-time sign-in link to email when the address may
// sign in: a user's, or any under open sign-up. The answer is the same
// either way, and the notice is sent in the background so that neither the
// answer nor its timing tells whether the address has an account. link
// turns a token into the URL the notice carries.
//
// Past SignInLinksPerEmail links in SignInWindow the answer is a 429 whose
// Data is TooManySignInLinks. The count is of the tokens stored for the
// address, taken in the transaction that stores the new one, so nodes
// sharing a database share the limit. A token is stored even when nothing
// is sent (an unknown address under invitation only): it can never be
// used, as nobody holds it, and it makes such an address reach the limit
// exactly as a user's does, so the 429 tells nothing either.
func (s *Service) RequestSignIn(ctx context.Context, email string, link func(token string) string) error {
	email, err := normalizeEmail(email)
	if err != nil {
		return err
	}
	now := s.clock()
	token := signInTokenPrefix + randomToken()
	rec := &SignInToken{TokenHash: HashKey(token), Email: email, CreatedAt: now, ExpiresAt: now.Add(s.signInTTL)}
	since := now.Add(-SignInWindow)
	// Keep expired tokens while they still count: a link that works for less
	// than the window must not leave it early.
	sweep := now
	if s.signInTTL < SignInWindow {
		sweep = since.Add(s.signInTTL)
	}
	send := true
	err = s.store.Update(ctx, func(tx Tx) error {
		if _, err := tx.DeleteSignInTokensExpired(sweep); err != nil {
			return err
		}
		n, oldest, err := tx.CountSignInTokens(email, since)
		if err != nil {
			return err
		}
		if n >= SignInLinksPerEmail {
			secs := int((oldest.Add(SignInWindow).Sub(now) + time.Second - 1) / time.Second)
			return &Error{Status: http.StatusTooManyRequests, Data: TooManySignInLinks{RetryAfter: secs},
				Message: fmt.Sprintf("too many sign-in links asked for this e-mail address; use the last link sent, or try again in %s",
					time.Duration(secs)*time.Second)}
		}
		if s.signUp == SignUpInvite {
			if _, err := tx.GetUserByEmail(email); errors.Is(err, ErrNotFound) {
				send = false
			} else if err != nil {
				return err
			}
		}
		return tx.CreateSignInToken(rec)
	})
	var ae *Error
	if errors.As(err, &ae) {
		return ae
	}
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
	return s.UseSignInLink(ctx, SignInAttempt{Token: token})
}

// SignInAttempt is a use of a sign-in link by a browser that may already be
// signed in.
type SignInAttempt struct {
	Token string
	// Session is the session token the browser already holds ("" for none).
	Session string
	// Replace lets a link for another user end Session and sign in as that
	// user. Without it such a link is refused (SignInConflict) and stays
	// usable: a link someone else sent must never switch a signed-in
	// browser to their account without the person saying so (login CSRF).
	Replace bool
}

// SignInConflict is the Data of the 409 UseSignInLink answers when the
// browser is signed in as one user and the link is for another.
type SignInConflict struct {
	SignedInAs string `json:"signedInAs"` // the current session's e-mail
	Email      string `json:"email"`      // the link's
}

// UseSignInLink exchanges a sign-in link's token for a new session: once,
// before it expires. When the browser already holds a live session, a link
// for the same user just renews it, and a link for another user is a 409
// unless a.Replace is set; either way the old session ends, as the browser
// is given the new one.
func (s *Service) UseSignInLink(ctx context.Context, a SignInAttempt) (*SignedIn, error) {
	now := s.clock()
	session := newSessionToken()
	expires := now.Add(s.sessionTTL)
	var user *User
	err := s.store.Update(ctx, func(tx Tx) error {
		rec, err := tx.TakeSignInToken(HashKey(a.Token))
		if errors.Is(err, ErrNotFound) {
			return Unauthorized("this sign-in link was already used or is not one we sent; request a new link")
		}
		if err != nil {
			return err
		}
		if !now.Before(rec.ExpiresAt) {
			return Unauthorized("this sign-in link expired at %s; request a new link", rec.ExpiresAt.Format(time.RFC3339))
		}
		current, err := s.liveSessionUserTx(tx, a.Session, now)
		if err != nil {
			return err
		}
		if current != nil && current.Email != rec.Email && !a.Replace {
			// Returning an error rolls the transaction back: the link is not used.
			return &Error{Status: http.StatusConflict, Data: SignInConflict{SignedInAs: current.Email, Email: rec.Email},
				Message: fmt.Sprintf("this browser is signed in as %s and the link is for %s; send the link again with replace: true to sign in as %s instead (the session as %s ends)",
					current.Email, rec.Email, rec.Email, current.Email)}
		}
		if user, err = s.userForSignInTx(tx, rec.Email, now); err != nil {
			return err
		}
		if current != nil {
			if err := tx.DeleteSession(HashKey(a.Session)); err != nil && !errors.Is(err, ErrNotFound) {
				return err
			}
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

// liveSessionUserTx returns the user of session token, or nil when there is
// no such live session (none sent, signed out, expired).
func (s *Service) liveSessionUserTx(tx Tx, token string, now time.Time) (*User, error) {
	if token == "" {
		return nil, nil
	}
	sess, err := tx.GetSession(HashKey(token))
	if errors.Is(err, ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if !now.Before(sess.ExpiresAt) {
		return nil, nil
	}
	u, err := tx.GetUser(sess.UserID)
	if errors.Is(err, ErrNotFound) {
		return nil, nil
	}
	return u, err
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
