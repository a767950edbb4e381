//go:build reliability

package reliability

// What the scenarios share: one Caddyfile for a node (account API, gate,
// translator, the simulator as the model server), users made through the
// operator endpoints, and plain HTTP calls that return status and body.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/timeblock/timeblock/caddymodule/e2e"
)

// nodeSecret encrypts consumption keys at rest; every node of one database
// must have the same.
const nodeSecret = "TIMEBLOCK_SECRET=reliability-secret-0123456789"

// allBlocks are the three blocks; a subscription to all of them opens its
// key at every hour, so no scenario depends on the time of day.
var allBlocks = []string{"asia", "europe", "americas"}

// nodeCaddyfile is one node. Pool "race" has %SLOTS% seats an hour; pool
// "open" has plenty. The simulator answers max_tokens tokens (its replies
// are padded) at %RATE% tokens a second, so a request holds its lane for
// max_tokens/%RATE% seconds. The public site
// answers a JSON 404 off its routes, as Caddyfile.example does.
const nodeCaddyfile = `{
	# Requests may name their client address in X-Forwarded-For (the
	# scenarios that expect refusals use one address per round, so that the
	# gate's throttle of failed key checks does not mix into their figures).
	servers {
		trusted_proxies static 127.0.0.1/32
	}
	timeblock {
		%STORE%
		secret {$TIMEBLOCK_SECRET}
		pool race {
			model m-race
			slots %SLOTS%
			block asia 40
			block europe 40
			block americas 40
		}
		pool open {
			model m-open
			slots 200
			block asia 40
			block europe 40
			block americas 40
		}
	}
}

:{{.HTTP}} {
	@api path /api /api/*
	handle @api {
		timeblock_accounts
	}
	@inference path /v1/* /compat/v1/*
	handle @inference {
		timeblock_gate {
			lane_wait %WAIT%
		}
		timeblock_translate chat
		reverse_proxy %UPSTREAM% {
			flush_interval -1
			header_down X-Config %MARK%
		}
	}
	handle {
		header Content-Type application/json
		respond ` + "`" + `{"error":{"message":"no such endpoint"}}` + "`" + ` 404
	}
}

:{{.Upstream}} {
	timeblock_simulator {
		token_rate %RATE%
		reply_tokens 4000
	}
}
`

// nodeOpts fills in nodeCaddyfile.
type nodeOpts struct {
	store string // a store line; default the embedded store
	slots int    // seats an hour of pool "race"; default 10
	wait  string // lane_wait; default 0 (refuse at once)
	rate  int    // simulator tokens a second; default 1000
	mark  string // X-Config on every answer, to tell configs apart; default 1
	// upstream is the model server's host:port; default the simulator
	// site on the Upstream port of the same Caddy.
	upstream string
}

func (o nodeOpts) caddyfile() string {
	if o.store == "" {
		o.store = "store embedded"
	}
	if o.slots == 0 {
		o.slots = 10
	}
	if o.wait == "" {
		o.wait = "0"
	}
	if o.rate == 0 {
		o.rate = 1000
	}
	if o.mark == "" {
		o.mark = "1"
	}
	if o.upstream == "" {
		o.upstream = "127.0.0.1:{{.Upstream}}"
	}
	return strings.NewReplacer(
		"%STORE%", o.store,
		"%SLOTS%", strconv.Itoa(o.slots),
		"%WAIT%", o.wait,
		"%RATE%", strconv.Itoa(o.rate),
		"%MARK%", o.mark,
		"%UPSTREAM%", o.upstream,
	).Replace(nodeCaddyfile)
}

// startNode runs one node. For PostgreSQL, pass store
// "store postgres {$TIMEBLOCK_DSN}" and env "TIMEBLOCK_DSN=<dsn>".
func startNode(t *testing.T, o nodeOpts, env ...string) *e2e.Caddy {
	t.Helper()
	return e2e.Start(t, o.caddyfile(), e2e.WithEnv(append([]string{nodeSecret}, env...)...))
}

// postgresNodes runs n nodes on one fresh PostgreSQL database and returns
// them with its DSN.
func postgresNodes(t *testing.T, n int, o nodeOpts, dsn string) []*e2e.Caddy {
	t.Helper()
	o.store = "store postgres {$TIMEBLOCK_DSN}"
	nodes := make([]*e2e.Caddy, n)
	for i := range nodes {
		nodes[i] = startNode(t, o, "TIMEBLOCK_DSN="+dsn)
	}
	return nodes
}

// answer is one HTTP answer: status and body.
type answer struct {
	status int
	body   []byte
}

func (a answer) data() gjson.Result { return gjson.GetBytes(a.body, "data") }

func (a answer) String() string { return fmt.Sprintf("%d %s", a.status, a.body) }

// httpClient has no overall timeout of its own beyond a generous one, and
// enough idle connections for the concurrent scenarios.
var httpClient = &http.Client{
	Timeout:   60 * time.Second,
	Transport: &http.Transport{MaxIdleConnsPerHost: 200, MaxConnsPerHost: 0},
}

// do sends method url with a JSON body (nil for none) and the headers
// (name, value pairs), and returns the answer; a transport error fails t.
func do(t testing.TB, method, url string, body any, headers ...string) answer {
	t.Helper()
	a, err := tryDo(method, url, body, headers...)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	return a
}

// tryDo is do returning the transport error, for use off the test goroutine.
func tryDo(method, url string, body any, headers ...string) (answer, error) {
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	default:
		j, err := json.Marshal(b)
		if err != nil {
			return answer{}, err
		}
		rd = bytes.NewReader(j)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		return answer{}, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		return answer{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return answer{status: resp.StatusCode, body: b}, err
}

func bearer(token string) []string { return []string{"Authorization", "Bearer " + token} }

// user is one user of the account API, with a session token, calling
// through node c.
type user struct {
	id, email, token string
	c                *e2e.Caddy
}

var userSeq atomic.Int64

// newUser signs a user up through c's operator endpoints and saves a card
// that charges.
func newUser(t testing.TB, c *e2e.Caddy) *user {
	t.Helper()
	email := fmt.Sprintf("rel-%d-%d@example.com", time.Now().UnixNano(), userSeq.Add(1))
	a := do(t, http.MethodPost, c.AdminURL()+"/timeblock/users", map[string]any{"email": email})
	if a.status != http.StatusCreated {
		t.Fatalf("creating a user: %s", a)
	}
	u := &user{id: a.data().Get("id").Str, email: email, token: a.data().Get("sessionToken").Str, c: c}
	u.must(t, http.MethodPost, "/api/billing/setup-intent", map[string]any{"paymentMethod": "pm_card_visa"})
	return u
}

// on returns the same user calling through another node.
func (u *user) on(c *e2e.Caddy) *user {
	v := *u
	v.c = c
	return &v
}

// call sends an account API request with the user's session token.
func (u *user) call(t testing.TB, method, path string, body any) answer {
	t.Helper()
	return do(t, method, u.c.URL()+path, body, bearer(u.token)...)
}

// must is call for a request that has to succeed (2xx); it returns data.
func (u *user) must(t testing.TB, method, path string, body any) gjson.Result {
	t.Helper()
	a := u.call(t, method, path, body)
	if a.status/100 != 2 {
		t.Fatalf("%s %s: %s", method, path, a)
	}
	return a.data()
}

// subscribe buys quantity seats of pool in every block and returns the
// subscription id.
func (u *user) subscribe(t testing.TB, pool string, quantity int) string {
	t.Helper()
	return u.must(t, http.MethodPost, "/api/pools/"+pool+"/subscribe",
		map[string]any{"blocks": allBlocks, "quantity": quantity}).Get("id").Str
}

// key creates the consumption key of a subscription.
func (u *user) key(t testing.TB, subID string) (id, apiKey string) {
	t.Helper()
	d := u.must(t, http.MethodPost, "/api/keys/subscription", map[string]any{"subscriptionId": subID})
	return d.Get("id").Str, d.Get("apiKey").Str
}

// chatBody is a chat-completions request for model with max_tokens n.
func chatBody(model string, n int, stream bool) string {
	return fmt.Sprintf(`{"model":%q,"max_tokens":%d,"stream":%t,"messages":[{"role":"user","content":"hi"}]}`, model, n, stream)
}

// chat sends one non-streaming chat completion with apiKey to c.
func chat(c *e2e.Caddy, apiKey, model string, maxTokens int) (answer, error) {
	return tryDo(http.MethodPost, c.URL()+"/v1/chat/completions", chatBody(model, maxTokens, false), bearer(apiKey)...)
}

// chatFrom is chat from client address addr (X-Forwarded-For).
func chatFrom(c *e2e.Caddy, addr, apiKey, model string, maxTokens int) (answer, error) {
	return tryDo(http.MethodPost, c.URL()+"/v1/chat/completions", chatBody(model, maxTokens, false),
		append(bearer(apiKey), "X-Forwarded-For", addr)...)
}

// metric reads the sum of a Prometheus series' samples (all label values)
// from c's admin /metrics, and whether any sample was there.
func metric(t testing.TB, c *e2e.Caddy, name string) (float64, bool) {
	t.Helper()
	a := do(t, http.MethodGet, c.AdminURL()+"/metrics", nil)
	if a.status != http.StatusOK {
		t.Fatalf("metrics: %s", a)
	}
	return sumSeries(a.body, name)
}

// sumSeries sums the samples of series name in a Prometheus text body.
func sumSeries(body []byte, name string) (sum float64, found bool) {
	for _, line := range strings.Split(string(body), "\n") {
		rest, ok := strings.CutPrefix(line, name)
		if !ok || !(strings.HasPrefix(rest, "{") || strings.HasPrefix(rest, " ")) {
			continue
		}
		f := strings.Fields(rest)
		if v, err := strconv.ParseFloat(f[len(f)-1], 64); err == nil {
			sum, found = sum+v, true
		}
	}
	return sum, found
}

// percentile returns the p-th percentile (0..100) of ds, nearest rank.
func percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	i := int(float64(len(s))*p/100+0.5) - 1
	i = max(0, min(i, len(s)-1))
	return s[i]
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
