package e2e_test

// Sign-in that cannot be bypassed: the README's identity-provider setup run
// as documented, where a bearer header must not open a way to sign in by
// e-mail; and the quick start's access log, which never holds a sign-in
// link's token, not even for a link of the old ?token= shape.

import (
	"fmt"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/timeblock/timeblock/caddymodule/e2e"
)

// readmeIdentityProviderSite is the site block README.md documents under
// "Behind your identity provider", with the provider at idpHost and the
// site on the harness's port.
func readmeIdentityProviderSite(t *testing.T, idpHost string) string {
	t.Helper()
	b, err := os.ReadFile(repoFile(t, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	readme := string(b)
	_, after, ok := strings.Cut(readme, "**Behind your identity provider.**")
	if !ok {
		t.Fatal(`README.md no longer has the "Behind your identity provider." section; update this test`)
	}
	_, block, ok := strings.Cut(after, "```\n")
	if !ok {
		t.Fatal("no Caddyfile block after README's identity-provider section")
	}
	block, _, _ = strings.Cut(block, "```")
	for _, r := range [][2]string{{":443 {", ":{{.HTTP}} {"}, {"authelia:9091", idpHost}} {
		if !strings.Contains(block, r[0]) {
			t.Fatalf("README's identity-provider Caddyfile no longer contains %q; update this test:\n%s", r[0], block)
		}
		block = strings.Replace(block, r[0], r[1], 1)
	}
	return block
}

// In the README's forward_auth setup, a request that carries any bearer
// header reaches the handler of the script route, which has no
// identity_header of its own. E-mail sign-in must be off there too: else
// anyone the provider never saw gets an account by e-mail (sign_up open),
// and with it a card and seats.
func TestReadmeIdentityProviderSetupRefusesEmailSignIn(t *testing.T) {
	idp := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if c, err := r.Cookie("idp"); err == nil && c.Value == "ada" {
			w.Header().Set("Remote-Email", "ada@example.com")
			return
		}
		http.Error(w, "sign in at the identity provider", http.StatusUnauthorized)
	}))
	defer idp.Close()
	c := e2e.Start(t, `{
	timeblock {
		secret readme-idp-test-secret-0123456789
		sign_up open
	}
}
`+readmeIdentityProviderSite(t, strings.TrimPrefix(idp.URL, "http://")))

	bearer := []string{"Authorization", "Bearer x"}
	code, b := postJSON(t, http.DefaultClient, c.URL()+"/api/auth/email", `{"email":"mallory@example.com"}`, bearer...)
	if code != 404 || !strings.Contains(b, "identity provider") {
		t.Errorf("POST /api/auth/email with a bearer header: %d %s, want 404 (this site signs in through its identity provider)", code, b)
	}
	// Whatever it answered, no link may have been minted; if one was, it
	// must not sign anyone in.
	re := regexp.MustCompile(`"email":"mallory@example.com","link":"[^"]*token=([^"]+)"`)
	token := "tok_none"
	if m := re.FindStringSubmatch(c.Logs()); m != nil {
		t.Errorf("a sign-in link was minted for mallory behind the identity provider")
		token = m[1]
	}
	code, b = postJSON(t, http.DefaultClient, c.URL()+"/api/auth/verify", `{"token":"`+token+`"}`, bearer...)
	if code != 404 {
		t.Errorf("POST /api/auth/verify with a bearer header: %d %s, want 404", code, b)
	}
	// The script route says how this site signs in, as the page's does.
	if resp, b := getBody(t, http.DefaultClient, c.URL()+"/api/auth/config", "Authorization", "Bearer x"); resp.StatusCode != 200 || !strings.Contains(b, `"signIn":"identity_provider"`) {
		t.Errorf("config on the script route: %d %s", resp.StatusCode, b)
	}
	// The provider's own users still get in, and the bearer route still
	// takes real bearer credentials.
	code, b = postJSON(t, http.DefaultClient, c.URL()+"/api/keys/management", `{"name":"ci"}`, "Cookie", "idp=ada")
	if code != 201 {
		t.Fatalf("management key through the provider: %d %s", code, b)
	}
	key := regexp.MustCompile(`"apiKey":"(mk_[^"]+)"`).FindStringSubmatch(b)
	if key == nil {
		t.Fatalf("no management key in %s", b)
	}
	if resp, b := getBody(t, http.DefaultClient, c.URL()+"/api/auth/session", "Authorization", "Bearer "+key[1]); resp.StatusCode != 200 || !strings.Contains(b, "ada@example.com") {
		t.Errorf("bearer management key on the script route: %d %s", resp.StatusCode, b)
	}
}

// The quick start's access log never writes a sign-in token: links carry it
// after #, which browsers do not send, and for links of the old
// /account/sign-in?token= shape still in inboxes the shipped log filter
// replaces it.
func TestQuickStartAccessLogHoldsNoSignInToken(t *testing.T) {
	c := e2e.Start(t, quickStartCaddyfile(t))
	site := fmt.Sprintf("http://localhost:%d", c.HTTP)
	jar, _ := cookiejar.New(nil)
	browser := &http.Client{Jar: jar}
	if code, b := postJSON(t, browser, site+"/api/auth/email", `{"email":"ada@example.com"}`); code != 200 {
		t.Fatalf("POST /api/auth/email: %d %s", code, b)
	}
	link := linkInLog(t, c, "ada@example.com")
	if page, _, ok := strings.Cut(link, "#token="); !ok || page != site+"/account/sign-in" {
		t.Errorf("link %q: want %s/account/sign-in#token=…, the token after # only", link, site)
	}
	_, token, _ := strings.Cut(link, "token=")
	// Opened as an old link would be: the token in the query.
	if resp, _ := getBody(t, browser, site+"/account/sign-in?token="+token); resp.StatusCode != 200 {
		t.Fatalf("GET old-style link: %d", resp.StatusCode)
	}
	if code, b := postJSON(t, browser, site+"/api/auth/verify", `{"token":"`+token+`"}`, "Origin", site, "Sec-Fetch-Site", "same-origin"); code != 200 {
		t.Fatalf("verify: %d %s", code, b)
	}
	var access []string
	eventually(t, 5*time.Second, "the access log line of the old-style link", func() error {
		access = access[:0]
		for _, line := range strings.Split(c.Logs(), "\n") {
			if strings.Contains(line, "http.log.access") {
				access = append(access, line)
			}
		}
		if !strings.Contains(strings.Join(access, "\n"), "/account/sign-in?token=") {
			return fmt.Errorf("no access-log line for GET /account/sign-in?token= yet")
		}
		return nil
	})
	for _, line := range access {
		if strings.Contains(line, token) {
			t.Errorf("the access log holds the sign-in token:\n%s", line)
		}
	}
	if !strings.Contains(strings.Join(access, "\n"), "/account/sign-in?token=REDACTED") {
		t.Errorf("no access-log line shows the old link with its token REDACTED:\n%s", strings.Join(access, "\n"))
	}
}
