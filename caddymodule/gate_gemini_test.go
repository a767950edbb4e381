package caddymodule

import (
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/tidwall/gjson"

	"github.com/timeblock/timeblock/accounts"
)

// The Gemini API's routes: the model is in the path, the key in
// x-goog-api-key or ?key=, and every answer the gate writes has Gemini's
// shape.

const geminiBody = `{"contents":[{"role":"user","parts":[{"text":"hi"}]}],"generationConfig":{"maxOutputTokens":100000,"temperature":0.5}}`

func TestGateGeminiRoutes(t *testing.T) {
	for path, want := range map[string]struct {
		ep    gateEndpoint
		model string
	}{
		"/gemini/v1beta/models/qwen3-32b:generateContent":            {epGemini, "qwen3-32b"},
		"/gemini/v1beta/models/Qwen/Qwen3-32B:streamGenerateContent": {epGemini, "Qwen/Qwen3-32B"},
		"/gemini/v1beta/models/qwen3-32b:countTokens":                {epGeminiCount, "qwen3-32b"},
		"/gemini/v1beta/models":                                      {epGeminiModels, ""},
		"/gemini/v1beta/models/":                                     {epGeminiModels, ""},
		"/gemini/v1beta/models/meta-llama/Llama-3.3-70B":             {epGeminiModel, "meta-llama/Llama-3.3-70B"},
		"/gemini/v1beta/models/qwen3-32b:embedContent":               {epUnknown, ""},
		"/gemini/v1beta/models/:generateContent":                     {epUnknown, ""},
		"/gemini/v1beta/cachedContents":                              {epUnknown, ""},
		"/v1/models":                                                 {epModels, ""},
	} {
		ep, model := gateRoute(path)
		if ep != want.ep || model != want.model {
			t.Errorf("%s: endpoint %d model %q, want %d %q", path, ep, model, want.ep, want.model)
		}
	}
}

// geminiRequest is a Gemini API request with the key where cred says:
// "header" (x-goog-api-key, as the SDKs send it) or "query" (?key=).
func (f *gateFixture) geminiRequest(method, path, key, cred, body string) *http.Request {
	r := f.request(path, "", body)
	r.Method = method
	switch cred {
	case "header":
		r.Header.Set("x-goog-api-key", key)
	case "query":
		sep := "?"
		if strings.Contains(path, "?") {
			sep = "&"
		}
		r.URL.RawQuery = strings.TrimPrefix(r.URL.RawQuery+sep+"key="+key, "?")
	}
	return r
}

func TestGateGeminiAdmits(t *testing.T) {
	f := newGateFixture(t, 0)
	for _, cred := range []string{"header", "query"} {
		t.Run(cred, func(t *testing.T) {
			var s seen
			var query string
			var hdr http.Header
			next := caddyhttp.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
				query, hdr = r.URL.RawQuery, r.Header.Clone()
				return recorder(&s).ServeHTTP(w, r)
			})
			r := f.geminiRequest(http.MethodPost, "/gemini/v1beta/models/qwen3-32b:streamGenerateContent?alt=sse", tKey, cred, geminiBody)
			res := f.doRequest(t, r, next)
			if res.status != 200 || s.calls != 1 {
				t.Fatalf("status %d, next called %d times: %s", res.status, s.calls, res.body)
			}
			// The key goes no further; the rest of the query does.
			if strings.Contains(query, tKey) || hdr.Get("X-Goog-Api-Key") != "" || query != "alt=sse" {
				t.Errorf("the key was passed on: query %q, header %q", query, hdr.Get("X-Goog-Api-Key"))
			}
			if s.repl["model"] != "qwen3-32b" || s.repl["pool"] != "qwen" {
				t.Errorf("placeholders %v", s.repl)
			}
			// The output limit, nested in generationConfig, is clamped to
			// the pool's ceiling; the rest is as sent.
			if got := gjson.Get(s.body, "generationConfig.maxOutputTokens").Int(); got != 8192 {
				t.Errorf("maxOutputTokens %d, want 8192: %s", got, s.body)
			}
			if gjson.Get(s.body, "generationConfig.temperature").Float() != 0.5 || gjson.Get(s.body, "model").Exists() {
				t.Errorf("body %s", s.body)
			}
		})
	}
}

// The Gemini API takes snake_case names too; the limit is clamped where
// the body has it.
func TestGateGeminiClampsSnakeCase(t *testing.T) {
	f := newGateFixture(t, 0)
	var s seen
	body := `{"contents":[{"parts":[{"text":"hi"}]}],"generation_config":{"temperature":1,"max_output_tokens":50000}}`
	res := f.doRequest(t, f.geminiRequest(http.MethodPost, "/gemini/v1beta/models/qwen3-32b:generateContent", tKey, "header", body), recorder(&s))
	if res.status != 200 || gjson.Get(s.body, "generation_config.max_output_tokens").Int() != 8192 ||
		gjson.Get(s.body, "generationConfig").Exists() {
		t.Fatalf("%d %s", res.status, s.body)
	}
}

func TestGateGeminiRefusals(t *testing.T) {
	f := newGateFixture(t, 0)
	never := caddyhttp.HandlerFunc(func(http.ResponseWriter, *http.Request) error {
		t.Error("a refused request reached the next handler")
		return nil
	})
	for _, tc := range []struct {
		name, method, path, key, cred, body string
		status                              int
		gstatus, msg                        string
	}{
		{"no key", http.MethodPost, "/gemini/v1beta/models/qwen3-32b:generateContent", "", "", geminiBody,
			401, "UNAUTHENTICATED", "x-goog-api-key"},
		{"unknown key", http.MethodPost, "/gemini/v1beta/models/qwen3-32b:generateContent", tKey + "x", "header", geminiBody,
			401, "UNAUTHENTICATED", "invalid API key"},
		{"model not held", http.MethodPost, "/gemini/v1beta/models/gemini-2.5-pro:generateContent", tKey, "header", geminiBody,
			404, "NOT_FOUND", `"gemini-2.5-pro" is not available`},
		{"window closed", http.MethodPost, "/gemini/v1beta/models/qwen3-32b:generateContent", tEvening, "header", geminiBody,
			429, "RESOURCE_EXHAUSTED", ""},
		{"past due", http.MethodPost, "/gemini/v1beta/models/qwen3-32b:generateContent", tPastDue, "header", geminiBody,
			429, "RESOURCE_EXHAUSTED", ""},
		{"not JSON", http.MethodPost, "/gemini/v1beta/models/qwen3-32b:generateContent", tKey, "query", `{"contents":`,
			400, "INVALID_ARGUMENT", ""},
		{"empty body", http.MethodPost, "/gemini/v1beta/models/qwen3-32b:generateContent", tKey, "query", ``,
			400, "INVALID_ARGUMENT", "send a JSON object with contents"},
		{"unknown method", http.MethodPost, "/gemini/v1beta/models/qwen3-32b:embedContent", tKey, "header", geminiBody,
			404, "NOT_FOUND", ":generateContent"},
		{"GET on generate", http.MethodGet, "/gemini/v1beta/models/qwen3-32b:generateContent", tKey, "header", "",
			405, "UNIMPLEMENTED", "use POST"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := f.doRequest(t, f.geminiRequest(tc.method, tc.path, tc.key, tc.cred, tc.body), never)
			e := gjson.Get(res.body, "error")
			if res.status != tc.status || e.Get("code").Int() != int64(tc.status) || e.Get("status").Str != tc.gstatus ||
				!strings.Contains(e.Get("message").Str, tc.msg) || gjson.Get(res.body, "type").Exists() {
				t.Errorf("%d %s", res.status, res.body)
			}
			// A closed window tells Gemini CLI when it opens (hours away:
			// past the five minutes it would wait), a past-due key a day,
			// so that it stops instead of retrying for minutes.
			if tc.status == http.StatusTooManyRequests {
				d := e.Get(`details.#(@type=="type.googleapis.com/google.rpc.RetryInfo").retryDelay`).Str
				secs, err := strconv.Atoi(strings.TrimSuffix(d, "s"))
				if err != nil || !strings.HasSuffix(d, "s") || secs <= 300 || secs > 24*3600 {
					t.Errorf("retryDelay %q in %s", d, res.body)
				}
			}
		})
	}
}

func TestGateGeminiModelList(t *testing.T) {
	f := newGateFixture(t, 0)
	f.src.put(tTrio, &accounts.Entitlement{KeyID: "ck_3", UserID: "u4", Combined: true, Grants: trioGrants()})
	get := func(path string) result {
		return f.doRequest(t, f.geminiRequest(http.MethodGet, path, tTrio, "header", ""), nil)
	}
	res := get("/gemini/v1beta/models")
	if got := gjson.Get(res.body, "models.#.name").String(); res.status != 200 ||
		got != `["models/qwen3-32b","models/meta-llama/Llama-3.3-70B","models/mistral-small"]` {
		t.Fatalf("%d %s", res.status, res.body)
	}
	if m := gjson.Get(res.body, "models.0"); m.Get("displayName").Str != "Qwen3 32B" || m.Get("outputTokenLimit").Int() != 8192 ||
		!strings.Contains(m.Get("supportedGenerationMethods").Raw, `"streamGenerateContent"`) {
		t.Errorf("model %s", m.Raw)
	}
	// Paged: two, then the rest from the token.
	res = get("/gemini/v1beta/models?pageSize=2")
	tok := gjson.Get(res.body, "nextPageToken").Str
	if gjson.Get(res.body, "models.#").Int() != 2 || tok == "" {
		t.Fatalf("page 1: %s", res.body)
	}
	res = get("/gemini/v1beta/models?pageSize=2&pageToken=" + tok)
	if got := gjson.Get(res.body, "models.#.name").String(); got != `["models/mistral-small"]` || gjson.Get(res.body, "nextPageToken").Exists() {
		t.Fatalf("page 2: %s", res.body)
	}
	if res = get("/gemini/v1beta/models?pageToken=bogus"); res.status != 400 || gjson.Get(res.body, "error.status").Str != "INVALID_ARGUMENT" {
		t.Errorf("bad token: %d %s", res.status, res.body)
	}
	res = get("/gemini/v1beta/models/meta-llama/Llama-3.3-70B")
	if res.status != 200 || gjson.Get(res.body, "name").Str != "models/meta-llama/Llama-3.3-70B" {
		t.Errorf("one model: %d %s", res.status, res.body)
	}
	if res = get("/gemini/v1beta/models/gemini-2.5-pro"); res.status != 404 || gjson.Get(res.body, "error.status").Str != "NOT_FOUND" {
		t.Errorf("a model not held: %d %s", res.status, res.body)
	}
}

// A key whose lanes are all busy gets 429 RESOURCE_EXHAUSTED with a one
// second RetryInfo, so Gemini CLI retries soon (a lane frees when a request
// ends) rather than waiting its default backoff.
func TestGateGeminiLanesFull(t *testing.T) {
	f := newGateFixture(t, 0) // lane_wait 0: refuse at once
	started, release := make(chan struct{}, 1), make(chan struct{})
	done := make(chan result, 1)
	go func() { done <- f.do(t, chatPath, tKey, chatBody, blockingNext(started, release)) }()
	<-started
	res := f.doRequest(t, f.geminiRequest(http.MethodPost, "/gemini/v1beta/models/qwen3-32b:generateContent", tKey, "header", geminiBody), nil)
	close(release)
	<-done
	e := gjson.Get(res.body, "error")
	if res.status != http.StatusTooManyRequests || e.Get("status").Str != "RESOURCE_EXHAUSTED" || !strings.Contains(e.Get("message").Str, "lanes of this key") {
		t.Fatalf("second request on a 1-lane key: %d %s", res.status, res.body)
	}
	if d := e.Get(`details.#(@type=="type.googleapis.com/google.rpc.RetryInfo").retryDelay`).Str; d != "1s" || res.header.Get("Retry-After") != "1" {
		t.Errorf("retryDelay %q, Retry-After %q; want 1s and 1: %s", d, res.header.Get("Retry-After"), res.body)
	}
}
