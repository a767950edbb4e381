package translate

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// history builds a realistic agent conversation of about n bytes in the
// client's format: a long system prompt, tools, rounds of text, thinking,
// tool calls and tool results.
func history(client Format, n int) []byte {
	para := "The build failed because the linker could not find the symbol \"init_module\"; check the Makefile and the include paths.\n"
	var msgs []any
	tools := []any{}
	if client == Messages {
		tools = append(tools, map[string]any{"name": "run_shell", "description": "Run a shell command", "input_schema": map[string]any{"type": "object", "properties": map[string]any{"cmd": map[string]any{"type": "string"}}, "required": []string{"cmd"}}})
	} else {
		tools = append(tools, map[string]any{"type": "function", "function": map[string]any{"name": "run_shell", "description": "Run a shell command", "parameters": map[string]any{"type": "object", "properties": map[string]any{"cmd": map[string]any{"type": "string"}}, "required": []string{"cmd"}}}})
	}
	body := map[string]any{"model": "qwen3-coder", "max_tokens": 4096, "stream": true, "tools": tools, "temperature": 0.3}
	sys := strings.Repeat("You are a careful coding agent. ", 60)
	if client == Chat {
		msgs = append(msgs, map[string]any{"role": "system", "content": sys})
	} else {
		body["system"] = []any{map[string]any{"type": "text", "text": sys, "cache_control": map[string]any{"type": "ephemeral"}}}
	}
	for i := 0; ; i++ {
		b, _ := json.Marshal(append(msgs, body))
		if len(b) >= n {
			break
		}
		id := fmt.Sprintf("call_%04d", i)
		user := strings.Repeat(para, 2)
		result := strings.Repeat(para, 3)
		if client == Messages {
			msgs = append(msgs,
				map[string]any{"role": "user", "content": []any{map[string]any{"type": "text", "text": user}}},
				map[string]any{"role": "assistant", "content": []any{
					map[string]any{"type": "thinking", "thinking": "Let me look at the Makefile first.", "signature": "EqQBCgIYAhIM"},
					map[string]any{"type": "text", "text": "I'll check the Makefile."},
					map[string]any{"type": "tool_use", "id": id, "name": "run_shell", "input": map[string]any{"cmd": "cat Makefile"}},
				}},
				map[string]any{"role": "user", "content": []any{map[string]any{"type": "tool_result", "tool_use_id": id, "content": result}}},
			)
		} else {
			msgs = append(msgs,
				map[string]any{"role": "user", "content": user},
				map[string]any{"role": "assistant", "content": "I'll check the Makefile.", "reasoning_content": "Let me look at the Makefile first.",
					"tool_calls": []any{map[string]any{"id": id, "type": "function", "function": map[string]any{"name": "run_shell", "arguments": `{"cmd":"cat Makefile"}`}}}},
				map[string]any{"role": "tool", "tool_call_id": id, "content": result},
			)
		}
	}
	body["messages"] = msgs
	b, _ := json.Marshal(body)
	return b
}

func BenchmarkTranslateRequest(b *testing.B) {
	for _, c := range []struct {
		name   string
		client Format
		up     Format
	}{
		{"messages_to_chat", Messages, Chat},
		{"chat_to_messages", Chat, Messages},
		{"chat_pass", Chat, Chat},
		{"messages_pass", Messages, Messages},
	} {
		body := history(c.client, 20<<10)
		cfg := &Config{Upstream: c.up}
		for _, f := range []struct {
			suffix    string
			translate func(Format, []byte, *Config, []byte) ([]byte, Request, *Error)
		}{{"", TranslateRequest}, {"/gate_checked", TranslateValidRequest}} {
			b.Run(c.name+f.suffix, func(b *testing.B) {
				buf := make([]byte, 0, 64<<10)
				b.SetBytes(int64(len(body)))
				b.ReportAllocs()
				for b.Loop() {
					out, _, err := f.translate(c.client, body, cfg, buf[:0])
					if err != nil {
						b.Fatal(err)
					}
					buf = out
				}
			})
		}
	}
}

// Typical single chunks, as the servers send them.
var (
	chatContentChunk   = []byte("data: {\"id\":\"chatcmpl-9d3f1c2ab47e4c61\",\"object\":\"chat.completion.chunk\",\"created\":1732280000,\"model\":\"Qwen/Qwen3-8B\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\" the linker\"},\"logprobs\":null,\"finish_reason\":null}]}\n\n")
	chatReasoningChunk = []byte("data: {\"id\":\"chatcmpl-9d3f1c2ab47e4c61\",\"object\":\"chat.completion.chunk\",\"created\":1732280000,\"model\":\"Qwen/Qwen3-8B\",\"choices\":[{\"index\":0,\"delta\":{\"reasoning_content\":\" so the\\nsymbol\"},\"logprobs\":null,\"finish_reason\":null}]}\n\n")
	chatToolChunk      = []byte("data: {\"id\":\"chatcmpl-9d3f1c2ab47e4c61\",\"object\":\"chat.completion.chunk\",\"created\":1732280000,\"model\":\"Qwen/Qwen3-8B\",\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"make \\\"\"}}]},\"logprobs\":null,\"finish_reason\":null}]}\n\n")
	chatThinkTagChunk  = []byte("data: {\"id\":\"chatcmpl-9d3f1c2ab47e4c61\",\"object\":\"chat.completion.chunk\",\"created\":1732280000,\"model\":\"Qwen/Qwen3-8B\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\" so 3 < 5\"},\"logprobs\":null,\"finish_reason\":null}]}\n\n")
	messagesTextEvent  = []byte("event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\" the linker\"}}\n\n")
	messagesThinkEvent = []byte("event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"thinking_delta\",\"thinking\":\" so the\\nsymbol\"}}\n\n")
)

// primed returns a Stream that has seen the start of a response, so that
// the chunk under test is a steady-state one.
func primed(client, up Format, chunk []byte) *Stream {
	cfg := &Config{Upstream: up}
	s := NewStream(client, up, Request{Stream: true, IncludeUsage: true}, cfg)
	var out []byte
	if up == Chat {
		out = s.Write(out, []byte("data: {\"id\":\"chatcmpl-9d3f\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"},\"finish_reason\":null}]}\n\n"))
		if chunk[0] == 'd' && strings.Contains(string(chunk), "tool_calls") {
			out = s.Write(out, []byte("data: {\"id\":\"chatcmpl-9d3f\",\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"call_1\",\"type\":\"function\",\"function\":{\"name\":\"run_shell\",\"arguments\":\"{\\\"cmd\\\":\\\"\"}}]}}]}\n\n"))
		}
	} else {
		out = s.Write(out, []byte("event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"content\":[],\"model\":\"m\",\"usage\":{\"input_tokens\":10,\"output_tokens\":1}}}\n\n"))
		typ := "text"
		if strings.Contains(string(chunk), "thinking_delta") {
			typ = "thinking"
		}
		out = s.Write(out, []byte("event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\""+typ+"\",\""+typ+"\":\"\"}}\n\n"))
	}
	s.Write(out, chunk) // the first copy may open a block
	return s
}

var streamBenchCases = []struct {
	name       string
	client, up Format
	chunk      []byte
}{
	{"chat_to_messages/text", Messages, Chat, chatContentChunk},
	{"chat_to_messages/reasoning", Messages, Chat, chatReasoningChunk},
	{"chat_to_messages/tool_args", Messages, Chat, chatToolChunk},
	{"chat_pass/text", Chat, Chat, chatContentChunk},
	{"chat_pass/reasoning", Chat, Chat, chatReasoningChunk},
	{"chat_pass/text_with_lt", Chat, Chat, chatThinkTagChunk},
	{"messages_to_chat/text", Chat, Messages, messagesTextEvent},
	{"messages_to_chat/thinking", Chat, Messages, messagesThinkEvent},
	{"messages_pass/text", Messages, Messages, messagesTextEvent},
	{"messages_pass/thinking", Messages, Messages, messagesThinkEvent},
}

func BenchmarkStreamChunk(b *testing.B) {
	for _, c := range streamBenchCases {
		b.Run(c.name, func(b *testing.B) {
			s := primed(c.client, c.up, c.chunk)
			out := make([]byte, 0, 4096)
			b.SetBytes(int64(len(c.chunk)))
			b.ReportAllocs()
			for b.Loop() {
				out = s.Write(out[:0], c.chunk)
			}
			if len(out) == 0 || s.Done() {
				b.Fatalf("no output: %q", out)
			}
		})
	}
}

// BenchmarkStreamWhole runs a whole recorded response through a Stream,
// chunked the way the upstream sent it.
func BenchmarkStreamWhole(b *testing.B) {
	for _, c := range []struct {
		name, file string
		client, up Format
	}{
		{"vllm_to_messages", "vllm_reasoning_tools", Messages, Chat},
		{"anthropic_to_chat", "anthropic_thinking_tools", Chat, Messages},
	} {
		in := readFile(b, "testdata/streams/"+c.file+".sse")
		var events [][]byte
		for _, e := range strings.SplitAfter(string(in), "\n\n") {
			events = append(events, []byte(e))
		}
		b.Run(c.name, func(b *testing.B) {
			cfg := &Config{Upstream: c.up}
			s := new(Stream)
			out := make([]byte, 0, 16<<10)
			b.SetBytes(int64(len(in)))
			b.ReportAllocs()
			for b.Loop() {
				s.Reset(c.client, c.up, Request{Stream: true, IncludeUsage: true}, cfg)
				out = out[:0]
				for _, e := range events {
					out = s.Write(out, e)
				}
				out = s.Close(out)
			}
		})
	}
}

// Steady-state chunks allocate nothing.
func TestStreamChunkAllocs(t *testing.T) {
	for _, c := range streamBenchCases {
		s := primed(c.client, c.up, c.chunk)
		out := make([]byte, 0, 4096)
		if n := testing.AllocsPerRun(200, func() { out = s.Write(out[:0], c.chunk) }); n != 0 {
			t.Errorf("%s: %v allocs per chunk", c.name, n)
		}
	}
}

// The codec table's indirect call costs a whole answer no allocation: as
// many as the pair's writer called directly (a pointer handed to a function
// of the table would escape, one more per answer).
func TestResponseTableAllocs(t *testing.T) {
	chat := readFile(t, "testdata/responses/llamacpp_think_inline.json")
	messages := readFile(t, "testdata/responses/anthropic_message.json")
	var cfg Config
	for _, c := range []struct {
		client, upstream Format
		body             []byte
		direct           func(dst []byte, s string, prefilled bool) []byte
	}{
		{Chat, Chat, chat, passChatResponse}, {Messages, Chat, chat, chatResponseToMessages},
		{Chat, Messages, messages, messagesResponseToChat}, {Messages, Messages, messages, passMessagesResponse},
	} {
		out := make([]byte, 0, 16<<10)
		s := trimJSON(string(c.body))
		direct := testing.AllocsPerRun(100, func() { out = c.direct(out[:0], s, false) })
		viaTable := testing.AllocsPerRun(100, func() {
			out, _ = TranslateResponse(c.client, c.upstream, c.body, Request{Reasoning: true}, &cfg, out[:0])
		})
		if viaTable > direct {
			t.Errorf("%s from %s: %v allocs per answer through the table, %v directly", c.client, c.upstream, viaTable, direct)
		}
	}
}
