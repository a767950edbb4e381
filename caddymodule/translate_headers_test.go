package caddymodule

import (
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
)

// Claude Code's anthropic-beta header and ?beta=true reach a messages
// upstream and not a chat upstream.
func TestTranslateBetaHeaders(t *testing.T) {
	const beta = "claude-code-20250219,interleaved-thinking-2025-05-14,context-management-2025-06-27"
	body := `{"model":"m","max_tokens":64,"messages":[{"role":"user","content":"Hi"},{"role":"system","content":"env"}],` +
		`"thinking":{"type":"adaptive"},"output_config":{"effort":"high"},"context_management":{"edits":[]}}`
	cases := []struct {
		upstream, query string
		wantBeta        bool
		wantQuery       string
	}{
		{"messages", "beta=true", true, "beta=true"},
		{"chat", "beta=true", false, ""},
		{"chat", "x=1&beta=true&y=2", false, "x=1&y=2"},
		{"chat", "alphabeta=1", false, "alphabeta=1"},
		{"chat", "", false, ""},
	}
	for _, c := range cases {
		t.Run(c.upstream+"?"+c.query, func(t *testing.T) {
			tr := newTranslate(t, "timeblock_translate "+c.upstream)
			target := "/compat/v1/messages"
			if c.query != "" {
				target += "?" + c.query
			}
			r := httptest.NewRequest(http.MethodPost, target, strings.NewReader(body))
			r.Header.Set("Anthropic-Beta", beta)
			r.Header.Set("Anthropic-Version", "2023-06-01")
			r.Header.Set("anthropic-dangerous-direct-browser-access", "true")
			r.Header.Set("X-Api-Key", "k")
			var seen http.Request
			var seenBody []byte
			next := caddyhttp.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
				seen = *r
				seenBody, _ = io.ReadAll(r.Body)
				w.Header().Set("Content-Type", "application/json")
				if c.upstream == "chat" {
					_, err := io.WriteString(w, `{"id":"c","object":"chat.completion","model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}]}`)
					return err
				}
				_, err := io.WriteString(w, `{"id":"msg_1","type":"message","role":"assistant","model":"m","content":[{"type":"text","text":"ok"}],"stop_reason":"end_turn","usage":{"input_tokens":1,"output_tokens":1}}`)
				return err
			})
			w := httptest.NewRecorder()
			if err := tr.ServeHTTP(w, r, next); err != nil {
				t.Fatal(err)
			}
			if w.Code != 200 {
				t.Fatalf("%d %s", w.Code, w.Body)
			}
			if got := seen.Header.Get("Anthropic-Beta"); (got == beta) != c.wantBeta || (!c.wantBeta && got != "") {
				t.Errorf("anthropic-beta upstream = %q", got)
			}
			if c.upstream == "chat" {
				for k := range seen.Header {
					if strings.HasPrefix(strings.ToLower(k), "anthropic-") {
						t.Errorf("%s reached the chat upstream", k)
					}
				}
				if !strings.Contains(string(seenBody), `"role":"system","content":"env"`) || strings.Contains(string(seenBody), "context_management") {
					t.Errorf("chat body %s", seenBody)
				}
			} else if seen.Header.Get("Anthropic-Version") != "2023-06-01" || !strings.Contains(string(seenBody), `"thinking":{"type":"adaptive"}`) {
				t.Errorf("messages upstream: headers %v body %s", seen.Header, seenBody)
			}
			if seen.URL.RawQuery != c.wantQuery {
				t.Errorf("query upstream = %q, want %q", seen.URL.RawQuery, c.wantQuery)
			}
			if seen.Header.Get("X-Api-Key") != "k" {
				t.Error("other headers must stay")
			}
		})
	}
}

// The values of headers set through headerValues are the request's or
// response's own: a value given out is never changed by a later one.
func TestHeaderValues(t *testing.T) {
	var hv headerValues
	h := http.Header{"Accept-Encoding": {"gzip"}}
	hv.set(h, "Accept-Encoding", "identity")
	hv.set(h, "Content-Type", "application/json")
	hv.setLength(h, 1234)
	first := h["Content-Length"][0]
	hv.setLength(h, 1234) // says so already
	h.Del("Content-Length")
	hv.setLength(h, 56789)
	for _, k := range []string{"A", "B", "C"} { // past the room kept
		hv.set(h, k, k)
	}
	h.Add("Content-Type", "text/plain") // appending must not reach into the next value
	want := http.Header{"Accept-Encoding": {"identity"}, "Content-Type": {"application/json", "text/plain"},
		"Content-Length": {"56789"}, "A": {"A"}, "B": {"B"}, "C": {"C"}}
	if !reflect.DeepEqual(h, want) {
		t.Fatalf("header %v, want %v", h, want)
	}
	if first != "1234" {
		t.Fatalf("first Content-Length changed to %q", first)
	}
}

// Headers the client did not send are added for the upstream: an
// uncompressed answer, and the messages API's version for a messages
// upstream.
func TestTranslateAddsUpstreamHeaders(t *testing.T) {
	tr := newTranslate(t, "timeblock_translate messages")
	r := httptest.NewRequest(http.MethodPost, "/v1/chat/completions",
		strings.NewReader(`{"model":"m","max_tokens":64,"messages":[{"role":"user","content":"Hi"}]}`))
	var seen http.Header
	next := caddyhttp.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
		seen = r.Header.Clone()
		w.WriteHeader(http.StatusNoContent)
		return nil
	})
	if err := tr.ServeHTTP(httptest.NewRecorder(), r, next); err != nil {
		t.Fatal(err)
	}
	if seen.Get("Accept-Encoding") != "identity" || seen.Get("Anthropic-Version") != "2023-06-01" {
		t.Fatalf("upstream headers %v", seen)
	}
}
