//go:build reliability

package reliability

// Malformed input on every endpoint: one node (embedded store) with a model
// server in each format (the simulator, behind a recorder that counts what
// reaches it) gets a generated corpus of malformed requests — every known
// member of each inference format with values of every wrong JSON kind and
// out-of-range numbers, wrong shapes inside messages and tools, broken and
// odd JSON, empty bodies, wrong methods and bad headers — on the inference
// endpoints, the model lists, count_tokens and every /api route without and
// with a session. The figures: server errors (5xx) = 0, panics in Caddy's
// log = 0, and malformed inference requests that reached the model server =
// 0. Valid requests of each endpoint are sent alongside, as a control that
// the path to the model server is open.

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/timeblock/timeblock/caddymodule/e2e"
	"github.com/timeblock/timeblock/simulator"
)

// malformedCaddyfile: requests marked X-Upstream: messages go to a
// messages upstream, all others to a chat upstream; both are the recorder
// at %REC%. The throttles of failed key checks are off: the corpus
// fails key checks on purpose, and a 429 would hide what comes after.
const malformedCaddyfile = `{
	timeblock {
		store embedded
		secret {$TIMEBLOCK_SECRET}
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
		timeblock_accounts {
			key_failures_per_minute 0
		}
	}
	@toMessages {
		path /v1/* /compat/v1/*
		header X-Upstream messages
	}
	handle @toMessages {
		timeblock_gate {
			key_failures_per_minute 0
		}
		timeblock_translate messages
		reverse_proxy %REC%
	}
	@inference path /v1/* /compat/v1/*
	handle @inference {
		timeblock_gate {
			key_failures_per_minute 0
		}
		timeblock_translate chat
		reverse_proxy %REC%
	}
	handle {
		header Content-Type application/json
		respond ` + "`" + `{"error":{"message":"no such endpoint"}}` + "`" + ` 404
	}
}
`

// malformedInput is one request of the corpus.
type malformedInput struct {
	what    string // for failure messages
	method  string
	path    string
	body    string
	headers []string
	// inference: a malformed request to an inference endpoint, which must
	// never reach the model server.
	inference bool
	// gzip: a plain JSON body sent with Content-Encoding: gzip, which the
	// gate refuses with 415 (it reads only uncompressed JSON).
	gzip bool
}

// Known top-level members of each inference format and the JSON kinds
// they accept (s string, n number, b boolean, o object, a array); numbers
// with a range also get values outside it.
var (
	chatMembers = map[string]string{
		"model": "s", "messages": "a", "stream": "b", "temperature": "n", "top_p": "n", "n": "n",
		"max_tokens": "n", "max_completion_tokens": "n", "stop": "sa", "tools": "a", "tool_choice": "so",
		"parallel_tool_calls": "b", "logprobs": "b", "top_logprobs": "n", "seed": "n", "frequency_penalty": "n",
		"presence_penalty": "n", "user": "s", "store": "b", "metadata": "o", "response_format": "o",
		"stream_options": "o", "logit_bias": "o", "modalities": "a", "reasoning_effort": "s", "service_tier": "s",
		"audio": "o", "prediction": "o", "functions": "a", "function_call": "so", "web_search_options": "",
		"top_k": "n", "verbosity": "s", "prompt_cache_key": "s", "safety_identifier": "s",
	}
	messagesMembers = map[string]string{
		"model": "s", "messages": "a", "max_tokens": "n", "system": "sa", "stop_sequences": "a", "stream": "b",
		"temperature": "n", "top_p": "n", "top_k": "n", "tools": "a", "tool_choice": "o", "metadata": "o",
		"thinking": "ob", "service_tier": "s", "output_config": "o", "container": "", "mcp_servers": "",
		"context_management": "o",
	}
	responsesMembers = map[string]string{
		"model": "s", "input": "sa", "instructions": "s", "stream": "b", "temperature": "n", "top_p": "n",
		"max_output_tokens": "n", "tools": "a", "tool_choice": "so", "parallel_tool_calls": "b", "text": "o",
		"reasoning": "o", "include": "a", "store": "b", "metadata": "o", "user": "s", "previous_response_id": "",
		"background": "b", "prompt": "", "service_tier": "s", "top_logprobs": "n", "truncation": "s",
	}
	// Out-of-range numbers of each ranged member.
	badNumbers = map[string][]string{
		"temperature": {"-0.5", "2.5", "1e999"}, "top_p": {"-1", "1.5"}, "n": {"0", "-3", "2.5"},
		"max_tokens": {"0", "-1", "1e999", "2.5", "99999999999999999999999"}, "max_completion_tokens": {"0", "-5"},
		"max_output_tokens": {"0", "-5", "1e999"}, "top_logprobs": {"-1", "21"}, "seed": {"1.5"},
		"frequency_penalty": {"-3", "9"}, "presence_penalty": {"3"}, "top_k": {"-5", "1.5"},
	}
	kindValues = map[byte]string{'s': `"x"`, 'n': `5`, 'b': `true`, 'o': `{"a":1}`, 'a': `[1]`}
)

// setMember returns the JSON object base with member k set to raw v, in
// place of the member of that name if base has one (a body with duplicate
// members is another case: the last one counts, on every hop).
func setMember(base, k, v string) string {
	if i := strings.Index(base, fmt.Sprintf("%q:", k)); i >= 0 {
		j := i + len(k) + 3
		e := j + len(gjson.Get(base, k).Raw)
		return base[:j] + v + base[e:]
	}
	return strings.Replace(base, "{", fmt.Sprintf("{%q:%s,", k, v), 1)
}

// inferenceCorpus generates the malformed requests of one inference path.
func inferenceCorpus(path, base string, members map[string]string, nested []string) []malformedInput {
	var out []malformedInput
	add := func(what, body string) {
		out = append(out, malformedInput{what: what, method: http.MethodPost, path: path, body: body, inference: true})
	}
	names := make([]string, 0, len(members))
	for k := range members {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		for _, kind := range []byte("snboa") {
			if strings.IndexByte(members[k], kind) >= 0 {
				continue
			}
			add(k+" as "+string(kind), setMember(base, k, kindValues[kind]))
		}
		for _, v := range badNumbers[k] {
			add(k+" = "+v, setMember(base, k, v))
		}
	}
	for _, b := range nested {
		add("shape: "+b, b)
	}
	// Broken and odd JSON.
	for _, b := range []string{"", " ", "{", "}", `{"model":`, base[:len(base)/2], base + "}", base + "x", "null", "[]", `"x"`,
		"5", "true", `{"model":"m-open",}`, "{'model':'m-open'}", "\x00\x01", "\xff\xfe{}", strings.Repeat("[", 100000),
		`{"model":"m-open","messages":` + strings.Repeat("[", 5000) + strings.Repeat("]", 5000) + `}`,
		setMember(base, "model", `"m-`+strings.Repeat("x", 1<<20)+`"`),
		`{"model":1e999999}`, setMember(base, "stream", "tru")} {
		add(fmt.Sprintf("json %.40q", b), b)
	}
	return out
}

// malformedHeaders are bad header sets, sent with a valid body; the key is
// added by the caller where the case needs it.
var malformedHeaders = []struct {
	what    string
	headers []string
	noKey   bool
}{
	{"no key", nil, true},
	{"empty bearer", []string{"Authorization", "Bearer "}, true},
	{"basic auth", []string{"Authorization", "Basic dXNlcjpwYXNz"}, true},
	{"garbage key", []string{"X-Api-Key", "sk_!!\"'"}, true},
	{"long key", []string{"X-Api-Key", "sk_pool_" + strings.Repeat("a", 8000)}, true},
	{"session token as key", nil, true}, // filled in below
	{"text content type", []string{"Content-Type", "text/plain"}, false},
	{"gzip claimed", []string{"Content-Encoding", "gzip"}, false},
	{"bad anthropic-version", []string{"Anthropic-Version", "1999-01-01;x=\"y"}, false},
	{"bad accept", []string{"Accept", "text/event-stream;;;q=x"}, false},
	{"beta header", []string{"Anthropic-Beta", strings.Repeat("x,", 2000)}, false},
}

func TestMalformedInput(t *testing.T) {
	sim, err := simulator.New(simulator.Config{})
	if err != nil {
		t.Fatal(err)
	}
	var reached atomic.Int64
	rec := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reached.Add(1)
		sim.ServeHTTP(w, r)
	}))
	defer rec.Close()
	c := e2e.Start(t, strings.ReplaceAll(malformedCaddyfile, "%REC%", strings.TrimPrefix(rec.URL, "http://")), e2e.WithEnv(nodeSecret))
	u := newUser(t, c)
	_, apiKey := u.key(t, u.subscribe(t, "open", 1))

	const (
		chatBase      = `{"model":"m-open","max_tokens":8,"messages":[{"role":"user","content":"hi"}]}`
		messagesBase  = `{"model":"m-open","max_tokens":8,"messages":[{"role":"user","content":"hi"}]}`
		responsesBase = `{"model":"m-open","max_output_tokens":16,"input":"hi"}`
	)
	chatNested := []string{
		// (An empty conversation is left to the model server, which refuses it.)
		`{"model":"m-open","messages":[1,2,3]}`,
		`{"model":"m-open","messages":[{"role":"evil","content":"hi"}]}`, `{"model":"m-open","messages":[{"content":"hi"}]}`,
		`{"model":"m-open","messages":[{"role":"user","content":{"a":1}}]}`, `{"model":"m-open","messages":[{"role":"user","content":5}]}`,
		`{"model":"m-open","messages":[{"role":"user","content":[5]}]}`, `{"model":"m-open","messages":[{"role":"user","content":[{"type":"text","text":5}]}]}`,
		`{"model":"m-open","messages":[{"role":"tool","content":"x"}]}`, `{"model":"m-open","messages":[{"role":"assistant","tool_calls":"x"}]}`,
		`{"model":"m-open","messages":[{"role":"assistant","tool_calls":[{"id":1}]}]}`,
		`{"model":"m-open","messages":[{"role":"user","content":"hi"}],"tools":[{"type":"web_search_20250305"}]}`,
		`{"model":"m-open","messages":[{"role":"user","content":"hi"}],"tools":[5]}`,
		`{"model":"m-open","messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{}}]}`,
		`{"model":"m-open","messages":[{"role":"user","content":"hi"}],"tool_choice":"sometimes"}`,
	}
	messagesNested := []string{
		`{"model":"m-open","max_tokens":8,"messages":[1,2,3]}`, `{"model":"m-open","max_tokens":8}`,
		`{"model":"m-open","max_tokens":8,"messages":[{"role":"evil","content":"hi"}]}`,
		`{"model":"m-open","max_tokens":8,"messages":[{"role":"user","content":{"a":1}}]}`,
		`{"model":"m-open","max_tokens":8,"messages":[{"role":"user","content":[5]}]}`,
		`{"model":"m-open","max_tokens":8,"messages":[{"role":"user","content":[{"type":"text"}]}]}`,
		`{"model":"m-open","max_tokens":8,"messages":[{"role":"assistant","content":[{"type":"tool_use","id":"t"}]}]}`,
		`{"model":"m-open","max_tokens":8,"messages":[{"role":"user","content":[{"type":"tool_result","content":5}]}]}`,
		`{"model":"m-open","max_tokens":8,"messages":[{"role":"assistant","content":[{"type":"server_tool_use","id":"s","name":"web_search","input":{}}]}]}`,
		`{"model":"m-open","max_tokens":8,"messages":[{"role":"user","content":"hi"}],"tools":[{"type":"web_search_20250305","name":"w"}]}`,
		`{"model":"m-open","max_tokens":8,"messages":[{"role":"user","content":"hi"}],"tools":[{"input_schema":{}}]}`,
		`{"model":"m-open","max_tokens":8,"messages":[{"role":"user","content":"hi"}],"tool_choice":{"type":"x"}}`,
		`{"model":"m-open","max_tokens":8,"messages":[{"role":"user","content":"hi"}],"system":[{"type":"image"}]}`,
		`{"model":"m-open","max_tokens":8,"messages":[{"role":"user","content":"hi"}],"mcp_servers":[{"type":"url","url":"https://x"}]}`,
	}
	responsesNested := []string{
		`{"model":"m-open","input":[1,2,3]}`, `{"model":"m-open","input":[{"role":"evil","content":"hi"}]}`,
		`{"model":"m-open","input":[{"role":"user","content":{"a":1}}]}`, `{"model":"m-open","input":[{"type":"web_search_call"}]}`,
		`{"model":"m-open","input":"hi","tools":[5]}`, `{"model":"m-open","input":"hi","tool_choice":{"type":"web_search_preview"}}`,
		`{"model":"m-open","input":[{"type":"function_call_output","output":"x"}]}`,
	}

	var corpus []malformedInput
	corpus = append(corpus, inferenceCorpus("/v1/chat/completions", chatBase, chatMembers, chatNested)...)
	corpus = append(corpus, inferenceCorpus("/compat/v1/messages", messagesBase, messagesMembers, messagesNested)...)
	corpus = append(corpus, inferenceCorpus("/v1/responses", responsesBase, responsesMembers, responsesNested)...)
	// count_tokens: broken JSON and wrong shapes; a messages upstream
	// counts what it is given, so only server errors are counted here.
	for _, in := range inferenceCorpus("/compat/v1/messages/count_tokens", `{"model":"m-open","messages":[{"role":"user","content":"hi"}]}`, messagesMembers, messagesNested) {
		in.inference = false
		corpus = append(corpus, in)
	}
	// Wrong methods on every endpoint.
	valid := map[string]string{
		"/v1/chat/completions": chatBase, "/compat/v1/messages": messagesBase, "/v1/responses": responsesBase,
		"/compat/v1/messages/count_tokens": `{"model":"m-open","messages":[{"role":"user","content":"hi"}]}`,
	}
	for _, path := range []string{"/v1/chat/completions", "/compat/v1/messages", "/v1/responses", "/compat/v1/messages/count_tokens", "/v1/models", "/compat/v1/models", "/v1/key"} {
		for _, m := range []string{http.MethodGet, http.MethodPut, http.MethodDelete, http.MethodPatch, http.MethodPost, http.MethodOptions, "BREW"} {
			if (m == http.MethodPost) == (valid[path] != "") {
				continue // the endpoint's own method
			}
			corpus = append(corpus, malformedInput{what: m + " " + path, method: m, path: path, body: valid[path], inference: valid[path] != ""})
		}
		// Bad headers with an otherwise valid request.
		method := http.MethodPost
		if valid[path] == "" {
			method = http.MethodGet
		}
		for _, h := range malformedHeaders {
			in := malformedInput{what: h.what + " " + path, method: method, path: path, body: valid[path], headers: h.headers}
			if h.what == "session token as key" {
				in.headers = bearer(u.token)
			}
			if !h.noKey {
				in.headers = append(append([]string(nil), h.headers...), "X-Api-Key", apiKey)
			}
			// Without a usable key, or with a body that is not what its
			// Content-Encoding says, nothing may reach the model server;
			// the other headers are odd, not wrong, and the request may go on.
			in.inference = valid[path] != "" && h.noKey
			in.gzip = h.what == "gzip claimed" && valid[path] != ""
			corpus = append(corpus, in)
		}
		// Bodies on the model lists, and a body that is not JSON at all.
		if valid[path] == "" {
			corpus = append(corpus, malformedInput{what: "GET with a body " + path, method: http.MethodGet, path: path, body: "{", headers: []string{"X-Api-Key", apiKey}})
			corpus = append(corpus, malformedInput{what: "GET query " + path, method: http.MethodGet, path: path + "?limit=-1&after_id=%00", headers: []string{"X-Api-Key", apiKey}})
		}
	}
	for i := range corpus {
		in := &corpus[i]
		if in.headers == nil && strings.HasPrefix(in.path, "/") && !strings.HasPrefix(in.what, "no key") {
			in.headers = []string{"X-Api-Key", apiKey}
		}
	}
	// The account API: every route, without and with a session, with
	// broken bodies and ids.
	var apiCorpus []malformedInput
	api, _ := routePatterns(t)
	apiBodies := []string{"", "{", "null", "[]", `"x"`, `{"email":5,"paymentMethod":[],"blocks":"x","quantity":-1,"name":{},"subscriptionId":1e999,"subscriptionIds":"x","role":7,"label":null}`,
		`{"blocks":[1,2],"quantity":1e999}`, `{"quantity":"1","blocks":["nowhere"]}`, strings.Repeat("[", 10000)}
	ids := []string{"x", "00000000-0000-0000-0000-000000000000", strings.Repeat("9", 400), "%00", "..%2f.."}
	for _, pattern := range api {
		method, path, _ := strings.Cut(pattern, " ")
		for _, id := range ids {
			p := path
			for strings.Contains(p, "{") {
				a, b := strings.Index(p, "{"), strings.Index(p, "}")
				if b < a {
					break
				}
				p = p[:a] + id + p[b+1:]
			}
			for _, b := range apiBodies {
				for _, session := range []bool{false, true} {
					in := malformedInput{what: pattern + " " + id, method: method, path: p, body: b}
					if session {
						in.headers = bearer(u.token)
					}
					apiCorpus = append(apiCorpus, in)
				}
			}
			if !strings.Contains(path, "{") {
				break // one id is enough for a route without one
			}
		}
	}

	var serverErrors, inferenceSent, leaked, n, gzipReached int
	var firstErrors []string
	// The inference corpus to either upstream, then the account API once
	// (it has no upstream, and some routes change the user's state).
	for _, upstream := range []string{"chat", "messages", "api"} {
		list := corpus
		if upstream == "api" {
			list = apiCorpus
		}
		for _, in := range list {
			n++
			headers := append([]string{"X-Upstream", upstream}, in.headers...)
			if strings.Contains(in.path, "/compat/") && !contains(headers, "Anthropic-Version") {
				headers = append(headers, "Anthropic-Version", "2023-06-01")
			}
			before := reached.Load()
			a, err := rawDo(c.URL()+in.path, in.method, in.body, headers...)
			if err != nil {
				t.Fatalf("%s: %v", in.what, err)
			}
			if a.status >= 500 {
				serverErrors++
				if len(firstErrors) < 10 {
					firstErrors = append(firstErrors, fmt.Sprintf("%s (%s upstream): %s", in.what, upstream, truncate(a.String(), 300)))
				}
			}
			if in.gzip && reached.Load() != before {
				gzipReached++
			}
			if in.inference {
				inferenceSent++
				if reached.Load() != before {
					leaked++
					if len(firstErrors) < 40 {
						firstErrors = append(firstErrors, fmt.Sprintf("%s (%s upstream) reached the model server: %s", in.what, upstream, truncate(a.String(), 300)))
					}
				}
			}
		}
	}
	// Controls: the valid requests reach the model server.
	controls := 0
	for _, upstream := range []string{"chat", "messages"} {
		for _, path := range []string{"/v1/chat/completions", "/compat/v1/messages", "/v1/responses"} {
			before := reached.Load()
			a, err := rawDo(c.URL()+path, http.MethodPost, valid[path], "X-Upstream", upstream, "X-Api-Key", apiKey, "Anthropic-Version", "2023-06-01")
			if err != nil || a.status != http.StatusOK || reached.Load() != before+1 {
				t.Errorf("control %s to %s: %v %v", path, upstream, a, err)
				continue
			}
			controls++
		}
	}
	for _, e := range firstErrors {
		t.Log(e)
	}
	panics := strings.Count(strings.ToLower(c.Logs()), "panic")
	Info(t, "malformed inputs sent (every endpoint, both upstreams)", float64(n), "requests")
	Zero(t, fmt.Sprintf("server errors (5xx) over %d malformed inputs", n), serverErrors, "responses")
	Zero(t, "panics in Caddy's log (malformed input)", panics, "panics")
	Info(t, "malformed inference requests (chat, messages, responses)", float64(inferenceSent), "requests")
	Zero(t, fmt.Sprintf("malformed requests that reached the model server (of %d)", inferenceSent), leaked, "requests")
	Zero(t, "Content-Encoding: gzip bodies that reached the model server", gzipReached, "requests")
	AtLeast(t, "valid control requests that reached the model server (of 6)", float64(controls), 6, "requests")
}

// rawDo is tryDo for a body sent exactly as given (tryDo sets a JSON
// Content-Type first, which a header of the case may replace).
func rawDo(url, method, body string, headers ...string) (answer, error) {
	var b any
	if body != "" {
		b = body
	}
	return tryDo(method, url, b, headers...)
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
