package translate

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// responsesHistory builds a Codex-like Responses request of about n bytes:
// long instructions, function and namespace tools, web_search, and rounds
// of user text, reasoning (with encrypted_content), a function call and its
// output.
func responsesHistory(n int) []byte {
	para := "The build failed because the linker could not find the symbol \"init_module\"; check the Makefile and the include paths.\n"
	params := map[string]any{"type": "object", "properties": map[string]any{"cmd": map[string]any{"type": "string"}}, "required": []string{"cmd"}}
	body := map[string]any{
		"model": "qwen3-coder", "stream": true, "instructions": strings.Repeat("You are a careful coding agent. ", 60),
		"tools": []any{
			map[string]any{"type": "function", "name": "run_shell", "description": "Run a shell command", "strict": false, "parameters": params},
			map[string]any{"type": "namespace", "name": "agents", "description": "Sub-agents", "tools": []any{
				map[string]any{"type": "function", "name": "spawn", "description": "Spawn an agent", "parameters": params},
			}},
			map[string]any{"type": "web_search", "external_web_access": false},
		},
		"tool_choice": "auto", "parallel_tool_calls": true, "reasoning": map[string]any{"effort": "high", "summary": "auto"},
		"store": false, "include": []string{"reasoning.encrypted_content"}, "prompt_cache_key": "k",
	}
	enc := encPrefix + base64.StdEncoding.EncodeToString([]byte("Let me look at the Makefile first."))
	var input []any
	for i := 0; ; i++ {
		body["input"] = input
		b, _ := json.Marshal(body)
		if len(b) >= n {
			return b
		}
		id := fmt.Sprintf("call_%04d", i)
		input = append(input,
			map[string]any{"type": "message", "role": "user", "content": []any{map[string]any{"type": "input_text", "text": strings.Repeat(para, 2)}}},
			map[string]any{"type": "reasoning", "id": "rs_1", "summary": []any{map[string]any{"type": "summary_text", "text": "Let me look at the Makefile first."}}, "encrypted_content": enc},
			map[string]any{"type": "function_call", "call_id": id, "name": "run_shell", "arguments": `{"cmd":"cat Makefile"}`},
			map[string]any{"type": "function_call_output", "call_id": id, "output": strings.Repeat(para, 3)},
		)
	}
}

func BenchmarkResponsesRequest(b *testing.B) {
	body := responsesHistory(20 << 10)
	for _, up := range []Format{Chat, Messages} {
		cfg := &Config{Upstream: up}
		b.Run("responses_to_"+up.String(), func(b *testing.B) {
			buf := make([]byte, 0, 64<<10)
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				out, _, err := TranslateValidRequest(Responses, body, cfg, buf[:0])
				if err != nil {
					b.Fatal(err)
				}
				buf = out
			}
		})
	}
}

var responsesBenchCases = []struct {
	name  string
	up    Format
	chunk []byte
}{
	{"chat/text", Chat, chatContentChunk},
	{"chat/reasoning", Chat, chatReasoningChunk},
	// Newer vLLM releases name the field `reasoning`; the pass-through renames it.
	{"chat/reasoning_renamed", Chat, []byte(strings.Replace(string(chatReasoningChunk), `"reasoning_content"`, `"reasoning"`, 1))},
	{"chat/tool_args", Chat, chatToolChunk},
	{"messages/text", Messages, messagesTextEvent},
	{"messages/thinking", Messages, messagesThinkEvent},
}

func BenchmarkResponsesStreamChunk(b *testing.B) { benchClientChunks(b, Responses, true) }

// benchClientChunks times a steady-state upstream chunk of each of
// responsesBenchCases, written for client (a pivot sink). wantOutput: every
// chunk writes something (a Gemini stream writes nothing for some).
func benchClientChunks(b *testing.B, client Format, wantOutput bool) {
	for _, c := range responsesBenchCases {
		b.Run(c.name, func(b *testing.B) {
			s := primed(client, c.up, c.chunk)
			out := make([]byte, 0, 4096)
			b.SetBytes(int64(len(c.chunk)))
			b.ReportAllocs()
			for b.Loop() {
				out = s.Write(out[:0], c.chunk)
			}
			if (wantOutput && len(out) == 0) || s.Done() {
				b.Fatalf("no output, or the stream ended: %q", out)
			}
		})
	}
}

// Steady-state chunks allocate nothing (the items' buffers grow, amortised).
func TestResponsesStreamChunkAllocs(t *testing.T) {
	for _, c := range responsesBenchCases {
		s := primed(Responses, c.up, c.chunk)
		out := make([]byte, 0, 4096)
		if n := testing.AllocsPerRun(200, func() { out = s.Write(out[:0], c.chunk) }); n != 0 {
			t.Errorf("%s: %v allocs per chunk", c.name, n)
		}
		if !strings.Contains(string(out), `"delta":`) {
			t.Errorf("%s: no delta in %s", c.name, out)
		}
	}
}

// A Codex request translates with one allocation: the namespace list.
func TestResponsesRequestAllocs(t *testing.T) {
	body := responsesHistory(20 << 10)
	for _, up := range []Format{Chat, Messages} {
		cfg := &Config{Upstream: up}
		buf := make([]byte, 0, 128<<10)
		n := testing.AllocsPerRun(20, func() {
			out, _, err := TranslateValidRequest(Responses, body, cfg, buf[:0])
			if err != nil {
				t.Fatal(err)
			}
			buf = out
		})
		if n > 1 {
			t.Errorf("%v: %v allocs per request", up, n)
		}
	}
}
