package e2e_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go"
	antoption "github.com/anthropics/anthropic-sdk-go/option"
	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"
)

// claudeCodeCases sends the requests captured from Claude Code 2.1.328 — as
// it sends them: ?beta=true, its anthropic-beta list, system-role messages,
// adaptive thinking, output_config, context_management, cache_control,
// deferred tools, a thinking block handed back — unstreamed and streamed,
// and checks that the answer is a message with reasoning, whatever the
// upstream speaks.
func claudeCodeCases(t *testing.T, ms *anthropic.MessageService, viaChat bool) {
	m, _ := filepath.Glob(filepath.Join("..", "..", "translate", "testdata", "clients", "claude-code-*.json"))
	if len(m) < 2 {
		t.Fatalf("Claude Code fixtures: %v", m)
	}
	for _, p := range m {
		raw, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		fx := gjson.ParseBytes(raw)
		body := fx.Get("body").Raw
		if !strings.HasSuffix(fx.Get("path").Str, "?beta=true") {
			t.Fatalf("%s: path %s", p, fx.Get("path").Str)
		}
		opts := []antoption.RequestOption{
			antoption.WithQuery("beta", "true"),
			antoption.WithHeader("anthropic-beta", fx.Get("headers.anthropic-beta").Str),
		}
		t.Run(filepath.Base(p), func(t *testing.T) {
			whole, err := sjson.Set(body, "stream", false)
			if err != nil {
				t.Fatal(err)
			}
			resp, err := ms.New(ctxT(t), anthropic.MessageNewParams{},
				append(opts, antoption.WithRequestBody("application/json", []byte(whole)))...)
			if err != nil {
				t.Fatal(err)
			}
			stream := ms.NewStreaming(ctxT(t), anthropic.MessageNewParams{},
				append(opts, antoption.WithRequestBody("application/json", []byte(body)))...)
			defer stream.Close()
			var acc anthropic.Message
			for stream.Next() {
				if err := acc.Accumulate(stream.Current()); err != nil {
					t.Fatal(err)
				}
			}
			if err := stream.Err(); err != nil {
				t.Fatal(err)
			}
			if !gjson.Get(body, "thinking").Exists() {
				// No reasoning asked (Claude Code's session-title request): a text answer.
				for _, msg := range []*anthropic.Message{resp, &acc} {
					if len(msg.Content) == 0 || msg.Content[0].Type != "text" || msg.Usage.OutputTokens < 1 {
						t.Fatalf("via chat %v: content %s", viaChat, msg.RawJSON())
					}
				}
				return
			}
			for _, msg := range []*anthropic.Message{resp, &acc} {
				if len(msg.Content) < 2 || msg.Content[0].Type != "thinking" || msg.Content[0].Signature == "" {
					t.Fatalf("via chat %v: content %s", viaChat, msg.RawJSON())
				}
				if msg.Model != gjson.Get(body, "model").Str || msg.Usage.OutputTokens < 1 {
					t.Errorf("model %s, usage %s", msg.Model, msg.Usage.RawJSON())
				}
			}
			if acc.Content[0].Signature != resp.Content[0].Signature || acc.Content[0].Thinking != resp.Content[0].Thinking {
				t.Errorf("streamed thinking %s, whole %s", acc.Content[0].RawJSON(), resp.Content[0].RawJSON())
			}
		})
	}
}
