package accounts_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/timeblock/timeblock/accounts"
)

// signInEnv is an env whose notifier hands sign-in links to the test.
func signInEnv(t *testing.T, st accounts.Store, signUp string) (*env, *accounts.Service, chan signInNotice) {
	e := newEnv(t, st)
	links := make(chan signInNotice, 8)
	e.notifier.links = links
	svc, err := accounts.NewService(accounts.Config{
		Store: st, Secret: envSecret, TermsVersion: envTerms, Processor: e.proc, Notifier: e.notifier,
		Now: e.clock.Now, SignUp: signUp,
	})
	if err != nil {
		t.Fatal(err)
	}
	return e, svc, links
}

func linkFor(token string) string { return "https://seats.example/account/sign-in?token=" + token }

// nextLink waits for the notice the background sender delivers.
func nextLink(t *testing.T, links chan signInNotice) (signInNotice, string) {
	t.Helper()
	select {
	case n := <-links:
		token, ok := strings.CutPrefix(n.link, "https://seats.example/account/sign-in?token=")
		if !ok || !strings.HasPrefix(token, "tok_") {
			t.Fatalf("link %q is not the site's sign-in page with a tok_ token", n.link)
		}
		return n, token
	case <-time.After(5 * time.Second):
		t.Fatal("no sign-in link was sent")
	}
	return signInNotice{}, ""
}

func TestSignInLinkOpenSignUp(t *testing.T) {
	forEachStore(t, func(t *testing.T, st accounts.Store) {
		e, svc, links := signInEnv(t, st, "")
		ctx := context.Background()
		if err := svc.RequestSignIn(ctx, " Ada@Example.com ", linkFor); err != nil {
			t.Fatal(err)
		}
		n, token := nextLink(t, links)
		if n.email != "ada@example.com" || !n.expires.Equal(e.clock.Now().UTC().Truncate(time.Microsecond).Add(15*time.Minute)) {
			t.Fatalf("notice = %+v, want ada@example.com expiring in 15 minutes", n)
		}
		// The link signs in a new user and works once.
		in, err := svc.VerifySignIn(ctx, token)
		if err != nil {
			t.Fatal(err)
		}
		user, session := in.User, in.SessionToken
		if user.Email != "ada@example.com" || !strings.HasPrefix(session, accounts.SessionTokenPrefix) {
			t.Fatalf("user %+v session %q", user, session)
		}
		p, err := svc.Authenticate(ctx, session)
		if err != nil || p.UserID != user.ID {
			t.Fatalf("the session authenticates %+v, %v; want user %s", p, err, user.ID)
		}
		_, err = svc.VerifySignIn(ctx, token)
		wantStatus(t, err, http.StatusUnauthorized, "already used")

		// A second link for the same address signs in the same user.
		if err := svc.RequestSignIn(ctx, "ada@example.com", linkFor); err != nil {
			t.Fatal(err)
		}
		_, token2 := nextLink(t, links)
		again, err := svc.VerifySignIn(ctx, token2)
		if err != nil || again.User.ID != user.ID {
			t.Fatalf("second sign-in: %+v, %v; want user %s", again, err, user.ID)
		}

		// Signing out ends the session.
		if err := svc.SignOut(ctx, session); err != nil {
			t.Fatal(err)
		}
		_, err = svc.Authenticate(ctx, session)
		wantStatus(t, err, http.StatusUnauthorized, "sign in again")
		if err := svc.SignOut(ctx, session); err != nil {
			t.Fatalf("signing out twice: %v", err)
		}
	})
}

func TestSignInLinkExpires(t *testing.T) {
	forEachStore(t, func(t *testing.T, st accounts.Store) {
		e, svc, links := signInEnv(t, st, accounts.SignUpOpen)
		ctx := context.Background()
		if err := svc.RequestSignIn(ctx, "ada@example.com", linkFor); err != nil {
			t.Fatal(err)
		}
		_, token := nextLink(t, links)
		e.clock.Advance(15 * time.Minute)
		_, err := svc.VerifySignIn(ctx, token)
		wantStatus(t, err, http.StatusUnauthorized, "expired")
		// No user was created by an expired link.
		err = st.View(ctx, func(tx accounts.Tx) error { _, err := tx.GetUserByEmail("ada@example.com"); return err })
		if !errors.Is(err, accounts.ErrNotFound) {
			t.Fatalf("user after an expired link: %v, want none", err)
		}
		// Expired tokens are swept when the next link is asked for.
		if err := svc.RequestSignIn(ctx, "bob@example.com", linkFor); err != nil {
			t.Fatal(err)
		}
		nextLink(t, links)
		err = st.Update(ctx, func(tx accounts.Tx) error {
			n, err := tx.DeleteSignInTokensExpired(e.clock.Now().Add(time.Hour))
			if n != 1 {
				t.Errorf("tokens left: %d, want only bob's", n)
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := svc.Authenticate(ctx, token); err == nil {
			t.Fatal("a sign-in token authenticated as a bearer credential")
		}
	})
}

func TestSignInInvitationOnly(t *testing.T) {
	forEachStore(t, func(t *testing.T, st accounts.Store) {
		_, svc, links := signInEnv(t, st, accounts.SignUpInvite)
		ctx := context.Background()
		// An unknown address gets the same answer and no link.
		if err := svc.RequestSignIn(ctx, "stranger@example.com", linkFor); err != nil {
			t.Fatal(err)
		}
		select {
		case n := <-links:
			t.Fatalf("a link was sent to an address with no account: %+v", n)
		case <-time.After(200 * time.Millisecond):
		}
		_, err := svc.AuthenticateIdentity(ctx, "stranger@example.com")
		wantStatus(t, err, http.StatusUnauthorized, "invitation only")

		invited, _, err := svc.CreateUser(ctx, "invited@example.com", "")
		if err != nil {
			t.Fatal(err)
		}
		if err := svc.RequestSignIn(ctx, "invited@example.com", linkFor); err != nil {
			t.Fatal(err)
		}
		_, token := nextLink(t, links)
		in, err := svc.VerifySignIn(ctx, token)
		if err != nil || in.User.ID != invited.ID {
			t.Fatalf("invited sign-in: %+v, %v", in, err)
		}
		p, err := svc.AuthenticateIdentity(ctx, "Invited@Example.com")
		if err != nil || p.UserID != invited.ID || p.Via != accounts.ViaIdentityProvider {
			t.Fatalf("identity sign-in: %+v, %v", p, err)
		}
	})
}

// Of many uses of one link at once, exactly one signs in.
func TestSignInLinkUsedOnceUnderRace(t *testing.T) {
	forEachStoreNodes(t, 2, func(t *testing.T, nodes []accounts.Store) {
		_, svc, links := signInEnv(t, nodes[0], accounts.SignUpOpen)
		_, other, _ := signInEnv(t, nodes[1], accounts.SignUpOpen)
		ctx := context.Background()
		if err := svc.RequestSignIn(ctx, "ada@example.com", linkFor); err != nil {
			t.Fatal(err)
		}
		_, token := nextLink(t, links)
		var (
			wg sync.WaitGroup
			mu sync.Mutex
			ok int
		)
		for i := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				node := svc
				if i%2 == 1 {
					node = other
				}
				if _, err := node.VerifySignIn(ctx, token); err == nil {
					mu.Lock()
					ok++
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		if ok != 1 {
			t.Fatalf("%d sign-ins with one link, want exactly 1", ok)
		}
	})
}

// The per-address link limit is counted in the store: two nodes on one
// database send SignInLinksPerEmail links in total, not each, whether the
// requests come one by one or all at once.
func TestSignInLinkLimitHoldsAcrossNodes(t *testing.T) {
	forEachStoreNodes(t, 2, func(t *testing.T, nodes []accounts.Store) {
		e, a, links := signInEnv(t, nodes[0], accounts.SignUpOpen)
		b, err := accounts.NewService(accounts.Config{Store: nodes[1], Secret: envSecret, TermsVersion: envTerms,
			Processor: e.proc, Notifier: e.notifier, Now: e.clock.Now})
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			for range links {
			}
		}()
		ctx := context.Background()
		node := []*accounts.Service{a, b}
		for i := range accounts.SignInLinksPerEmail {
			if err := node[i%2].RequestSignIn(ctx, "ada@example.com", linkFor); err != nil {
				t.Fatalf("link %d: %v", i+1, err)
			}
			e.clock.Advance(time.Minute)
		}
		for _, n := range node {
			ae := wantStatus(t, n.RequestSignIn(ctx, "Ada@Example.com", linkFor), http.StatusTooManyRequests, "too many sign-in links", "e-mail address")
			// The oldest link leaves the window 15 minutes after it was asked, 10 from now.
			if d, ok := ae.Data.(accounts.TooManySignInLinks); !ok || d.RetryAfter != 600 {
				t.Errorf("data %#v, want RetryAfter 600 s", ae.Data)
			}
		}
		// Another address is not held back by ada's limit; once her oldest
		// link leaves the window, she may ask again.
		if err := b.RequestSignIn(ctx, "bob@example.com", linkFor); err != nil {
			t.Fatal(err)
		}
		e.clock.Advance(10 * time.Minute)
		if err := b.RequestSignIn(ctx, "ada@example.com", linkFor); err != nil {
			t.Fatalf("after the window: %v", err)
		}

		// All at once on both nodes: still the limit in total.
		var (
			wg   sync.WaitGroup
			mu   sync.Mutex
			sent int
		)
		for i := range 4 * accounts.SignInLinksPerEmail {
			wg.Add(1)
			go func() {
				defer wg.Done()
				err := node[i%2].RequestSignIn(ctx, "carol@example.com", linkFor)
				var ae *accounts.Error
				switch {
				case err == nil:
					mu.Lock()
					sent++
					mu.Unlock()
				case !errors.As(err, &ae) || ae.Status != http.StatusTooManyRequests:
					t.Errorf("concurrent request: %v", err)
				}
			}()
		}
		wg.Wait()
		if sent != accounts.SignInLinksPerEmail {
			t.Fatalf("%d links sent to one address by two nodes at once, want %d", sent, accounts.SignInLinksPerEmail)
		}
	})
}

// Under invitation only, an address with no account reaches the limit as a
// user's does, so the 429 does not tell which addresses have accounts.
func TestSignInLinkLimitSameForUnknownAddresses(t *testing.T) {
	forEachStore(t, func(t *testing.T, st accounts.Store) {
		_, svc, links := signInEnv(t, st, accounts.SignUpInvite)
		ctx := context.Background()
		if _, _, err := svc.CreateUser(ctx, "invited@example.com", ""); err != nil {
			t.Fatal(err)
		}
		for _, email := range []string{"invited@example.com", "stranger@example.com"} {
			for i := range accounts.SignInLinksPerEmail {
				if err := svc.RequestSignIn(ctx, email, linkFor); err != nil {
					t.Fatalf("%s link %d: %v", email, i+1, err)
				}
			}
			wantStatus(t, svc.RequestSignIn(ctx, email, linkFor), http.StatusTooManyRequests)
		}
		for range accounts.SignInLinksPerEmail {
			if n, _ := nextLink(t, links); n.email != "invited@example.com" {
				t.Fatalf("a link went to %s", n.email)
			}
		}
		select {
		case n := <-links:
			t.Fatalf("a link was sent to an address with no account: %+v", n)
		case <-time.After(200 * time.Millisecond):
		}
	})
}
