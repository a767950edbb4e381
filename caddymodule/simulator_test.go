package caddymodule

// Tests of the simulator's Caddy glue: the module's JSON fields and Caddyfile
// options reach the server in package simulator, which has the tests of its
// behaviour.

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/tidwall/gjson"
)

func newTestSimulator(t testing.TB, s Simulator) *Simulator {
	t.Helper()
	if err := s.Provision(caddy.Context{}); err != nil {
		t.Fatal(err)
	}
	if err := s.Validate(); err != nil {
		t.Fatal(err)
	}
	return &s
}

func simDo(t testing.TB, s *Simulator, method, path, body string) *httptest.ResponseRecorder {
	t.Helper()
	r := httptest.NewRequest(method, path, strings.NewReader(body))
	w := httptest.NewRecorder()
	if err := s.ServeHTTP(w, r, nil); err != nil {
		t.Fatalf("ServeHTTP: %v", err)
	}
	return w
}

// simPost sends body and checks for 200 and the content type of the mode.
func simPost(t testing.TB, s *Simulator, path, body string) string {
	t.Helper()
	w := simDo(t, s, http.MethodPost, path, body)
	if w.Code != http.StatusOK {
		t.Fatalf("POST %s %s: status %d, body %s", path, body, w.Code, w.Body)
	}
	want := "application/json"
	if gjson.Get(body, "stream").Bool() {
		want = "text/event-stream"
	}
	if ct := w.Header().Get("Content-Type"); ct != want {
		t.Fatalf("Content-Type = %q, want %q", ct, want)
	}
	return w.Body.String()
}

// The module's JSON fields configure the server, with the defaults filled
// in by Provision, and Validate names the module in its errors.
func TestSimulatorModule(t *testing.T) {
	var s Simulator
	if err := json.Unmarshal([]byte(`{"reasoning_tokens":2,"reply_tokens":5,"model":"sim-7b","first_token_latency":"1ms","token_rate":1000}`), &s); err != nil {
		t.Fatal(err)
	}
	sim := newTestSimulator(t, s)
	resp := simPost(t, sim, "/v1/chat/completions", `{"reasoning_effort":"low","messages":[{"role":"user","content":"hi"}]}`)
	if got := gjson.Get(resp, "model").Str; got != "sim-7b" {
		t.Errorf("model = %q, want sim-7b", got)
	}
	if got := gjson.Get(resp, "usage.completion_tokens_details.reasoning_tokens").Int(); got != 2 {
		t.Errorf("reasoning_tokens = %d, want 2", got)
	}
	if got := gjson.Get(resp, "usage.completion_tokens").Int(); got != 2+5 {
		t.Errorf("completion_tokens = %d, want 7", got)
	}

	defaults := newTestSimulator(t, Simulator{})
	if defaults.ReasoningTokens != 16 || defaults.Model != "timeblock-sim" {
		t.Errorf("defaults: reasoning_tokens %d, model %q", defaults.ReasoningTokens, defaults.Model)
	}
	resp = simPost(t, defaults, "/v1/messages", `{"max_tokens":100,"thinking":{"type":"enabled","budget_tokens":1024},"messages":[{"role":"user","content":"hi"}]}`)
	if got := gjson.Get(resp, "model").Str; got != "timeblock-sim" {
		t.Errorf("default model = %q", got)
	}
	if got := gjson.Get(resp, "usage.output_tokens").Int(); got != 16+4 {
		t.Errorf("output_tokens = %d, want 16 of reasoning and 4 of reply", got)
	}

	for _, bad := range []struct {
		s    Simulator
		want string
	}{
		{Simulator{TokenRate: -1}, "timeblock_simulator: token_rate must be"},
		{Simulator{FirstTokenLatency: caddy.Duration(-time.Second)}, "timeblock_simulator: first_token_latency must not be negative, got -1s"},
		{Simulator{ReasoningTokens: -3}, "timeblock_simulator: reasoning_tokens must be at least 1, got -3"},
		{Simulator{ReplyTokens: -2}, "timeblock_simulator: reply_tokens must not be negative, got -2"},
	} {
		if err := bad.s.Provision(caddy.Context{}); err != nil {
			t.Fatalf("%+v: Provision: %v", bad.s, err)
		}
		if err := bad.s.Validate(); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%+v: Validate = %v, want %q", bad.s, err, bad.want)
		}
	}
}

func TestSimulatorCaddyfile(t *testing.T) {
	d := caddyfile.NewTestDispenser(`timeblock_simulator {
		token_rate 12.5
		first_token_latency 200ms
		reasoning_tokens 32
		reply_tokens 64
		model llama-3-70b
	}`)
	var s Simulator
	if err := s.UnmarshalCaddyfile(d); err != nil {
		t.Fatal(err)
	}
	want := Simulator{TokenRate: 12.5, FirstTokenLatency: caddy.Duration(200 * time.Millisecond), ReasoningTokens: 32, ReplyTokens: 64, Model: "llama-3-70b"}
	if !reflect.DeepEqual(s, want) {
		t.Errorf("got %+v, want %+v", s, want)
	}

	for option, wantErr := range map[string]string{
		"extra":                          "wrong argument count",
		"{\n token_rate fast":            `"fast"`,
		"{\n token_rate -1":              `"-1"`,
		"{\n first_token_latency soon":   "soon",
		"{\n reasoning_tokens 0":         "at least 1",
		"{\n reply_tokens -2":            "must not be negative",
		"{\n reply_tokens many":          `"many"`,
		"{\n model":                      "model needs a value",
		"{\n temperature 1":              `unknown timeblock_simulator option "temperature"`,
		"{\n model a b":                  "model takes one value",
		"{\n first_token_latency 1s 2s":  "takes one value",
		"{\n reasoning_tokens 4 extra 5": "takes one value",
	} {
		input := "timeblock_simulator " + option
		if strings.HasPrefix(option, "{") {
			input += "\n}"
		}
		var s Simulator
		err := s.UnmarshalCaddyfile(caddyfile.NewTestDispenser(input))
		if err == nil || !strings.Contains(err.Error(), wantErr) || !strings.Contains(err.Error(), "Testfile:") {
			t.Errorf("%q: error %v, want one naming Testfile:<line> and %q", input, err, wantErr)
		}
	}
}

// discardWriter is a ResponseWriter for benchmarks.
type discardWriter struct {
	h    http.Header
	code int
}

func (w *discardWriter) Header() http.Header         { return w.h }
func (w *discardWriter) Write(p []byte) (int, error) { return len(p), nil }
func (w *discardWriter) WriteHeader(code int)        { w.code = code }
func (w *discardWriter) Flush()                      {}
