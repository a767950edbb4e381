package simulator

import (
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
)

// The count is the input the simulator reports for the same request: four
// bytes of system, messages and tools a token.
func TestCountTokens(t *testing.T) {
	s := newTestSimulator(t, Config{})
	const body = `{"model":"qwen3-32b","system":"Be brief.","messages":[{"role":"user","content":"How long is this prompt?"}],` +
		`"tools":[{"name":"get_weather","input_schema":{"type":"object"}}]}`
	w := simDo(t, s, http.MethodPost, "/compat/v1/messages/count_tokens", body)
	if w.Code != 200 || w.Header().Get("Content-Type") != "application/json" {
		t.Fatalf("%d %s: %s", w.Code, w.Header().Get("Content-Type"), w.Body)
	}
	doc := gjson.Parse(body)
	want := int64((len(doc.Get("system").Raw) + len(doc.Get("messages").Raw) + len(doc.Get("tools").Raw) + 3) / 4)
	if got := w.Body.String(); got != `{"input_tokens":`+strconv.FormatInt(want, 10)+`}` {
		t.Fatalf("count = %s, want %d input tokens", got, want)
	}
	msg := simPost(t, s, "/v1/messages", strings.Replace(body, `{"model":"qwen3-32b",`, `{"model":"qwen3-32b","max_tokens":5,`, 1))
	if got := gjson.Get(msg, "usage.input_tokens").Int(); got != want {
		t.Fatalf("usage of the same request: %d input tokens, want %d", got, want)
	}

	for _, bad := range []string{`{"model":"m"}`, `{"messages":[]}`, `[`, `[1]`, `{"model":"m","messages":{}}`} {
		w := simDo(t, s, http.MethodPost, "/v1/messages/count_tokens", bad)
		if w.Code != 400 || gjson.Get(w.Body.String(), "type").Str != "error" || gjson.Get(w.Body.String(), "error.type").Str != "invalid_request_error" {
			t.Errorf("%s: %d %s", bad, w.Code, w.Body)
		}
	}
	if w := simDo(t, s, http.MethodGet, "/v1/messages/count_tokens", ""); w.Code != 405 || w.Header().Get("Allow") != "POST" {
		t.Errorf("GET: %d, Allow %q", w.Code, w.Header().Get("Allow"))
	}
}
