package e2e_test

// End-to-end tests of the foundation: the quick start as a newcomer runs it,
// the store surviving a restart, several nodes on one PostgreSQL database,
// and a user's whole account journey on both stores.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/timeblock/timeblock/accounts/postgres/pgtest"
	"github.com/timeblock/timeblock/caddymodule/e2e"
)

// repoFile returns the path of a file at the repository root.
func repoFile(t *testing.T, name string) string {
	t.Helper()
	p, err := filepath.Abs(filepath.Join("..", "..", name))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// quickStartCaddyfile is Caddyfile.example on free ports: the harness
// provides the admin address, the site and the simulator move to its ports.
func quickStartCaddyfile(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(repoFile(t, "Caddyfile.example"))
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	for _, r := range [][2]string{
		{"\tadmin localhost:2019\n", ""},
		{"\nstore embedded\n", "\n"},
		{":8080 {", ":{{.HTTP}} {"},
		{"reverse_proxy 127.0.0.1:8000", "reverse_proxy 127.0.0.1:{{.Upstream}}"},
		{"http://:8000 {", "http://:{{.Upstream}} {"},
	} {
		if !strings.Contains(s, r[0]) && r[0] != "\nstore embedded\n" {
			t.Fatalf("Caddyfile.example no longer contains %q; update this test", r[0])
		}
		s = strings.Replace(s, r[0], r[1], 1)
	}
	return s
}

// The README's quick start as a newcomer runs it: Caddyfile.example on
// embedded defaults, the walk-through script against http://localhost (not
// 127.0.0.1: the Host header must not decide whether inference works),
// getting answers from both inference endpoints and ending with the whole
// key and the clients' settings; Caddy saying at start what it serves and
// that the secret is the demo one; JSON 404s off the served paths.
func TestQuickStartWalkthrough(t *testing.T) {
	c := e2e.Start(t, quickStartCaddyfile(t))
	base := fmt.Sprintf("http://localhost:%d", c.HTTP)
	admin := fmt.Sprintf("http://localhost:%d", c.Admin)
	cmd := exec.Command("bash", repoFile(t, "examples/walkthrough.sh"), base, admin)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("walkthrough failed: %v\n%s", err, out)
	}
	for _, want := range []string{
		`"sessionToken":"st_`,
		`"last4":"4242"`,
		`"status":"active"`,
		`"object":"chat.completion"`, // chat completions answered
		"event: message_start",       // messages endpoint streamed
		"event: message_stop",
		"Simulated reply", // from the simulator, through both endpoints
		`{"object":"list","data":[{"id":"meta-llama/Llama-3.3-70B-Instruct"`, // the key's models
		`"object":"response"`, // the Responses API
		// Ready-to-paste settings naming this site.
		`OpenAI(base_url="` + base + `/v1"`,
		`Anthropic(base_url="` + base + `/compat"`,
		"export ANTHROPIC_BASE_URL=" + base + "/compat\n",
		"claude --model meta-llama/Llama-3.3-70B-Instruct\n",
		"model_provider = \"timeblock\"\n",
		"[model_providers.timeblock]\n",
		"base_url = \"" + base + "/v1\"\n",
		"env_key = \"TIMEBLOCK_API_KEY\"\n",
		"wire_api = \"responses\"\n",
		"codex exec ",
	} {
		if !bytes.Contains(out, []byte(want)) {
			t.Errorf("walkthrough output lacks %q:\n%s", want, out)
		}
	}
	// The whole key, alone on its line, and the same in every setting.
	m := regexp.MustCompile(`(?m)^  (sk_pool_[A-Za-z0-9_-]{43})$`).FindSubmatch(out)
	if m == nil {
		t.Fatalf("walkthrough output shows no whole key:\n%s", out)
	}
	key := string(m[1])
	for _, want := range []string{`api_key="` + key + `"`, "ANTHROPIC_API_KEY=" + key + "\n", "TIMEBLOCK_API_KEY=" + key + "\n"} {
		if !bytes.Contains(out, []byte(want)) {
			t.Errorf("walkthrough output lacks %q", want)
		}
	}

	// Any Host reaches the same site and upstream.
	for _, host := range []string{"localhost", "127.0.0.1", "api.timeblock.example"} {
		req, _ := http.NewRequest("POST", c.URL()+"/v1/chat/completions", strings.NewReader(
			`{"model":"meta-llama/Llama-3.3-70B-Instruct","max_tokens":16,"messages":[{"role":"user","content":"hi"}]}`))
		req.Host = host
		req.Header.Set("Authorization", "Bearer "+key)
		status, ct, body := send(t, req)
		if status != 200 || !strings.HasPrefix(ct, "application/json") || !strings.Contains(body, "Simulated reply") {
			t.Errorf("Host %s: %d %s %s", host, status, ct, body)
		}
	}

	// Off the served paths: JSON, never text/plain.
	for _, tc := range []struct {
		method, path string
		status       int
		field, want  string
	}{
		{"GET", "/", 404, "error.type", "not_found_error"},
		{"POST", "/compat/messages", 404, "error.message", "/compat/v1/"},
		{"GET", "/v2/models", 404, "type", "error"},
		{"GET", "/api", 404, "error", "no such endpoint"},
		{"GET", "/api/nothing-here", 404, "error", "no such endpoint"},
		{"POST", "/api/keys", 405, "error", "use GET"},
	} {
		req, _ := http.NewRequest(tc.method, base+tc.path, nil)
		status, ct, body := send(t, req)
		if status != tc.status || !strings.HasPrefix(ct, "application/json") ||
			!strings.Contains(gjson.Get(body, tc.field).String(), tc.want) {
			t.Errorf("%s %s: %d %q %s; want %d, JSON with %s containing %q", tc.method, tc.path, status, ct, body,
				tc.status, tc.field, tc.want)
		}
	}

	// At start Caddy said what each site serves, and warned about the secret.
	// (The harness binds every site to 127.0.0.1, hence that base URL.)
	logs := logMessages(c.Logs())
	for _, want := range []string{
		fmt.Sprintf("Timeblock at http://127.0.0.1:%d: account API on /api /api/*; account page at http://127.0.0.1:%[1]d/account/ (sign in there); inference on /v1/* /compat/v1/* /gemini/* "+
			"(OpenAI-style base URL http://127.0.0.1:%[1]d/v1, messages-style base URL http://127.0.0.1:%[1]d/compat, "+
			"Gemini API base URL http://127.0.0.1:%[1]d/gemini) "+
			"to a chat upstream at 127.0.0.1:%d; pools: llama-70b (meta-llama/Llama-3.3-70B-Instruct), "+
			"qwen3-32b (Qwen/Qwen3-32B), deepseek-r1 (deepseek-ai/DeepSeek-R1), "+
			"kimi-k2 (moonshotai/Kimi-K2-Instruct, funding: taking pledges)", c.HTTP, c.Upstream),
		fmt.Sprintf("Timeblock at http://127.0.0.1:%d: the simulated model server on /*", c.Upstream),
	} {
		if !slices.Contains(logs["info"], want) {
			t.Errorf("no info line %q at start; info lines:\n%s", want, strings.Join(logs["info"], "\n"))
		}
	}
	if _, set := os.LookupEnv("TIMEBLOCK_SECRET"); !set &&
		!slices.ContainsFunc(logs["warn"], func(m string) bool { return strings.Contains(m, "public demo fallback") }) {
		t.Errorf("no warning about the demo secret; warnings:\n%s", strings.Join(logs["warn"], "\n"))
	}

	// The embedded store lives under Caddy's data directory.
	if _, err := os.Stat(filepath.Join(c.Dir, "data", "caddy", "timeblock", "timeblock.db")); err != nil {
		matches, _ := filepath.Glob(filepath.Join(c.Dir, "*", "*", "timeblock", "timeblock.db"))
		if len(matches) == 0 {
			t.Errorf("no embedded store file under %s: %v", c.Dir, err)
		}
	}
}

// send makes a request and returns its status, content type and body.
func send(t *testing.T, req *http.Request) (int, string, string) {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get("Content-Type"), string(b)
}

// logMessages returns the messages of Caddy's JSON log lines by level.
func logMessages(log string) map[string][]string {
	msgs := make(map[string][]string)
	for line := range strings.SplitSeq(log, "\n") {
		var entry struct{ Level, Msg string }
		if json.Unmarshal([]byte(line), &entry) == nil && entry.Msg != "" {
			msgs[entry.Level] = append(msgs[entry.Level], entry.Msg)
		}
	}
	return msgs
}

// client is a user of the account API through one Caddy node.
type client struct {
	t      *testing.T
	base   string
	admin  string
	token  string
	record *strings.Builder // status and shape of every answer, to compare stores
}

// do sends a request and checks the status; it returns the whole envelope.
func (c *client) do(method, url string, body any, want int) gjson.Result {
	c.t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			c.t.Fatal(err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		c.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != want {
		c.t.Fatalf("%s %s: got %s, want %d\n%s", method, url, resp.Status, want, b)
	}
	env := gjson.ParseBytes(b)
	if !env.Get("success").Exists() {
		c.t.Fatalf("%s %s: not an envelope: %s", method, url, b)
	}
	if c.record != nil {
		fmt.Fprintf(c.record, "%s %s %d %s\n", method, stripIDs(url), resp.StatusCode, shape(env))
	}
	return env
}

func (c *client) api(method, path string, body any, want int) gjson.Result {
	c.t.Helper()
	return c.do(method, c.base+path, body, want)
}

var (
	idPattern   = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)
	hostPattern = regexp.MustCompile(`^https?://[^/]+`)
)

// stripIDs leaves the path of a URL with its ids replaced.
func stripIDs(s string) string {
	return idPattern.ReplaceAllString(hostPattern.ReplaceAllString(s, ""), "<id>")
}

// shape renders a JSON value's structure with the values that vary between
// runs (ids, secrets, times) left out, so two stores can be compared.
func shape(v gjson.Result) string {
	switch {
	case v.IsObject():
		var parts []string
		v.ForEach(func(k, val gjson.Result) bool {
			parts = append(parts, k.Str+":"+shape(val))
			return true
		})
		return "{" + strings.Join(parts, ",") + "}"
	case v.IsArray():
		var parts []string
		for _, x := range v.Array() {
			parts = append(parts, shape(x))
		}
		return "[" + strings.Join(parts, ",") + "]"
	case v.Type == gjson.String:
		if idPattern.MatchString(v.Str) || strings.HasPrefix(v.Str, "sk") || strings.HasPrefix(v.Str, "mk_") ||
			strings.HasPrefix(v.Str, "st_") {
			return "string"
		}
		if _, err := time.Parse(time.RFC3339Nano, v.Str); err == nil {
			return "time"
		}
		return fmt.Sprintf("%q", v.Str)
	default:
		return v.Raw
	}
}

const journeyCaddyfile = `{
	timeblock {
		%STORE%
		secret {$TIMEBLOCK_SECRET}
		terms_version 2026-11
		pool gpu {
			model m-gpu
			slots 3
			block asia 30
			block europe 40
			block americas 45.50
			annual_discount 0.25
		}
		pool manual {
			model m-manual
			slots 1
			block europe 90
			manual_provisioning
		}
	}
}

:{{.HTTP}} {
	handle /api/* {
		timeblock_accounts
	}
}
`

// journey runs a user's whole account life through one Caddy and returns the
// record of every answer's status and shape.
func journey(t *testing.T, store string) string {
	c := e2e.Start(t, strings.Replace(journeyCaddyfile, "%STORE%", store, 1),
		e2e.WithEnv("TIMEBLOCK_SECRET=journey-secret-0123456789"))
	var record strings.Builder
	u := &client{t: t, base: c.URL(), admin: c.AdminURL(), record: &record}

	created := u.do("POST", c.AdminURL()+"/timeblock/users", map[string]any{"email": "Journey@Example.com", "name": "J"}, 201)
	u.token = created.Get("data.sessionToken").Str
	userID := created.Get("data.id").Str

	u.api("POST", "/api/pools/gpu/subscribe", map[string]any{"blocks": []string{"asia"}}, 400) // no card yet
	u.api("POST", "/api/billing/setup-intent", map[string]any{"paymentMethod": "pm_card_visa"}, 200)
	terms := u.api("GET", "/api/pools/disclosure", nil, 200)
	if v := terms.Get("data.version").Str; v != "2026-11" {
		t.Errorf("terms version = %q", v)
	}
	u.api("POST", "/api/pools/gpu/subscribe", map[string]any{"blocks": []string{"asia"}, "acknowledgment": map[string]string{"version": "2020-01"}}, 409)

	sub1 := u.api("POST", "/api/pools/gpu/subscribe", map[string]any{
		"blocks": []string{"asia", "americas"}, "quantity": 2, "acknowledgment": map[string]string{"version": "2026-11"},
	}, 201)
	if got := sub1.Get("data.monthlyPrice").Str; got != "151" { // 2 × (30 + 45.50)
		t.Errorf("monthlyPrice = %q, want 151", got)
	}
	sub2 := u.api("POST", "/api/pools/gpu/subscribe", map[string]any{"blocks": []string{"asia"}, "billingCycle": "year"}, 201)
	u.api("POST", "/api/pools/gpu/subscribe", map[string]any{"blocks": []string{"asia"}}, 409) // 3 slots, all taken: sold out
	pending := u.api("POST", "/api/pools/manual/subscribe", map[string]any{"blocks": []string{"europe"}}, 201)
	if s := pending.Get("data.status").Str; s != "pending_key" {
		t.Errorf("manual pool subscription status = %q", s)
	}
	id1, id2 := sub1.Get("data.id").Str, sub2.Get("data.id").Str

	key := u.api("POST", "/api/keys/subscription", map[string]any{"subscriptionId": id1, "name": "laptop"}, 201)
	keyID := key.Get("data.id").Str
	if !strings.HasPrefix(key.Get("data.apiKey").Str, "sk_pool_") {
		t.Errorf("apiKey = %q", key.Get("data.apiKey").Str)
	}
	list := u.api("GET", "/api/keys", nil, 200)
	if list.Get("data.0.apiKey").Str != key.Get("data.apiKey").Str {
		t.Errorf("listed key differs from the created one")
	}
	u.api("PUT", "/api/keys/"+keyID, map[string]any{"isActive": false}, 200)
	u.api("PUT", "/api/keys/"+keyID, map[string]any{"isActive": true, "name": "desk"}, 200)
	u.api("DELETE", "/api/keys/"+keyID, nil, 200)

	mk := u.api("POST", "/api/keys/management", map[string]any{"name": "ci"}, 201)
	script := &client{t: t, base: c.URL(), token: mk.Get("data.apiKey").Str, record: &record}
	script.api("GET", "/api/pools/gpu", nil, 200)

	combined := script.api("POST", "/api/meta-keys", map[string]any{
		"pledgeIds": []string{id1, id2}, "label": "both", "roles": map[string]string{id2: "boost"},
	}, 201)
	metaID := combined.Get("data.id").Str
	if !strings.HasPrefix(combined.Get("data.token").Str, "sk-compat-meta-") {
		t.Errorf("combined token = %q", combined.Get("data.token").Str)
	}
	row := u.api("PATCH", "/api/meta-keys/"+metaID+"/member-roles", map[string]any{"roles": map[string]string{id2: "lane"}}, 200)
	if n := row.Get("data.members.#").Int(); n != 2 {
		t.Errorf("members = %d", n)
	}
	u.api("PATCH", "/api/meta-keys/"+metaID, map[string]any{"label": "renamed"}, 200)
	u.api("DELETE", "/api/meta-keys/"+metaID, nil, 200)

	// Delivering the manual key, then a failed payment and a recovery.
	u.do("POST", c.AdminURL()+"/timeblock/subscriptions/"+pending.Get("data.id").Str+"/deliver", nil, 200)
	u.do("POST", c.AdminURL()+"/timeblock/subscriptions/"+id1+"/payment-failed", nil, 200)
	status := u.api("GET", "/api/billing/status", nil, 200)
	if got := status.Get("data.pastDue.0").Str; got != id1 {
		t.Errorf("pastDue = %s", status.Get("data.pastDue").Raw)
	}
	u.api("POST", "/api/billing/setup-intent", map[string]any{"paymentMethod": "pm_card_mastercard"}, 200)
	subs := u.api("GET", "/api/pools/gpu/my-subscriptions", nil, 200)
	for _, s := range subs.Get("data").Array() {
		if s.Get("status").Str != "active" {
			t.Errorf("after recovery, subscription %s is %s", s.Get("id").Str, s.Get("status").Str)
		}
	}
	u.api("DELETE", "/api/pools/gpu/pledge", nil, 200)
	u.api("GET", "/api/pools/gpu/my-subscriptions", nil, 200)

	// Other users see none of it.
	other := u.do("POST", c.AdminURL()+"/timeblock/users", map[string]any{"email": "other@example.com"}, 201)
	stranger := &client{t: t, base: c.URL(), token: other.Get("data.sessionToken").Str, record: &record}
	stranger.api("DELETE", "/api/meta-keys/"+metaID, nil, 404)
	stranger.api("GET", "/api/keys", nil, 200)
	u.do("POST", c.AdminURL()+"/timeblock/users/"+userID+"/sessions", nil, 201)
	return record.String()
}

// A user's whole account life gives the same answers, field by field, on
// the embedded store and on PostgreSQL.
func TestAccountJourneySameOnBothStores(t *testing.T) {
	embedded := journey(t, "store embedded")
	postgres := journey(t, "store postgres "+pgtest.DSN(t))
	if embedded != postgres {
		t.Errorf("the stores answer differently.\nembedded:\n%s\npostgres:\n%s", embedded, postgres)
	}
}

// Accounts written before a restart are there after it.
func TestEmbeddedStoreSurvivesRestart(t *testing.T) {
	c := e2e.Start(t, strings.Replace(journeyCaddyfile, "%STORE%", "store embedded {{.Dir}}/accounts.db", 1),
		e2e.WithEnv("TIMEBLOCK_SECRET=restart-secret-0123456789"))
	u := &client{t: t, base: c.URL()}
	u.token = u.do("POST", c.AdminURL()+"/timeblock/users", map[string]any{"email": "r@example.com"}, 201).Get("data.sessionToken").Str
	u.api("POST", "/api/billing/setup-intent", map[string]any{"paymentMethod": "pm_card_visa"}, 200)
	sub := u.api("POST", "/api/pools/gpu/subscribe", map[string]any{"blocks": []string{"europe"}}, 201).Get("data.id").Str
	key := u.api("POST", "/api/keys/subscription", map[string]any{"subscriptionId": sub}, 201).Get("data.apiKey").Str

	c.Restart()
	keys := u.api("GET", "/api/keys", nil, 200)
	if got := keys.Get("data.0.apiKey").Str; got != key {
		t.Fatalf("after restart the key is %q, want %q", got, key)
	}
	if _, err := os.Stat(filepath.Join(c.Dir, "accounts.db")); err != nil {
		t.Errorf("store file: %v", err)
	}
}

// Two Caddy nodes starting at once on one fresh PostgreSQL database both
// come up (the migrations do not race) and share the accounts.
func TestTwoNodesStartOnFreshPostgres(t *testing.T) {
	cfg := strings.Replace(journeyCaddyfile, "%STORE%", "store postgres "+pgtest.DSN(t), 1)
	env := e2e.WithEnv("TIMEBLOCK_SECRET=two-nodes-secret-0123456789")
	nodes := make([]*e2e.Caddy, 2)
	var wg sync.WaitGroup
	for i := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			nodes[i] = e2e.Start(t, cfg, env)
		}()
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	a := &client{t: t, base: nodes[0].URL()}
	a.token = a.do("POST", nodes[0].AdminURL()+"/timeblock/users", map[string]any{"email": "n@example.com"}, 201).Get("data.sessionToken").Str
	a.api("POST", "/api/billing/setup-intent", map[string]any{"paymentMethod": "pm_card_visa"}, 200)
	b := &client{t: t, base: nodes[1].URL(), token: a.token}
	status := b.api("GET", "/api/billing/status", nil, 200)
	if !status.Get("data.hasPaymentMethod").Bool() {
		t.Errorf("node 2 does not see the card saved through node 1: %s", status.Raw)
	}
}
