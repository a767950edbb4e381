package simulator

// Tests of the simulator's "call tool" instruction, which lets a prompt pick
// the tool an agent (Claude Code, Codex) offers among many, and of how it
// reads a turn that such agents end with system messages.

import (
	"strings"
	"testing"

	"github.com/tidwall/gjson"
)

// agentToolsMessages and agentToolsChat offer an Agent tool first, as Claude
// Code does, so that the default pick is not the instructed one.
const agentToolsMessages = `[{"name":"Agent","input_schema":{"type":"object","properties":{"prompt":{"type":"string"}}}},` +
	`{"name":"Read","input_schema":{"type":"object","properties":{"file_path":{"type":"string"},"limit":{"type":"integer"}},"required":["file_path"]}}]`

const agentToolsChat = `[{"type":"function","function":{"name":"Agent","parameters":{"type":"object","properties":{"prompt":{"type":"string"}}}}},` +
	`{"type":"function","function":{"name":"exec_command","parameters":{"type":"object","properties":{"cmd":{"type":"string"}},"required":["cmd"]}}}]`

// simMessagesOutcome returns the tool call of a non-streamed messages response, or
// its text when there is none.
func simMessagesOutcome(t *testing.T, s *Server, body string) (name, input, text string) {
	t.Helper()
	resp := simPost(t, s, "/v1/messages", body)
	gjson.Get(resp, "content").ForEach(func(_, b gjson.Result) bool {
		switch b.Get("type").Str {
		case "tool_use":
			name, input = b.Get("name").Str, b.Get("input").Raw
		case "text":
			text = b.Get("text").Str
		}
		return true
	})
	if name != "" && gjson.Get(resp, "stop_reason").Str != "tool_use" {
		t.Errorf("stop_reason = %s with a tool call", gjson.Get(resp, "stop_reason").Raw)
	}
	return name, input, text
}

func simChatOutcome(t *testing.T, s *Server, body string) (name, args, text string) {
	t.Helper()
	resp := simPost(t, s, "/v1/chat/completions", body)
	msg := gjson.Get(resp, "choices.0.message")
	return msg.Get("tool_calls.0.function.name").Str, msg.Get("tool_calls.0.function.arguments").Str, msg.Get("content").Str
}

func TestSimulatorCallInstruction(t *testing.T) {
	s := newTestSimulator(t, Config{})

	t.Run("messages, Claude Code's shape", func(t *testing.T) {
		// The prompt is the user message's last text block; a system message
		// follows it, as Claude Code 2.1 sends.
		body := `{"model":"m","max_tokens":1000,"thinking":{"type":"adaptive"},"tools":` + agentToolsMessages + `,"messages":[` +
			`{"role":"user","content":[{"type":"text","text":"<system-reminder>be nice</system-reminder>"},` +
			`{"type":"text","text":"Please call tool Read with {\"file_path\": \"/tmp/w/notes.txt\"} and tell me."}]},` +
			`{"role":"system","content":"# Environment"}]}`
		name, input, _ := simMessagesOutcome(t, s, body)
		if name != "Read" {
			t.Fatalf("tool = %q, want Read", name)
		}
		jsonEqual(t, "input", input, `{"file_path":"/tmp/w/notes.txt"}`)

		// Streamed, the arguments arrive whole across the deltas.
		stream := simPost(t, s, "/v1/messages", strings.Replace(body, `{"model"`, `{"stream":true,"model"`, 1))
		var args strings.Builder
		for _, ev := range parseSSE(t, stream) {
			if ev.name == "content_block_delta" && gjson.Get(ev.data, "delta.type").Str == "input_json_delta" {
				args.WriteString(gjson.Get(ev.data, "delta.partial_json").Str)
			}
		}
		jsonEqual(t, "streamed input", args.String(), `{"file_path":"/tmp/w/notes.txt"}`)
	})

	t.Run("chat, Codex's shape", func(t *testing.T) {
		body := `{"model":"m","tools":` + agentToolsChat + `,"messages":[{"role":"system","content":"You are Codex"},` +
			`{"role":"user","content":[{"type":"text","text":"<environment_context/>"}]},` +
			`{"role":"user","content":[{"type":"text","text":"call tool exec_command with {\"cmd\":\"cat notes.txt\",\"opts\":{\"x\":[1,\"}\"]}}"}]}]}`
		name, args, _ := simChatOutcome(t, s, body)
		if name != "exec_command" {
			t.Fatalf("tool = %q, want exec_command", name)
		}
		jsonEqual(t, "arguments", args, `{"cmd":"cat notes.txt","opts":{"x":[1,"}"]}}`)
	})

	t.Run("without arguments", func(t *testing.T) {
		body := `{"model":"m","tools":` + agentToolsChat + `,"messages":[{"role":"user","content":"call tool exec_command, please"}]}`
		name, args, _ := simChatOutcome(t, s, body)
		if name != "exec_command" {
			t.Fatalf("tool = %q, want exec_command", name)
		}
		// Sample arguments from the schema: strings echo the last message.
		jsonEqual(t, "arguments", args, `{"cmd":"call tool exec_command, please"}`)
	})

	t.Run("invalid arguments", func(t *testing.T) {
		body := `{"model":"m","tools":` + agentToolsChat + `,"messages":[{"role":"user","content":"call tool exec_command with {cmd: ls}"}]}`
		name, args, _ := simChatOutcome(t, s, body)
		if name != "exec_command" || !gjson.Valid(args) || gjson.Get(args, "cmd").Str != "call tool exec_command with {cmd: ls}" {
			t.Fatalf("tool %q, arguments %s; want exec_command with sample arguments", name, args)
		}
	})

	t.Run("a tool not offered", func(t *testing.T) {
		body := `{"model":"m","tools":` + agentToolsChat + `,"messages":[{"role":"user","content":"call tool Write with {}"}]}`
		name, _, text := simChatOutcome(t, s, body)
		if name != "" || !strings.HasSuffix(text, ": call tool Write with {}") {
			t.Fatalf("tool %q, text %q; want a text reply", name, text)
		}
	})

	t.Run("tool_choice wins", func(t *testing.T) {
		body := `{"model":"m","tool_choice":{"type":"function","function":{"name":"Agent"}},"tools":` + agentToolsChat +
			`,"messages":[{"role":"user","content":"call tool exec_command with {\"cmd\":\"ls\"}"}]}`
		if name, _, _ := simChatOutcome(t, s, body); name != "Agent" {
			t.Fatalf("tool = %q, want Agent (named by tool_choice)", name)
		}
		body = strings.Replace(body, `{"type":"function","function":{"name":"Agent"}}`, `"none"`, 1)
		if name, _, _ := simChatOutcome(t, s, body); name != "" {
			t.Fatalf("tool = %q with tool_choice none", name)
		}
	})

	t.Run("an earlier turn's instruction", func(t *testing.T) {
		// The instruction was answered; the new user message asks nothing,
		// so the default pick applies.
		body := `{"model":"m","tools":` + agentToolsChat + `,"messages":[{"role":"user","content":"call tool exec_command with {\"cmd\":\"ls\"}"},` +
			`{"role":"assistant","content":"done"},{"role":"user","content":"go on"}]}`
		if name, _, _ := simChatOutcome(t, s, body); name != "Agent" {
			t.Fatalf("tool = %q, want the first tool", name)
		}
	})
}

func TestSimulatorAfterToolResult(t *testing.T) {
	s := newTestSimulator(t, Config{})

	t.Run("messages, then a system message", func(t *testing.T) {
		body := `{"model":"m","max_tokens":1000,"tools":` + agentToolsMessages + `,"messages":[` +
			`{"role":"user","content":"call tool Read with {\"file_path\":\"/tmp/w/notes.txt\"}"},` +
			`{"role":"system","content":"# Environment"},` +
			`{"role":"assistant","content":[{"type":"tool_use","id":"toolu_1","name":"Read","input":{"file_path":"/tmp/w/notes.txt"}}]},` +
			`{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":"1\tmarker-42\n2\t"}]},` +
			`{"role":"system","content":"a reminder"}]}`
		name, _, text := simMessagesOutcome(t, s, body)
		if name != "" {
			t.Fatalf("called %s again after its result", name)
		}
		if want := expand(body, "Simulated reply $D: 1 marker-42 2"); text != want {
			t.Fatalf("text = %q, want %q", text, want)
		}
	})

	t.Run("chat, then a user message", func(t *testing.T) {
		// A translator may carry text sent beside a tool result as a user
		// message after the tool message: still the model's turn to answer,
		// and the tool result is what it echoes.
		body := `{"model":"m","tools":` + agentToolsChat + `,"messages":[` +
			`{"role":"user","content":"call tool exec_command with {\"cmd\":\"cat notes.txt\"}"},` +
			`{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"exec_command","arguments":"{}"}}]},` +
			`{"role":"tool","tool_call_id":"call_1","content":"Output:\nmarker-42"},` +
			`{"role":"user","content":"<system-reminder>ok</system-reminder>"}]}`
		name, _, text := simChatOutcome(t, s, body)
		if name != "" {
			t.Fatalf("called %s again after its result", name)
		}
		if want := expand(body, "Simulated reply $D: Output: marker-42"); text != want {
			t.Fatalf("text = %q, want %q", text, want)
		}
	})
}

func TestSimulatorEchoSkipsSystem(t *testing.T) {
	s := newTestSimulator(t, Config{})
	body := `{"model":"m","messages":[{"role":"user","content":"hello there"},{"role":"system","content":"# Environment"},{"role":"developer","content":"more"}]}`
	_, _, text := simChatOutcome(t, s, body)
	if want := expand(body, "Simulated reply $D: hello there"); text != want {
		t.Fatalf("text = %q, want %q", text, want)
	}
}

func TestSimParseCall(t *testing.T) {
	for _, tc := range []struct {
		text, name, args string
		ok               bool
	}{
		{"call tool Read", "Read", "", true},
		{"call tool Read.", "Read", "", true},
		{`call tool Read with {"a":"}\"{"} then stop`, "Read", `{"a":"}\"{"}`, true},
		{"call tool Read with\n{\n \"a\": [1, {\"b\": 2}]\n}", "Read", "{\n \"a\": [1, {\"b\": 2}]\n}", true},
		{`call tool Read with {"a":1`, "Read", "", true},
		{`call tool Read with {"a":}`, "Read", "", true},
		{`call tool Read with [1]`, "Read", "", true},
		{`first call tool A with {"x":1}, then call tool B with {"y":2}`, "B", `{"y":2}`, true},
		{"call tool ", "", "", false},
		{"please call Read", "", "", false},
	} {
		name, args, ok := simParseCall(tc.text)
		if name != tc.name || args != tc.args || ok != tc.ok {
			t.Errorf("simParseCall(%q) = %q, %q, %v; want %q, %q, %v", tc.text, name, args, ok, tc.name, tc.args, tc.ok)
		}
	}
}
