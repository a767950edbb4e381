//go:build reliability

package reliability

// Credentials absent from logs: a node runs the shipped Caddyfile.example
// (its log filters as shipped) with Caddy's `debug` option on, so every
// logger writes at debug level, reverse_proxy's included. Every kind of
// credential — consumption key, combined key, session token, management
// key, and refused ones (unknown, revoked) — goes in x-api-key and in
// Authorization to every endpoint. Then Caddy's whole output and all that
// the model server received are searched for each credential and for any
// 20-character piece of one.

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/timeblock/timeblock/caddymodule/e2e"
	"github.com/timeblock/timeblock/simulator"
)

// logPiece is the length of the pieces of a credential searched for.
const logPiece = 20

// shippedCaddyfile is Caddyfile.example on the harness's ports, with
// `debug` on, the model server at upstream, and everything else — the log
// filters above all — as shipped.
func shippedCaddyfile(t *testing.T, upstream string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "Caddyfile.example"))
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	for _, r := range [][2]string{
		// Each kind of credential comes from a client address of its own
		// (X-Forwarded-For from a trusted 127.0.0.1), so that the refused
		// ones do not get the valid ones throttled.
		{"\tadmin localhost:2019\n", "\tdebug\n\tservers {\n\t\ttrusted_proxies static 127.0.0.1/32\n\t}\n"},
		{":8080 {", ":{{.HTTP}} {"},
		{"reverse_proxy 127.0.0.1:8000", "reverse_proxy " + upstream},
		{"http://:8000 {", "http://:{{.Upstream}} {"},
	} {
		if !strings.Contains(s, r[0]) {
			t.Fatalf("Caddyfile.example no longer contains %q; update this test", r[0])
		}
		s = strings.Replace(s, r[0], r[1], 1)
	}
	return s
}

// wireRecorder is a model server (the simulator) that keeps every request
// it got, headers and body, as text.
type wireRecorder struct {
	mu   sync.Mutex
	seen strings.Builder
	n    int
}

func (r *wireRecorder) handler(sim http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		r.n++
		r.seen.WriteString(req.Method + " " + req.URL.String() + "\n")
		req.Header.Write(&r.seen)
		r.seen.Write(body)
		r.seen.WriteString("\n\n")
		r.mu.Unlock()
		req.Body = io.NopCloser(strings.NewReader(string(body)))
		sim.ServeHTTP(w, req)
	})
}

func (r *wireRecorder) String() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.seen.String()
}

func TestCredentialsAbsentFromLogs(t *testing.T) {
	sim, err := simulator.New(simulator.Config{})
	if err != nil {
		t.Fatal(err)
	}
	rec := &wireRecorder{}
	srv := httptest.NewServer(rec.handler(sim))
	t.Cleanup(srv.Close)
	c := e2e.Start(t, shippedCaddyfile(t, strings.TrimPrefix(srv.URL, "http://")))

	// Every kind of credential, through the account API.
	u := newUser(t, c)
	ack := map[string]any{"version": "2026-11"}
	sub := func() string {
		return u.must(t, http.MethodPost, "/api/pools/llama-70b/subscribe",
			map[string]any{"blocks": allBlocks, "quantity": 1, "acknowledgment": ack}).Get("id").Str
	}
	_, key := u.key(t, sub())
	revokedID, revoked := u.key(t, sub())
	u.must(t, http.MethodPut, "/api/keys/"+revokedID, map[string]any{"isActive": false})
	combined := u.must(t, http.MethodPost, "/api/meta-keys", map[string]any{"pledgeIds": []string{sub(), sub()}, "label": "logs"}).Get("token").Str
	mgmt := u.must(t, http.MethodPost, "/api/keys/management", map[string]any{"name": "logs"}).Get("apiKey").Str
	creds := map[string]string{
		"consumption key": key, "combined key": combined, "session token": u.token, "management key": mgmt,
		"revoked key": revoked, "unknown key": "sk_pool_" + strings.Repeat("Qw7", 14) + "x",
		"unknown combined key": "sk-compat-meta-" + strings.Repeat("Zx4", 14) + "y",
	}
	for name, v := range creds {
		if len(v) < logPiece {
			t.Fatalf("%s %q: too short; the API's answers changed shape", name, v)
		}
	}

	const model = "meta-llama/Llama-3.3-70B-Instruct"
	chat := `{"model":"` + model + `","max_tokens":8,"messages":[{"role":"user","content":"hi"}]}`
	streamed := `{"model":"` + model + `","max_tokens":8,"stream":true,"messages":[{"role":"user","content":"hi"}]}`
	responses := `{"model":"` + model + `","max_output_tokens":16,"input":"hi"}`
	endpoints := []struct{ method, path, body string }{
		{"POST", "/v1/chat/completions", chat},
		{"POST", "/v1/chat/completions", streamed},
		{"POST", "/compat/v1/messages", chat},
		{"POST", "/compat/v1/messages", streamed},
		{"POST", "/v1/responses", responses},
		{"POST", "/compat/v1/messages/count_tokens", chat},
		{"GET", "/v1/models", ""},
		{"GET", "/compat/v1/models", ""},
		{"GET", "/api/keys", ""},
		{"POST", "/api/keys/management", `{"name":"x"}`},
		{"GET", "/api/billing/status", ""},
		{"GET", "/nowhere", ""},
	}
	styles := []struct {
		name string
		hdr  func(cred string) []string
	}{
		{"x-api-key", func(cred string) []string { return []string{"X-Api-Key", cred} }},
		{"bearer", func(cred string) []string { return bearer(cred) }},
		{"both", func(cred string) []string { return []string{"X-Api-Key", cred, "Authorization", "Bearer " + cred} }},
	}
	// The accepted ones first (the gate may throttle an address after
	// many refusals), then all.
	accepted := 0
	for _, ep := range endpoints[:8] {
		a := do(t, ep.method, c.URL()+ep.path, nilIfEmpty(ep.body), "X-Api-Key", key, "Anthropic-Version", "2023-06-01")
		if a.status == http.StatusOK {
			accepted++
		} else {
			t.Errorf("%s %s with the consumption key: %s", ep.method, ep.path, a)
		}
	}
	calls, kind := 0, 0
	for _, cred := range creds {
		kind++
		addr := fmt.Sprintf("10.20.%d.1", kind)
		for _, ep := range endpoints {
			for _, st := range styles {
				hdr := append([]string{"Anthropic-Version", "2023-06-01", "X-Forwarded-For", addr}, st.hdr(cred)...)
				a := do(t, ep.method, c.URL()+ep.path, nilIfEmpty(ep.body), hdr...)
				calls++
				if a.status >= 500 {
					t.Errorf("%s %s (%s): %s", ep.method, ep.path, st.name, a)
				}
				if a.status == http.StatusOK {
					accepted++
				}
			}
		}
	}
	// Past the throttle's limit of failed key checks from one address, the
	// gate answers 429 before looking at the key: that path must not log
	// it either.
	throttled := 0
	for range 80 {
		a := do(t, http.MethodPost, c.URL()+"/v1/chat/completions", chat,
			"X-Api-Key", creds["unknown key"], "Authorization", "Bearer "+creds["revoked key"], "X-Forwarded-For", "10.20.99.1")
		calls++
		if a.status == http.StatusTooManyRequests {
			throttled++
		}
	}
	c.Stop() // flushes the logs

	logs := c.Logs()
	upstream := rec.String()
	// The search means something only if what carries headers was logged:
	// the access log and reverse_proxy's debug lines.
	headerLines := 0
	for _, line := range strings.Split(logs, "\n") {
		if strings.Contains(line, `"headers":`) && (strings.Contains(line, `"msg":"handled request"`) || strings.Contains(line, `"msg":"upstream roundtrip"`)) {
			headerLines++
		}
	}
	full, pieces := 0, 0
	for name, cred := range creds {
		for where, text := range map[string]string{"Caddy's output": logs, "the model server's requests": upstream} {
			if n := strings.Count(text, cred); n > 0 {
				t.Errorf("the %s is in %s %d times", name, where, n)
				full += n
			}
			for i := 0; i+logPiece <= len(cred); i++ {
				if strings.Contains(text, cred[i:i+logPiece]) {
					t.Errorf("%d characters of the %s (from offset %d) are in %s", logPiece, name, i, where)
					pieces++
					break
				}
			}
		}
	}
	Zero(t, "full credentials in Caddy's debug output or the upstream's requests", full, "occurrences")
	Zero(t, "credentials with a 20-char piece in the output or upstream", pieces, "credentials")
	AtLeast(t, "log lines with request headers (access log, proxy debug)", float64(headerLines), float64(accepted), "lines")
	AtLeast(t, "requests the model server received", float64(rec.n), 8, "requests")
	Info(t, "requests with credentials (7 kinds × 12 endpoints × 3 ways, 80 refusals)", float64(calls), "requests")
	Info(t, "of which throttled (429 before the key check)", float64(throttled), "requests")
	Info(t, "of which admitted", float64(accepted), "requests")
	Info(t, "bytes of Caddy output searched", float64(len(logs)), "bytes")
}
