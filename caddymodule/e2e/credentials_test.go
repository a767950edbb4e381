package e2e_test

// Keys stay secret (issue 14, findings 1 and 2): the model server behind
// reverse_proxy never sees the client's credentials, and no key reaches
// Caddy's output, access log and debug lines included.

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/timeblock/timeblock/caddymodule/e2e"
	"github.com/timeblock/timeblock/simulator"
)

// upstreamRecorder is a model server (the simulator) that records the
// headers of every request it gets.
type upstreamRecorder struct {
	srv *httptest.Server

	mu   sync.Mutex
	seen []recorded
}

type recorded struct {
	path   string
	header http.Header
}

func newUpstreamRecorder(t *testing.T) *upstreamRecorder {
	t.Helper()
	sim, err := simulator.New(simulator.Config{})
	if err != nil {
		t.Fatal(err)
	}
	u := &upstreamRecorder{}
	u.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u.mu.Lock()
		u.seen = append(u.seen, recorded{path: r.URL.Path, header: r.Header.Clone()})
		u.mu.Unlock()
		sim.ServeHTTP(w, r)
	}))
	t.Cleanup(u.srv.Close)
	return u
}

func (u *upstreamRecorder) since(n int) []recorded {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]recorded(nil), u.seen[n:]...)
}

func (u *upstreamRecorder) count() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return len(u.seen)
}

// credentialsCaddyfile sends requests marked X-Upstream: messages through
// `timeblock_translate messages` to the recorder, with the model server's own
// key set by header_up as README shows it, and all others through
// `timeblock_translate chat`, without one. %RECORDER% is the recorder's
// address.
const credentialsCaddyfile = `{
	timeblock {
		secret {$TIMEBLOCK_SECRET}
		pool open {
			model m-open
			slots 20
			block asia 40
			block europe 40
			block americas 40
		}
	}
}

:{{.HTTP}} {
	handle /api/* {
		timeblock_accounts
	}
	@toMessages {
		path /v1/* /compat/v1/*
		header X-Upstream messages
	}
	handle @toMessages {
		timeblock_gate
		timeblock_translate messages
		reverse_proxy %RECORDER% {
			header_up Authorization "Bearer {env.MODEL_SERVER_KEY}"
		}
	}
	@toChat path /v1/* /compat/v1/*
	handle @toChat {
		timeblock_gate
		timeblock_translate chat
		reverse_proxy %RECORDER%
	}
}
`

const modelServerKey = "model-server-key-0123456789"

// allBlocksKey buys a seat of pool in all three blocks, so that the key
// works whatever the hour, and returns the subscription's consumption key.
func allBlocksKey(t *testing.T, c *e2e.Caddy, pool string) string {
	t.Helper()
	a := newAccount(t, c)
	sub := a.api(t, http.MethodPost, "/api/pools/"+pool+"/subscribe",
		map[string]any{"blocks": blockNames[:], "quantity": 1}).Get("id").Str
	_, apiKey := a.key(t, sub)
	if apiKey == "" {
		t.Fatal("no key")
	}
	return apiKey
}

// sendRaw posts body to path with the given headers (name, value pairs)
// and returns the status and body of the answer.
func sendRaw(t *testing.T, url string, body string, headers ...string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// The model server gets neither x-api-key nor the client's Authorization,
// on every endpoint, to either upstream format, wherever the client put its
// key; a server that needs its own key gets exactly that from header_up.
func TestCredentialsNotForwarded(t *testing.T) {
	rec := newUpstreamRecorder(t)
	cfg := strings.ReplaceAll(credentialsCaddyfile, "%RECORDER%", strings.TrimPrefix(rec.srv.URL, "http://"))
	c := e2e.Start(t, cfg, e2e.WithEnv(gateSecret, "MODEL_SERVER_KEY="+modelServerKey))
	key := allBlocksKey(t, c, "open")

	const (
		chatBody      = `{"model":"m-open","max_tokens":8,"messages":[{"role":"user","content":"hi"}]}`
		messagesBody  = `{"model":"m-open","max_tokens":8,"messages":[{"role":"user","content":"hi"}]}`
		responsesBody = `{"model":"m-open","max_output_tokens":16,"input":"hi"}`
		countBody     = `{"model":"m-open","messages":[{"role":"user","content":"hi"}]}`
	)
	type endpoint struct{ name, path, body, upstreamPath string }
	endpoints := map[string][]endpoint{
		"chat": {
			{"chat", "/v1/chat/completions", chatBody, "/v1/chat/completions"},
			{"messages", "/compat/v1/messages", messagesBody, "/v1/chat/completions"},
			{"responses", "/v1/responses", responsesBody, "/v1/chat/completions"},
		},
		"messages": {
			{"chat", "/v1/chat/completions", chatBody, "/v1/messages"},
			{"messages", "/compat/v1/messages", messagesBody, "/v1/messages"},
			{"responses", "/v1/responses", responsesBody, "/v1/messages"},
			{"count_tokens", "/compat/v1/messages/count_tokens", countBody, "/v1/messages/count_tokens"},
		},
	}
	styles := []struct {
		name    string
		headers []string
	}{
		{"x-api-key", []string{"X-Api-Key", key}},
		{"bearer", []string{"Authorization", "Bearer " + key}},
		// The key in x-api-key, and the client's Authorization beside it.
		{"x-api-key and authorization", []string{"X-Api-Key", key, "Authorization", "Bearer client-other-credential"}},
	}
	for _, upstream := range []string{"chat", "messages"} {
		for _, ep := range endpoints[upstream] {
			for _, style := range styles {
				t.Run(upstream+"/"+ep.name+"/"+style.name, func(t *testing.T) {
					headers := append([]string{"X-Upstream", upstream, "Anthropic-Version", "2023-06-01"}, style.headers...)
					n := rec.count()
					status, body := sendRaw(t, c.URL()+ep.path, ep.body, headers...)
					if status != http.StatusOK {
						t.Fatalf("%d %s", status, body)
					}
					got := rec.since(n)
					if len(got) != 1 || got[0].path != ep.upstreamPath {
						t.Fatalf("the upstream got %d requests (%v); want one to %s", len(got), got, ep.upstreamPath)
					}
					h := got[0].header
					if v, ok := h["X-Api-Key"]; ok {
						t.Errorf("the upstream got X-Api-Key %q", v)
					}
					wantAuth := ""
					if upstream == "messages" {
						wantAuth = "Bearer " + modelServerKey
					}
					if v := h.Values("Authorization"); len(v) > 1 || h.Get("Authorization") != wantAuth {
						t.Errorf("the upstream got Authorization %q; want %q", v, wantAuth)
					}
					for name, vals := range h {
						for _, v := range vals {
							if strings.Contains(v, key) || strings.Contains(v, "client-other-credential") {
								t.Errorf("the upstream got the client's credential in %s", name)
							}
						}
					}
				})
			}
		}
	}
}

// debugQuickStart is the quick start's Caddyfile with Caddy's `debug`
// option on: every log at debug level, reverse_proxy's included.
func debugQuickStart(t *testing.T) string {
	t.Helper()
	s := quickStartCaddyfile(t)
	if !strings.Contains(s, "\n{\n") {
		t.Fatal("Caddyfile.example has no global options block; update this test")
	}
	return strings.Replace(s, "\n{\n", "\n{\n\tdebug\n", 1)
}

// The quick start at debug level, access log on: keys sent in x-api-key and
// in Authorization, to every inference route and to the account API, valid
// or not, appear nowhere in Caddy's output.
func TestCredentialsNotLogged(t *testing.T) {
	c := e2e.Start(t, debugQuickStart(t))
	a := newAccount(t, c)
	sub := a.api(t, http.MethodPost, "/api/pools/llama-70b/subscribe",
		map[string]any{"blocks": blockNames[:], "quantity": 1, "acknowledgment": map[string]any{"version": "2026-11"}}).Get("id").Str
	_, key := a.key(t, sub)
	if !strings.HasPrefix(key, "sk_pool_") {
		t.Fatalf("no key: %q", key)
	}
	unknown := "sk_pool_" + strings.Repeat("Zz9", 14) + "x"
	secrets := map[string]string{"consumption key": key, "unknown key": unknown, "session token": a.token}

	const model = "meta-llama/Llama-3.3-70B-Instruct"
	chat := `{"model":"` + model + `","max_tokens":8,"messages":[{"role":"user","content":"hi"}]}`
	messages := `{"model":"` + model + `","max_tokens":8,"messages":[{"role":"user","content":"hi"}]}`
	streamed := `{"model":"` + model + `","max_tokens":8,"stream":true,"messages":[{"role":"user","content":"hi"}]}`
	responses := `{"model":"` + model + `","max_output_tokens":16,"input":"hi"}`
	for _, tc := range []struct {
		path, body string
		want       int
		headers    []string
	}{
		{"/v1/chat/completions", chat, 200, []string{"Authorization", "Bearer " + key}},
		{"/v1/chat/completions", chat, 200, []string{"X-Api-Key", key}},
		{"/compat/v1/messages", messages, 200, []string{"X-Api-Key", key, "Anthropic-Version", "2023-06-01"}},
		{"/compat/v1/messages", streamed, 200, []string{"Authorization", "Bearer " + key}},
		{"/v1/responses", responses, 200, []string{"X-Api-Key", key}},
		{"/compat/v1/messages/count_tokens", messages, 200, []string{"X-Api-Key", key}},
		{"/v1/chat/completions", chat, 401, []string{"X-Api-Key", unknown}},
		{"/compat/v1/messages", messages, 401, []string{"X-Api-Key", a.token}},                     // a session token sent by mistake
		{"/api/keys", `{}`, 405, []string{"X-Api-Key", key, "Authorization", "Bearer " + a.token}}, // the account API
	} {
		status, body := sendRaw(t, c.URL()+tc.path, tc.body, tc.headers...)
		if status != tc.want {
			t.Errorf("%s with %s: %d %s; want %d", tc.path, tc.headers[0], status, body, tc.want)
		}
	}
	for _, path := range []string{"/v1/models", "/compat/v1/models"} {
		req, _ := http.NewRequest(http.MethodGet, c.URL()+path, nil)
		req.Header.Set("X-Api-Key", key)
		if status, _, body := send(t, req); status != 200 {
			t.Errorf("GET %s: %d %s", path, status, body)
		}
	}
	c.Stop() // flushes the log

	logs := c.Logs()
	// The test means something only if the lines that carry request headers
	// were written: the access log and reverse_proxy's debug lines.
	for _, want := range []string{`"msg":"handled request"`, `"msg":"upstream roundtrip"`, `"X-Api-Key":"REDACTED"`} {
		if !strings.Contains(logs, want) {
			t.Errorf("the log has no %s; the test no longer sees what it checks", want)
		}
	}
	for what, s := range secrets {
		if i := strings.Index(logs, s); i >= 0 {
			line := logs[strings.LastIndexByte(logs[:i], '\n')+1:]
			if nl := strings.IndexByte(line, '\n'); nl >= 0 {
				line = line[:nl]
			}
			t.Errorf("the %s is in Caddy's output:\n%s", what, redact(line, s))
		}
	}
}

// redact shortens s in line, so that a failing test prints no whole key.
func redact(line, s string) string {
	return strings.ReplaceAll(line, s, fmt.Sprintf("%s…(%d chars)", s[:12], len(s)))
}
