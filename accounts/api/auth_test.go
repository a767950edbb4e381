package api_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/timeblock/timeblock/accounts"
	"github.com/timeblock/timeblock/accounts/api"
	"github.com/timeblock/timeblock/accounts/billing"
)

// linkNotifier hands sign-in links to the test.
type linkNotifier struct{ links chan string }

func (n linkNotifier) KeyDelivered(context.Context, *accounts.User, *accounts.Subscription, *accounts.Pool) error {
	return nil
}

func (n linkNotifier) Funding(context.Context, *accounts.User, accounts.FundingNotice) error {
	return nil
}

func (n linkNotifier) SignInLink(_ context.Context, _, link string, _ time.Time) error {
	n.links <- link
	return nil
}

// authEnv is an /api handler with opts whose notifier hands over links.
func authEnv(t *testing.T, st accounts.Store, signUp string, opts api.Options) (http.Handler, chan string) {
	t.Helper()
	links := make(chan string, 8)
	svc, err := accounts.NewService(accounts.Config{
		Store: st, Secret: "account http test secret", TermsVersion: envTerms,
		Processor: billing.NewTestProcessor(), Notifier: linkNotifier{links}, SignUp: signUp,
	})
	if err != nil {
		t.Fatal(err)
	}
	return api.New(svc, opts), links
}

// do sends a request with optional headers and returns the recorder.
func do(h http.Handler, method, target, body string, hdr map[string]string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(method, target, strings.NewReader(body))
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

func tokenOf(t *testing.T, links chan string, site string) string {
	t.Helper()
	select {
	case link := <-links:
		// The token is in the fragment only: browsers never send it to a
		// server, so no access log or proxy writes it down.
		rest, ok := strings.CutPrefix(link, site+"/account/sign-in#token=")
		if !ok || strings.Contains(link, "?") {
			t.Fatalf("link %q does not point at %s/account/sign-in with the token after # only", link, site)
		}
		tok, err := url.QueryUnescape(rest)
		if err != nil {
			t.Fatal(err)
		}
		return tok
	case <-time.After(5 * time.Second):
		t.Fatal("no sign-in link was sent")
	}
	return ""
}

func TestSignInThroughLinkAndCookie(t *testing.T) {
	forEachStore(t, func(t *testing.T, st accounts.Store) {
		h, links := authEnv(t, st, "", api.Options{})
		// On a loopback host the link points at the request's own address.
		rec := do(h, "POST", "http://localhost:8080/api/auth/email", `{"email":"ada@example.com"}`, nil)
		if rec.Code != 200 || !strings.Contains(rec.Body.String(), `"sent":true`) {
			t.Fatalf("email: %d %s", rec.Code, rec.Body)
		}
		token := tokenOf(t, links, "http://localhost:8080")

		rec = do(h, "POST", "http://localhost:8080/api/auth/verify", `{"token":"`+token+`"}`, nil)
		if rec.Code != 200 {
			t.Fatalf("verify: %d %s", rec.Code, rec.Body)
		}
		var v struct {
			Data struct {
				SessionToken string `json:"sessionToken"`
				User         struct{ ID, Email string }
			}
		}
		if err := json.Unmarshal(rec.Body.Bytes(), &v); err != nil || v.Data.User.Email != "ada@example.com" || v.Data.SessionToken == "" {
			t.Fatalf("verify body %s (%v)", rec.Body, err)
		}
		cookies := rec.Result().Cookies()
		if len(cookies) != 1 {
			t.Fatalf("cookies %v, want the session cookie", cookies)
		}
		c := cookies[0]
		if c.Name != api.SessionCookie || c.Value != v.Data.SessionToken || !c.HttpOnly || c.Secure ||
			c.SameSite != http.SameSiteLaxMode || c.Path != "/" || c.MaxAge < 29*24*3600 {
			t.Fatalf("cookie %+v: want HttpOnly, SameSite=Lax, Path=/, not Secure over plain HTTP, 30 days", c)
		}
		// The link works once.
		rec = do(h, "POST", "http://localhost:8080/api/auth/verify", `{"token":"`+token+`"}`, nil)
		if rec.Code != 401 || !strings.Contains(rec.Body.String(), "already used") {
			t.Fatalf("second use: %d %s", rec.Code, rec.Body)
		}

		// The cookie authenticates the page's requests, same-origin state changes included.
		cookie := map[string]string{"Cookie": api.SessionCookie + "=" + c.Value}
		rec = do(h, "GET", "http://localhost:8080/api/auth/session", "", cookie)
		if rec.Code != 200 || !strings.Contains(rec.Body.String(), `"email":"ada@example.com"`) || !strings.Contains(rec.Body.String(), `"via":"session"`) {
			t.Fatalf("session: %d %s", rec.Code, rec.Body)
		}
		sameSite := map[string]string{"Cookie": cookie["Cookie"], "Sec-Fetch-Site": "same-origin", "Origin": "http://localhost:8080"}
		rec = do(h, "POST", "http://localhost:8080/api/keys/management", `{"name":"ci"}`, sameSite)
		if rec.Code != 201 {
			t.Fatalf("same-origin POST with the cookie: %d %s", rec.Code, rec.Body)
		}
		// A cross-site POST carrying the cookie is refused and changes nothing.
		crossSite := map[string]string{"Cookie": cookie["Cookie"], "Sec-Fetch-Site": "cross-site", "Origin": "https://evil.example"}
		rec = do(h, "POST", "http://localhost:8080/api/keys/management", `{"name":"evil"}`, crossSite)
		if rec.Code != 403 || !strings.Contains(rec.Body.String(), "cross-origin") {
			t.Fatalf("cross-site POST: %d %s", rec.Code, rec.Body)
		}
		rec = do(h, "GET", "http://localhost:8080/api/keys/management", "", cookie)
		if n := strings.Count(rec.Body.String(), `"name":`); n != 1 {
			t.Fatalf("management keys after the cross-site POST: %s, want only ci", rec.Body)
		}

		// Signing out ends the session and clears the cookie.
		rec = do(h, "POST", "http://localhost:8080/api/auth/sign-out", "", sameSite)
		if rec.Code != 200 || rec.Result().Cookies()[0].MaxAge >= 0 {
			t.Fatalf("sign-out: %d %s %v", rec.Code, rec.Body, rec.Result().Cookies())
		}
		rec = do(h, "GET", "http://localhost:8080/api/auth/session", "", cookie)
		if rec.Code != 401 {
			t.Fatalf("session after sign-out: %d %s", rec.Code, rec.Body)
		}
		// The bearer token was the same session: it ended too.
		rec = do(h, "GET", "http://localhost:8080/api/keys", "", map[string]string{"Authorization": "Bearer " + v.Data.SessionToken})
		if rec.Code != 401 {
			t.Fatalf("bearer after sign-out: %d", rec.Code)
		}
	})
}

func TestSignInLinksPointAtTheSite(t *testing.T) {
	forEachStore(t, func(t *testing.T, st accounts.Store) {
		// Without site_address a public Host never gets a link: it could be an attacker's.
		h, links := authEnv(t, st, "", api.Options{})
		rec := do(h, "POST", "http://evil.example/api/auth/email", `{"email":"ada@example.com"}`, nil)
		if rec.Code != 503 || !strings.Contains(rec.Body.String(), "site_address") {
			t.Fatalf("public host without site_address: %d %s", rec.Code, rec.Body)
		}
		select {
		case l := <-links:
			t.Fatalf("a link was sent: %s", l)
		case <-time.After(100 * time.Millisecond):
		}
		// With it, the link points at the site whatever the Host header says.
		h, links = authEnv(t, st, "", api.Options{SiteAddress: "https://seats.example"})
		rec = do(h, "POST", "http://evil.example/api/auth/email", `{"email":"ada@example.com"}`, nil)
		if rec.Code != 200 {
			t.Fatalf("email: %d %s", rec.Code, rec.Body)
		}
		tokenOf(t, links, "https://seats.example")
		// Over TLS the cookie is Secure.
		req := httptest.NewRequest("POST", "https://seats.example/api/auth/verify", strings.NewReader(`{"token":"`+tokenOfNext(t, h, links)+`"}`))
		rec = httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != 200 || !rec.Result().Cookies()[0].Secure {
			t.Fatalf("verify over TLS: %d %v", rec.Code, rec.Result().Cookies())
		}
	})
}

// tokenOfNext asks for one more link to the site and returns its token.
func tokenOfNext(t *testing.T, h http.Handler, links chan string) string {
	t.Helper()
	if rec := do(h, "POST", "https://seats.example/api/auth/email", `{"email":"bob@example.com"}`, nil); rec.Code != 200 {
		t.Fatalf("email: %d %s", rec.Code, rec.Body)
	}
	return tokenOf(t, links, "https://seats.example")
}

func TestSignInThrottledPerEmail(t *testing.T) {
	forEachStore(t, func(t *testing.T, st accounts.Store) {
		h, links := authEnv(t, st, "", api.Options{})
		go func() {
			for range links {
			}
		}()
		for i := range 6 {
			rec := do(h, "POST", "http://127.0.0.1/api/auth/email", `{"email":"ada@example.com"}`, nil)
			switch {
			case i < 5 && rec.Code != 200:
				t.Fatalf("request %d: %d %s", i+1, rec.Code, rec.Body)
			case i == 5 && (rec.Code != 429 || rec.Header().Get("Retry-After") == ""):
				t.Fatalf("sixth link in 15 minutes: %d %s, want 429 with Retry-After", rec.Code, rec.Body)
			}
		}
		// Another address is not held back by ada's limit.
		if rec := do(h, "POST", "http://127.0.0.1/api/auth/email", `{"email":"bob@example.com"}`, nil); rec.Code != 200 {
			t.Fatalf("bob: %d %s", rec.Code, rec.Body)
		}
		// A malformed address says what to fix.
		if rec := do(h, "POST", "http://127.0.0.1/api/auth/email", `{"email":"not an address"}`, nil); rec.Code != 400 {
			t.Fatalf("malformed: %d %s", rec.Code, rec.Body)
		}
	})
}

// Two nodes (two handlers on one store) send 5 links to an address in
// total, not 5 each: the limit is counted in the store.
func TestSignInThrottledPerEmailAcrossNodes(t *testing.T) {
	forEachStore(t, func(t *testing.T, st accounts.Store) {
		one, links1 := authEnv(t, st, "", api.Options{})
		two, links2 := authEnv(t, st, "", api.Options{})
		go func() {
			for range links1 {
			}
		}()
		go func() {
			for range links2 {
			}
		}()
		sent := 0
		for i := range 10 {
			node := one
			if i%2 == 1 {
				node = two
			}
			rec := do(node, "POST", "http://127.0.0.1/api/auth/email", `{"email":"ada@example.com"}`, nil)
			switch rec.Code {
			case 200:
				sent++
			case 429:
				if rec.Header().Get("Retry-After") == "" {
					t.Fatalf("429 without Retry-After: %s", rec.Body)
				}
			default:
				t.Fatalf("request %d: %d %s", i+1, rec.Code, rec.Body)
			}
		}
		if sent != 5 {
			t.Fatalf("two nodes sent %d links to one address in 15 minutes, want 5 in total", sent)
		}
	})
}

func TestIdentityHeaderSignIn(t *testing.T) {
	forEachStore(t, func(t *testing.T, st accounts.Store) {
		h, _ := authEnv(t, st, accounts.SignUpOpen, api.Options{IdentityHeader: "Remote-Email"})
		rec := do(h, "GET", "http://seats.example/api/auth/session", "", map[string]string{"Remote-Email": "Ada@Example.com"})
		if rec.Code != 200 || !strings.Contains(rec.Body.String(), `"via":"identity_provider"`) || !strings.Contains(rec.Body.String(), "ada@example.com") {
			t.Fatalf("session through the identity header: %d %s", rec.Code, rec.Body)
		}
		if rec := do(h, "GET", "http://seats.example/api/auth/session", "", nil); rec.Code != 200 || !strings.Contains(rec.Body.String(), `"user":null`) {
			t.Fatalf("no header: %d %s, want nobody signed in", rec.Code, rec.Body)
		}
		if rec := do(h, "GET", "http://seats.example/api/keys", "", nil); rec.Code != 401 {
			t.Fatalf("keys with no header: %d %s", rec.Code, rec.Body)
		}
		// E-mail links are off on such a route.
		if rec := do(h, "POST", "http://seats.example/api/auth/email", `{"email":"ada@example.com"}`, nil); rec.Code != 404 {
			t.Fatalf("email link behind an identity provider: %d %s", rec.Code, rec.Body)
		}
		// A handler not configured for it ignores the header.
		plain, _ := authEnv(t, st, accounts.SignUpOpen, api.Options{})
		if rec := do(plain, "GET", "http://seats.example/api/auth/session", "", map[string]string{"Remote-Email": "ada@example.com"}); rec.Code != 200 || !strings.Contains(rec.Body.String(), `"user":null`) {
			t.Fatalf("header trusted without identity_header: %d %s", rec.Code, rec.Body)
		}
		if rec := do(plain, "GET", "http://seats.example/api/keys", "", map[string]string{"Remote-Email": "ada@example.com"}); rec.Code != 401 {
			t.Fatalf("header trusted without identity_header: %d %s", rec.Code, rec.Body)
		}
		// Invitation only: an unknown e-mail gets nothing.
		invite, _ := authEnv(t, st, accounts.SignUpInvite, api.Options{IdentityHeader: "Remote-Email"})
		rec = do(invite, "GET", "http://seats.example/api/keys", "", map[string]string{"Remote-Email": "mallory@example.com"})
		if rec.Code != 401 || !strings.Contains(rec.Body.String(), "invitation") {
			t.Fatalf("unknown e-mail, invitation only: %d %s", rec.Code, rec.Body)
		}
	})
}

// signedIn signs email in through a link and returns the session cookie.
func signedIn(t *testing.T, h http.Handler, links chan string, email string, hdr map[string]string) string {
	t.Helper()
	if rec := do(h, "POST", "http://localhost:8080/api/auth/email", `{"email":"`+email+`"}`, nil); rec.Code != 200 {
		t.Fatalf("email: %d %s", rec.Code, rec.Body)
	}
	rec := do(h, "POST", "http://localhost:8080/api/auth/verify", `{"token":"`+tokenOf(t, links, "http://localhost:8080")+`"}`, hdr)
	if rec.Code != 200 {
		t.Fatalf("verify: %d %s", rec.Code, rec.Body)
	}
	for _, c := range rec.Result().Cookies() {
		if c.Name == api.SessionCookie {
			return api.SessionCookie + "=" + c.Value
		}
	}
	t.Fatalf("verify set no session cookie: %v", rec.Result().Cookies())
	return ""
}

// A browser signed in as ada that opens a link for mallory (one mallory sent
// her: login CSRF) is not switched without saying so: 409 naming both, the
// link still usable, ada's session intact; only replace: true switches, and
// ends ada's session. A link for ada herself just signs in.
func TestSignInLinkDoesNotSilentlyReplaceAnotherSession(t *testing.T) {
	forEachStore(t, func(t *testing.T, st accounts.Store) {
		h, links := authEnv(t, st, "", api.Options{})
		ada := signedIn(t, h, links, "ada@example.com", nil)
		page := map[string]string{"Cookie": ada, "Origin": "http://localhost:8080", "Sec-Fetch-Site": "same-origin"}

		if rec := do(h, "POST", "http://localhost:8080/api/auth/email", `{"email":"mallory@example.com"}`, nil); rec.Code != 200 {
			t.Fatalf("email: %d %s", rec.Code, rec.Body)
		}
		mallory := tokenOf(t, links, "http://localhost:8080")
		rec := do(h, "POST", "http://localhost:8080/api/auth/verify", `{"token":"`+mallory+`"}`, page)
		var conflict struct {
			Error string
			Data  struct{ SignedInAs, Email string }
		}
		_ = json.Unmarshal(rec.Body.Bytes(), &conflict)
		if rec.Code != 409 || conflict.Data.SignedInAs != "ada@example.com" || conflict.Data.Email != "mallory@example.com" ||
			!strings.Contains(conflict.Error, "replace") {
			t.Fatalf("verify another user's link while signed in: %d %s, want 409 {signedInAs: ada, email: mallory} saying how to replace", rec.Code, rec.Body)
		}
		if len(rec.Result().Cookies()) != 0 {
			t.Fatalf("the refused verify set cookies %v", rec.Result().Cookies())
		}
		if rec := do(h, "GET", "http://localhost:8080/api/auth/session", "", page); rec.Code != 200 || !strings.Contains(rec.Body.String(), "ada@example.com") {
			t.Fatalf("ada's session after the refused link: %d %s", rec.Code, rec.Body)
		}

		// Asked and confirmed: the same link (not used up by the 409) switches.
		rec = do(h, "POST", "http://localhost:8080/api/auth/verify", `{"token":"`+mallory+`","replace":true}`, page)
		if rec.Code != 200 || !strings.Contains(rec.Body.String(), "mallory@example.com") {
			t.Fatalf("verify with replace: %d %s", rec.Code, rec.Body)
		}
		if rec := do(h, "GET", "http://localhost:8080/api/auth/session", "", page); rec.Code != 401 {
			t.Fatalf("ada's replaced session: %d %s, want it ended", rec.Code, rec.Body)
		}

		// A link for the user already signed in just signs in again.
		ada = signedIn(t, h, links, "ada@example.com", nil)
		ada2 := signedIn(t, h, links, "ada@example.com", map[string]string{"Cookie": ada})
		if rec := do(h, "GET", "http://localhost:8080/api/auth/session", "", map[string]string{"Cookie": ada2}); rec.Code != 200 || !strings.Contains(rec.Body.String(), "ada@example.com") {
			t.Fatalf("same-user link: %d %s", rec.Code, rec.Body)
		}
		// An ended or unknown cookie is no session to protect.
		signedIn(t, h, links, "bob@example.com", map[string]string{"Cookie": api.SessionCookie + "=st_gone"})
	})
}

// On a site whose sign-in is an identity provider's, e-mail sign-in is off
// on every accounts handler, the bearer route's (no identity header of its
// own) included.
func TestEmailSignInOffSiteWide(t *testing.T) {
	forEachStore(t, func(t *testing.T, st accounts.Store) {
		h, links := authEnv(t, st, "", api.Options{IdentityProviderOnSite: func() bool { return true }})
		bearer := map[string]string{"Authorization": "Bearer x"}
		rec := do(h, "POST", "http://localhost:8080/api/auth/email", `{"email":"mallory@example.com"}`, bearer)
		if rec.Code != 404 || !strings.Contains(rec.Body.String(), "identity provider") {
			t.Fatalf("email on the bearer route: %d %s, want 404", rec.Code, rec.Body)
		}
		select {
		case l := <-links:
			t.Fatalf("a link was sent: %s", l)
		case <-time.After(100 * time.Millisecond):
		}
		if rec := do(h, "POST", "http://localhost:8080/api/auth/verify", `{"token":"tok_x"}`, bearer); rec.Code != 404 {
			t.Fatalf("verify on the bearer route: %d %s, want 404", rec.Code, rec.Body)
		}
		if rec := do(h, "GET", "http://localhost:8080/api/auth/config", "", nil); !strings.Contains(rec.Body.String(), `"signIn":"identity_provider"`) {
			t.Fatalf("config: %s, want identity_provider", rec.Body)
		}
	})
}
