package simulator

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
	"github.com/timeblock/timeblock/translate"
)

// The simulator, as either upstream, takes what Claude Code 2.1.328 sends
// once translated: system-role messages between turns, adaptive thinking
// with output_config, context_management, cache_control, deferred tools and
// thinking blocks handed back (signed or not).
func TestSimulatorTakesTodaysMessages(t *testing.T) {
	s := newTestSimulator(t, Config{})
	m, _ := filepath.Glob(filepath.Join("..", "translate", "testdata", "clients", "claude-code-*.json"))
	if len(m) < 2 {
		t.Fatalf("Claude Code fixtures: %v", m)
	}
	var bodies []string
	for _, p := range m {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		bodies = append(bodies, gjson.GetBytes(b, "body").Raw)
	}
	// A later turn handing back thinking blocks without a signature and with
	// one Timeblock made.
	for _, sig := range []string{``, `dGItdGhrAAERRERERERERA==`} {
		bodies = append(bodies, `{"model":"m","max_tokens":2000,"stream":false,"thinking":{"type":"adaptive","display":"omitted"},"output_config":{"effort":"low"},`+
			`"messages":[{"role":"user","content":"w?"},{"role":"assistant","content":[{"type":"thinking","thinking":"t","signature":"`+sig+`"},`+
			`{"type":"tool_use","id":"toolu_1","name":"w","input":{}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":"ok"}]}],`+
			`"tools":[{"name":"w","input_schema":{"type":"object"}}]}`)
	}
	for i, body := range bodies {
		for _, up := range []translate.Format{translate.Messages, translate.Chat} {
			for _, stream := range []bool{false, true} {
				out, _, terr := translate.TranslateRequest(translate.Messages, []byte(body), &translate.Config{Upstream: up}, nil)
				if terr != nil {
					t.Fatalf("body %d → %v: %v", i, up, terr)
				}
				doc := string(out)
				doc = strings.Replace(doc, `"stream":true`, `"stream":false`, 1)
				if stream {
					doc = strings.Replace(doc, `"stream":false`, `"stream":true`, 1)
				}
				resp := simPost(t, s, up.Path(), doc)
				// Reasoning, when asked for (adaptive thinking), comes back;
				// Claude Code's title requests ask for none.
				if !gjson.Get(body, "thinking").Exists() {
					if !strings.Contains(resp, "Simulated reply") && !strings.Contains(resp, `"text_delta"`) && !strings.Contains(resp, `"delta":{"content":"`) {
						t.Errorf("body %d, %v upstream, stream %v: no reply in %.300s", i, up, stream, resp)
					}
					continue
				}
				var thought bool
				if stream {
					thought = strings.Contains(resp, `"thinking_delta"`) || strings.Contains(resp, `"reasoning_content"`)
				} else {
					thought = gjson.Get(resp, `content.#(type=="thinking")`).Exists() || gjson.Get(resp, "choices.0.message.reasoning_content").Exists()
				}
				if !thought {
					t.Errorf("body %d, %v upstream, stream %v: no reasoning in %.300s", i, up, stream, resp)
				}
				if up == translate.Messages && stream && !strings.Contains(resp, "signature_delta") {
					t.Errorf("body %d: the simulator's thinking is not signed: %.300s", i, resp)
				}
			}
		}
	}
}
