package caddymodule

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/timeblock/timeblock/accounts"
)

const usageStreamChunk = `{"id":"c1","object":"chat.completion.chunk","created":1,"model":"qwen3-32b","choices":[{"index":0,"delta":{"role":"assistant","content":"Hi"},"finish_reason":null}]}`

// The gate counts each key's admitted requests with the tokens the
// translator saw the upstream report (whole, streamed, and a stream the
// client cut off), its refusals by reason, and the seconds its lanes were
// held; one flush writes them.
func TestGateCountsUsage(t *testing.T) {
	f := newGateFixture(t, 0)
	var tick atomic.Int64
	f.gate.now = func() time.Time { return gateNow.Add(time.Duration(tick.Add(1)) * 100 * time.Millisecond) }
	tr := &Translate{Upstream: "chat"}
	if err := tr.Provision(caddy.Context{}); err != nil {
		t.Fatal(err)
	}
	upstream := caddyhttp.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
		b, _ := io.ReadAll(r.Body)
		if !strings.Contains(string(b), `"stream":true`) {
			w.Header().Set("Content-Type", "application/json")
			_, err := io.WriteString(w, benchCompletion) // 31 in, 50 out
			return err
		}
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "data: "+usageStreamChunk+"\n\n")
		if r.Header.Get("X-Cut") != "" {
			panic(http.ErrAbortHandler) // what reverse_proxy does when the client left
		}
		io.WriteString(w, `data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"qwen3-32b","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`+"\n\n")
		io.WriteString(w, `data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"qwen3-32b","choices":[],"usage":{"prompt_tokens":5,"completion_tokens":3,"total_tokens":8}}`+"\n\n")
		_, err := io.WriteString(w, "data: [DONE]\n\n")
		return err
	})
	next := caddyhttp.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error { return tr.ServeHTTP(w, r, upstream) })

	must := func(res result, status int) {
		t.Helper()
		if res.status != status {
			t.Fatalf("status %d, want %d: %s", res.status, status, res.body)
		}
	}
	must(f.do(t, chatPath, tKey, chatBody, next), http.StatusOK)
	must(f.do(t, messagesPath, tKey, messagesBody, next), http.StatusOK)
	must(f.do(t, chatPath, tKey, `{"model":"qwen3-32b","stream":true,"messages":[{"role":"user","content":"hi"}]}`, next), http.StatusOK)
	cut := f.request(messagesPath, tKey, `{"model":"qwen3-32b","max_tokens":10,"stream":true,"messages":[{"role":"user","content":"hi"}]}`)
	cut.Header.Set("X-Cut", "1")
	func() {
		defer func() {
			if v := recover(); !errors.Is(v.(error), http.ErrAbortHandler) {
				t.Errorf("recovered %v", v)
			}
		}()
		f.doRequest(t, cut, next)
	}()
	must(f.do(t, chatPath, tKey, `{"model":"nope","messages":[]}`, next), http.StatusNotFound)
	must(f.do(t, chatPath, tEvening, chatBody, next), http.StatusTooManyRequests)
	must(f.do(t, chatPath, tEvening, chatBody, next), http.StatusTooManyRequests)

	if err := f.gate.state.usage.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	byKey := map[string]accounts.KeyUsage{}
	f.store.mu.Lock()
	for _, u := range f.store.usage {
		if !u.Hour.Equal(gateNow.Truncate(time.Hour)) {
			t.Errorf("hour %v", u.Hour)
		}
		byKey[u.KeyID] = u
	}
	f.store.mu.Unlock()
	k := byKey["key_1"]
	// Whole: 31 + 31 in, 50 + 50 out; streamed: 5 and 3; cut off: nothing seen yet.
	if k.Admitted != 4 || k.InputTokens != 67 || k.OutputTokens != 103 || k.Refused["model_not_held"] != 1 || len(k.Refused) != 1 {
		t.Errorf("key_1 usage = %+v", k)
	}
	if k.Seconds <= 0 {
		t.Errorf("key_1 held its lanes %v s", k.Seconds)
	}
	if ev := byKey["key_ev"]; ev.Admitted != 0 || ev.Refused["window_closed"] != 2 {
		t.Errorf("key_ev usage = %+v", ev)
	}
	if f.inUse("key_1") != 0 {
		t.Error("a lane is still held")
	}
}

// From a messages upstream, a stream the client cut off counts the tokens
// message_start reported; a whole body counts its cache reads and writes as
// input.
func TestGateCountsUsageMessagesUpstream(t *testing.T) {
	f := newGateFixture(t, 0)
	tr := &Translate{Upstream: "messages"}
	if err := tr.Provision(caddy.Context{}); err != nil {
		t.Fatal(err)
	}
	upstream := caddyhttp.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
		b, _ := io.ReadAll(r.Body)
		if !strings.Contains(string(b), `"stream":true`) {
			w.Header().Set("Content-Type", "application/json")
			_, err := io.WriteString(w, `{"id":"msg_1","type":"message","role":"assistant","model":"qwen3-32b",`+
				`"content":[{"type":"text","text":"Hi"}],"stop_reason":"end_turn","stop_sequence":null,`+
				`"usage":{"input_tokens":4,"cache_read_input_tokens":10,"cache_creation_input_tokens":6,"output_tokens":2}}`)
			return err
		}
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "event: message_start\ndata: "+`{"type":"message_start","message":{"id":"msg_2","type":"message","role":"assistant",`+
			`"model":"qwen3-32b","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":12,"output_tokens":1}}}`+"\n\n")
		io.WriteString(w, "event: content_block_start\ndata: "+`{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`+"\n\n")
		io.WriteString(w, "event: content_block_delta\ndata: "+`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hel"}}`+"\n\n")
		panic(http.ErrAbortHandler) // the client left
	})
	next := caddyhttp.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error { return tr.ServeHTTP(w, r, upstream) })
	if res := f.do(t, chatPath, tKey, chatBody, next); res.status != http.StatusOK {
		t.Fatalf("status %d: %s", res.status, res.body)
	}
	func() {
		defer func() {
			if v := recover(); !errors.Is(v.(error), http.ErrAbortHandler) {
				t.Errorf("recovered %v", v)
			}
		}()
		f.do(t, chatPath, tKey, `{"model":"qwen3-32b","stream":true,"messages":[{"role":"user","content":"hi"}]}`, next)
	}()
	if err := f.gate.state.usage.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	f.store.mu.Lock()
	defer f.store.mu.Unlock()
	if len(f.store.usage) != 1 {
		t.Fatalf("usage rows %+v", f.store.usage)
	}
	// Whole: 4 + 10 + 6 in, 2 out; cut off: 12 in, 1 out.
	if u := f.store.usage[0]; u.KeyID != "key_1" || u.Admitted != 2 || u.InputTokens != 32 || u.OutputTokens != 3 {
		t.Errorf("usage = %+v, want 2 admitted, 32 in, 3 out", u)
	}
}

// Counting usage costs an admitted or refused request no allocation once
// its key has counted in the hour.
func TestUsageAccountingAllocs(t *testing.T) {
	f := newGateFixture(t, 0)
	ent := &accounts.Entitlement{KeyID: "key_1"}
	fb := &forwardedBody{inputTokens: 31, outputTokens: 50}
	count := func() {
		f.gate.finishAdmitted(ent.KeyID, "qwen", gateNow, gateNow, fb)
		f.gate.noteRejection(rejectLanesFull, http.StatusTooManyRequests, ent)
	}
	count()
	if n := testing.AllocsPerRun(100, count); n != 0 {
		t.Errorf("usage accounting: %v allocations per request, want 0", n)
	}
}
