package caddymodule

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/tidwall/gjson"

	"github.com/timeblock/timeblock/translate"
)

const countBody = `{"model":"qwen3-32b","system":"Be brief.","messages":[{"role":"user","content":"How long is this prompt?"}],` +
	`"tools":[{"name":"get_weather","input_schema":{"type":"object"}}]}`

func countRequest(body string) *http.Request {
	r := httptest.NewRequest(http.MethodPost, countPath+"?beta=true", strings.NewReader(body))
	r.Header.Set("x-api-key", tKey)
	return r
}

func unreachable(t *testing.T) caddyhttp.Handler {
	return caddyhttp.HandlerFunc(func(http.ResponseWriter, *http.Request) error {
		t.Error("the upstream was called")
		return nil
	})
}

// A chat upstream cannot count: the translator answers the estimate, with
// or without the gate before it.
func TestTranslateCountTokensChatUpstream(t *testing.T) {
	want, terr := translate.CountTokens([]byte(countBody))
	if terr != nil {
		t.Fatal(terr)
	}
	tr := newTranslate(t, "timeblock_translate chat")

	w := httptest.NewRecorder()
	if err := tr.ServeHTTP(w, countRequest(countBody), unreachable(t)); err != nil {
		t.Fatal(err)
	}
	if w.Code != 200 || w.Body.String() != `{"input_tokens":`+strconv.FormatInt(want, 10)+`}` ||
		w.Header().Get("Content-Type") != "application/json" {
		t.Fatalf("%d %s", w.Code, w.Body)
	}

	f := newGateFixture(t, 0)
	res := f.do(t, countPath, tKey, countBody, caddyhttp.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
		return tr.ServeHTTP(w, r, unreachable(t))
	}))
	if res.status != 200 || gjson.Get(res.body, "input_tokens").Int() != want {
		t.Fatalf("through the gate: %d %s", res.status, res.body)
	}

	for _, tc := range []struct{ name, body, msg string }{
		{"not JSON", `{"model":`, "not valid JSON"},
		{"too deep", `{"model":"m","messages":` + strings.Repeat("[", 129) + strings.Repeat("]", 129) + `}`, "nested more than 128 levels deep"},
		{"no messages", `{"model":"m"}`, "messages: field required"},
	} {
		w := httptest.NewRecorder()
		if err := tr.ServeHTTP(w, countRequest(tc.body), unreachable(t)); err != nil {
			t.Fatal(err)
		}
		if w.Code != 400 {
			t.Fatalf("%s: %d %s", tc.name, w.Code, w.Body)
		}
		assertErrorBody(t, messagesPath, w.Body.String(), "invalid_request_error", tc.msg)
	}
	w = httptest.NewRecorder()
	r := countRequest(countBody)
	r.Method = http.MethodGet
	if err := tr.ServeHTTP(w, r, unreachable(t)); err != nil || w.Code != 405 || w.Header().Get("Allow") != "POST" {
		t.Fatalf("GET: %v %d %s", err, w.Code, w.Body)
	}
}

// countUpstream answers a count request with status and body, recording
// what it was sent.
func countUpstream(got *http.Request, gotBody *string, status int, body string) caddyhttp.Handler {
	return caddyhttp.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
		*got = *r
		b, _ := io.ReadAll(r.Body)
		*gotBody = string(b)
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		w.WriteHeader(status)
		_, err := io.WriteString(w, body)
		return err
	})
}

// A messages upstream counts itself: the request goes to its messages path
// + /count_tokens with the body as it came; errors come back in the
// messages format; an upstream without the endpoint gets the estimate.
func TestTranslateCountTokensMessagesUpstream(t *testing.T) {
	tr := newTranslate(t, "timeblock_translate messages {\n path /anthropic/v1/messages\n}")
	estimate, _ := translate.CountTokens([]byte(countBody))
	cases := []struct {
		name, upstream string
		status         int
		wantStatus     int
		check          func(t *testing.T, body string)
	}{
		{"counted", `{"input_tokens":42}`, 200, 200, func(t *testing.T, body string) {
			if body != `{"input_tokens":42}` {
				t.Fatalf("body %s", body)
			}
		}},
		{"refused", `{"error":"model is not loaded"}`, 400, 400, func(t *testing.T, body string) {
			assertErrorBody(t, messagesPath, body, "invalid_request_error", "model is not loaded")
		}},
		{"overloaded in its own format", `{"type":"error","error":{"type":"overloaded_error","message":"busy"}}`, 529, 529, func(t *testing.T, body string) {
			if body != `{"type":"error","error":{"type":"overloaded_error","message":"busy"}}` {
				t.Fatalf("body %s", body)
			}
		}},
		{"no such endpoint", `404 page not found`, 404, 200, func(t *testing.T, body string) {
			if gjson.Get(body, "input_tokens").Int() != estimate {
				t.Fatalf("body %s, want the estimate %d", body, estimate)
			}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var got http.Request
			var gotBody string
			w := httptest.NewRecorder()
			if err := tr.ServeHTTP(w, countRequest(countBody), countUpstream(&got, &gotBody, tc.status, tc.upstream)); err != nil {
				t.Fatal(err)
			}
			if got.URL.Path != "/anthropic/v1/messages/count_tokens" || got.URL.RawQuery != "beta=true" ||
				gotBody != countBody || got.Header.Get("anthropic-version") != "2023-06-01" {
				t.Fatalf("upstream got %s?%s %q, anthropic-version %q", got.URL.Path, got.URL.RawQuery, gotBody, got.Header.Get("anthropic-version"))
			}
			if w.Code != tc.wantStatus || w.Header().Get("Content-Type") != "application/json" {
				t.Fatalf("status %d (%s), want %d", w.Code, w.Body, tc.wantStatus)
			}
			if cl := w.Header().Get("Content-Length"); cl != strconv.Itoa(w.Body.Len()) {
				t.Errorf("Content-Length %s for %d bytes", cl, w.Body.Len())
			}
			tc.check(t, w.Body.String())
		})
	}

	// An upstream that cannot be reached: the error goes to Caddy's error
	// handling, as for inference.
	fail := caddyhttp.HandlerFunc(func(http.ResponseWriter, *http.Request) error {
		return caddyhttp.Error(http.StatusBadGateway, errors.New("dial tcp: connection refused"))
	})
	if err := tr.ServeHTTP(httptest.NewRecorder(), countRequest(countBody), fail); err == nil {
		t.Fatal("the upstream's failure was swallowed")
	}
}

// What the messages endpoint refuses, counting refuses too, whichever
// upstream would count: the validator runs before the estimate and before
// a messages upstream is asked.
func TestTranslateCountTokensValidates(t *testing.T) {
	bodies := map[string]string{
		"server tool": `{"model":"qwen3-32b","messages":[{"role":"user","content":"hi"}],"tools":[{"type":"web_search_20250305","name":"web_search"}]}`,
		"role":        `{"model":"qwen3-32b","messages":[{"role":"evil","content":"hi"}]}`,
		"messages":    `{"model":"qwen3-32b","messages":[1,2,3]}`,
		"tools":       `{"model":"qwen3-32b","messages":[{"role":"user","content":"hi"}],"tools":"x"}`,
	}
	for _, upstream := range []string{"chat", "messages"} {
		tr := newTranslate(t, "timeblock_translate "+upstream)
		for name, body := range bodies {
			t.Run(upstream+"/"+name, func(t *testing.T) {
				w := httptest.NewRecorder()
				if err := tr.ServeHTTP(w, countRequest(body), unreachable(t)); err != nil {
					t.Fatal(err)
				}
				if w.Code != http.StatusBadRequest {
					t.Fatalf("status %d, body %s: want 400", w.Code, w.Body)
				}
				if typ := gjson.Get(w.Body.String(), "error.type").String(); typ != "invalid_request_error" {
					t.Fatalf("error type %q in %s", typ, w.Body)
				}
			})
		}
	}
}

// Without the gate the translator reads the body itself: a body it cannot
// take is answered in the client's format, on inference and token counts
// alike, and nothing reaches the upstream.
func TestTranslateReadFailures(t *testing.T) {
	tr := newTranslate(t, "timeblock_translate chat")
	tr.maxBody = 64
	for _, path := range []string{messagesPath, countPath} {
		for _, c := range []struct {
			name, body, encoding string
			status               int
			msg                  string
		}{
			{"compressed", countBody[:40], "gzip", http.StatusUnsupportedMediaType, "send the JSON uncompressed"},
			{"too large", countBody, "", http.StatusRequestEntityTooLarge, "larger than 64 bytes"},
		} {
			r := httptest.NewRequest(http.MethodPost, path, strings.NewReader(c.body))
			if c.encoding != "" {
				r.Header.Set("Content-Encoding", c.encoding)
			}
			w := httptest.NewRecorder()
			if err := tr.ServeHTTP(w, r, unreachable(t)); err != nil {
				t.Fatalf("%s %s: %v", path, c.name, err)
			}
			body := w.Body.String()
			if w.Code != c.status || !strings.Contains(body, c.msg) || !strings.Contains(body, `"type":"error"`) {
				t.Errorf("%s %s: %d %s", path, c.name, w.Code, body)
			}
		}
	}
}
