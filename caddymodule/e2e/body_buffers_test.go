package e2e_test

// Request bodies live in pooled buffers (caddymodule/body_buffers.go). A
// buffer reused while a request still needed it would send one user's
// prompt in another's request: this drives many concurrent requests of
// different sizes through a real Caddy, both translators and reverse_proxy,
// and checks that every request reaches the model server as its own.

import (
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/timeblock/timeblock/caddymodule/e2e"
)

// echoUpstream is a chat model server that answers each request with its
// system prompt and last user message, after a pause of up to 2 ms so that
// requests overlap.
func echoUpstream(t *testing.T) *httptest.Server {
	t.Helper()
	text := func(c gjson.Result) string {
		if c.Type == gjson.String {
			return c.Str
		}
		return c.Get("0.text").Str
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		msgs := gjson.GetBytes(b, "messages").Array()
		if len(msgs) == 0 {
			http.Error(w, "no messages in "+string(b), http.StatusBadRequest)
			return
		}
		time.Sleep(time.Duration(rand.IntN(2000)) * time.Microsecond)
		answer := text(msgs[0].Get("content")) + "|" + text(msgs[len(msgs)-1].Get("content"))
		out, _ := json.Marshal(map[string]any{
			"id": "chatcmpl-echo", "object": "chat.completion", "created": 1767225600, "model": gjson.GetBytes(b, "model").Str,
			"choices": []any{map[string]any{"index": 0, "finish_reason": "stop",
				"message": map[string]any{"role": "assistant", "content": answer}}},
			"usage": map[string]any{"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
		})
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(out)
	}))
	t.Cleanup(srv.Close)
	return srv
}

func TestPooledBodiesStayApart(t *testing.T) {
	up := echoUpstream(t)
	cfg := strings.ReplaceAll(credentialsCaddyfile, "%RECORDER%", strings.TrimPrefix(up.URL, "http://"))
	c := e2e.Start(t, cfg, e2e.WithEnv(gateSecret, "MODEL_SERVER_KEY="+modelServerKey))
	key := allBlocksKey(t, c, "open")

	const workers, each = 12, 40
	var wg sync.WaitGroup
	errs := make(chan error, workers*each)
	for w := range workers {
		wg.Go(func() {
			for i := range each {
				id := fmt.Sprintf("w%02d-r%03d", w, i)
				// Histories from under 1 KiB to about 60 KiB: buffers of
				// several classes, each reused many times.
				history := strings.Repeat("history of "+id+". ", rand.IntN(3000))
				sys, question := "system "+id+" "+history, "question "+id
				var path, body, answerAt string
				if i%2 == 0 {
					path, answerAt = "/v1/chat/completions", "choices.0.message.content"
					b, _ := json.Marshal(map[string]any{"model": "m-open", "max_tokens": 8, "messages": []any{
						map[string]any{"role": "system", "content": sys},
						map[string]any{"role": "user", "content": question}}})
					body = string(b)
				} else {
					path, answerAt = "/compat/v1/messages", "content.0.text"
					b, _ := json.Marshal(map[string]any{"model": "m-open", "max_tokens": 8, "system": sys,
						"messages": []any{map[string]any{"role": "user", "content": []any{map[string]any{"type": "text", "text": question}}}}})
					body = string(b)
				}
				req, _ := http.NewRequest(http.MethodPost, c.URL()+path, strings.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("X-Api-Key", key)
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					errs <- fmt.Errorf("%s: %v", id, err)
					return
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if got, want := gjson.GetBytes(b, answerAt).Str, sys+"|"+question; resp.StatusCode != http.StatusOK || got != want {
					errs <- fmt.Errorf("%s %s: %s, the model server got %.80q…, want %.80q…", id, path, resp.Status, got, want)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
