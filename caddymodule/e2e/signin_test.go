package e2e_test

// Sign-in as a person does it, over real HTTP against the real plugin: the
// quick start's e-mail link read from Caddy's log, the session cookie, and
// an identity provider in front through Caddy's own forward_auth.

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/timeblock/timeblock/caddymodule/e2e"
)

// linkInLog finds the newest sign-in link logged for email.
func linkInLog(t *testing.T, c *e2e.Caddy, email string) string {
	t.Helper()
	re := regexp.MustCompile(`"email":"` + regexp.QuoteMeta(email) + `","link":"([^"]+)"`)
	var link string
	eventually(t, 5*time.Second, "the sign-in link in the log", func() error {
		m := re.FindAllStringSubmatch(c.Logs(), -1)
		if len(m) == 0 {
			return fmt.Errorf("no sign-in link for %s logged yet", email)
		}
		link = m[len(m)-1][1]
		return nil
	})
	return link
}

// postJSON sends body with the headers a page's fetch would.
func postJSON(t *testing.T, client *http.Client, url, body string, hdr ...string) (int, string) {
	t.Helper()
	req, err := http.NewRequest("POST", url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func getBody(t *testing.T, client *http.Client, url string, hdr ...string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest("GET", url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

func TestSignInOnTheQuickStart(t *testing.T) {
	c := e2e.Start(t, quickStartCaddyfile(t))
	site := "http://localhost:" + fmt.Sprint(c.HTTP)
	jar, _ := cookiejar.New(nil)
	browser := &http.Client{Jar: jar}

	// The page is served, with a policy that keeps scripts to its own files.
	resp, body := getBody(t, browser, site+"/account/")
	if resp.StatusCode != 200 || !strings.Contains(resp.Header.Get("Content-Type"), "text/html") ||
		!strings.Contains(resp.Header.Get("Content-Security-Policy"), "script-src 'self'") ||
		resp.Header.Get("Referrer-Policy") != "no-referrer" || !strings.Contains(body, "app.js") {
		t.Fatalf("GET /account/: %d %v\n%.300s", resp.StatusCode, resp.Header, body)
	}
	if !strings.Contains(c.Logs(), "account page at http://") {
		t.Error("the start-up log does not say where the account page is")
	}

	// Ask for a link; the quick start logs it (no smtp).
	if code, b := postJSON(t, browser, site+"/api/auth/email", `{"email":"ada@example.com"}`); code != 200 || !strings.Contains(b, `"sent":true`) {
		t.Fatalf("POST /api/auth/email: %d %s", code, b)
	}
	link := linkInLog(t, c, "ada@example.com")
	prefix := site + "/account/sign-in#token="
	if !strings.HasPrefix(link, prefix) {
		t.Fatalf("link %q does not open %s", link, prefix)
	}
	// Opening the link shows the page, which posts the token.
	if resp, _ := getBody(t, browser, link); resp.StatusCode != 200 {
		t.Fatalf("GET link: %d", resp.StatusCode)
	}
	token := strings.TrimPrefix(link, prefix)
	code, b := postJSON(t, browser, site+"/api/auth/verify", `{"token":"`+token+`"}`, "Origin", site, "Sec-Fetch-Site", "same-origin")
	if code != 200 {
		t.Fatalf("verify: %d %s", code, b)
	}
	var v struct {
		Data struct {
			User struct{ ID, Email string }
		}
	}
	if err := json.Unmarshal([]byte(b), &v); err != nil || v.Data.User.Email != "ada@example.com" {
		t.Fatalf("verify: %s", b)
	}
	// The cookie now signs the page's requests in.
	if resp, b := getBody(t, browser, site+"/api/auth/session"); resp.StatusCode != 200 || !strings.Contains(b, v.Data.User.ID) {
		t.Fatalf("session by cookie: %d %s", resp.StatusCode, b)
	}
	// A used link is refused.
	if code, b := postJSON(t, &http.Client{}, site+"/api/auth/verify", `{"token":"`+token+`"}`); code != 401 || !strings.Contains(b, "already used") {
		t.Fatalf("used link: %d %s", code, b)
	}
	// A cross-site POST riding the cookie is refused.
	if code, b := postJSON(t, browser, site+"/api/keys/management", `{"name":"x"}`, "Origin", "https://evil.example", "Sec-Fetch-Site", "cross-site"); code != 403 {
		t.Fatalf("cross-site POST: %d %s", code, b)
	}
	// Signing out ends it.
	if code, b := postJSON(t, browser, site+"/api/auth/sign-out", ``, "Origin", site, "Sec-Fetch-Site", "same-origin"); code != 200 {
		t.Fatalf("sign-out: %d %s", code, b)
	}
	if resp, b := getBody(t, browser, site+"/api/auth/session"); resp.StatusCode != 200 || !strings.Contains(b, `"user":null`) {
		t.Fatalf("session after sign-out: %d %s, want nobody signed in", resp.StatusCode, b)
	}
	// Outside loopback, without site_address, no link is minted from a Host header.
	req, _ := http.NewRequest("POST", c.URL()+"/api/auth/email", strings.NewReader(`{"email":"ada@example.com"}`))
	req.Host = "evil.example"
	req.Header.Set("Content-Type", "application/json")
	r2, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	r2.Body.Close()
	if r2.StatusCode != 503 {
		t.Fatalf("sign-in link for Host evil.example: %d, want 503 (site_address unset)", r2.StatusCode)
	}
}

// An identity provider in front: a forward_auth server that knows one
// person by a cookie of its own, as oauth2-proxy or Authelia would.
func TestSignInThroughForwardAuth(t *testing.T) {
	idp := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if c, err := r.Cookie("idp"); err == nil && c.Value == "ada" {
			w.Header().Set("Remote-Email", "ada@example.com")
			w.WriteHeader(200)
			return
		}
		http.Error(w, "sign in at the identity provider", http.StatusUnauthorized)
	}))
	defer idp.Close()
	c := e2e.Start(t, `
{
	timeblock {
		secret forward-auth-test-secret-0123456789
		sign_up open
	}
}
:{{.HTTP}} {
	# Scripts with a bearer credential skip the identity provider.
	@bearer header Authorization "Bearer *"
	route @bearer {
		timeblock_accounts
	}
	@account path /api /api/* /account /account/*
	route @account {
		request_header -Remote-Email
		forward_auth `+strings.TrimPrefix(idp.URL, "http://")+` {
			uri /verify
			copy_headers Remote-Email
		}
		timeblock_accounts {
			identity_header Remote-Email
		}
	}
}`)
	// Signed in at the provider: the page's API knows who it is, whatever
	// Remote-Email the client itself sent.
	resp, b := getBody(t, http.DefaultClient, c.URL()+"/api/auth/session", "Cookie", "idp=ada", "Remote-Email", "mallory@example.com")
	if resp.StatusCode != 200 || !strings.Contains(b, `"email":"ada@example.com"`) || !strings.Contains(b, `"via":"identity_provider"`) {
		t.Fatalf("session through forward_auth: %d %s", resp.StatusCode, b)
	}
	// Not signed in there: the provider refuses, and a forged header does not help.
	if resp, _ := getBody(t, http.DefaultClient, c.URL()+"/api/auth/session", "Remote-Email", "ada@example.com"); resp.StatusCode != 401 {
		t.Fatalf("forged Remote-Email without the provider's cookie: %d", resp.StatusCode)
	}
	// The page says it signs in through the provider.
	if resp, b := getBody(t, http.DefaultClient, c.URL()+"/api/auth/config", "Cookie", "idp=ada"); resp.StatusCode != 200 || !strings.Contains(b, `"signIn":"identity_provider"`) {
		t.Fatalf("config: %d %s", resp.StatusCode, b)
	}
	// A management key made through the page works as a bearer credential on the script route.
	code, b := postJSON(t, http.DefaultClient, c.URL()+"/api/keys/management", `{"name":"ci"}`, "Cookie", "idp=ada")
	if code != 201 {
		t.Fatalf("create management key: %d %s", code, b)
	}
	var mk struct {
		Data struct {
			APIKey string `json:"apiKey"`
		}
	}
	if err := json.Unmarshal([]byte(b), &mk); err != nil || !strings.HasPrefix(mk.Data.APIKey, "mk_") {
		t.Fatalf("management key answer %s", b)
	}
	if resp, b := getBody(t, http.DefaultClient, c.URL()+"/api/keys", "Authorization", "Bearer "+mk.Data.APIKey); resp.StatusCode != 200 {
		t.Fatalf("bearer on the script route: %d %s", resp.StatusCode, b)
	}
}
