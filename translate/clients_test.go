package translate

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
)

// Every request captured from the pinned clients (testdata/clients: Claude
// Code 2.1.328 in -p and in interactive sessions, Codex CLI 0.169.0 exec)
// translates toward each upstream format and dialect: nothing a client
// really sends is refused. Issue 31: an interactive Claude Code session's
// ToolSearch result (tool_reference blocks) and its Read of a PDF (a base64
// document in a tool_result) were refused toward a chat upstream.
func TestClientCaptures(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join("testdata", "clients", "*.json"))
	if len(files) < 10 {
		t.Fatalf("%d captures in testdata/clients", len(files))
	}
	cfgs := []Config{
		{Upstream: Chat},
		{Upstream: Chat, Reasoning: DialectChatTemplateKwargs},
		{Upstream: Chat, Reasoning: DialectEffortScale},
		{Upstream: Messages},
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		body := gjson.GetBytes(b, "body")
		client := Messages
		if p := gjson.GetBytes(b, "path").Str; strings.Contains(p, "/responses") {
			client = Responses
		}
		for _, cfg := range cfgs {
			out, _, e := TranslateRequest(client, []byte(body.Raw), &cfg, nil)
			if e != nil {
				t.Errorf("%s to %v (%v): %v", filepath.Base(f), cfg.Upstream, cfg.Reasoning, e)
				continue
			}
			switch {
			case client == Messages && cfg.Upstream == Messages:
				jsonEq(t, filepath.Base(f)+" passed", string(out), body.Raw)
			case client == Messages:
				// What the chat format cannot carry is gone: hints, the
				// billing header, auto mode's safeguards.
				for _, s := range []string{"cache_control", "defer_loading", "clear_thinking", "x-anthropic-billing-header",
					"safeguards", "dangerous_tool_use", "signature", `"thinking"`, "output_config"} {
					if strings.Contains(string(out), s) {
						t.Errorf("%s to %v (%v): %q reached the chat upstream", filepath.Base(f), cfg.Upstream, cfg.Reasoning, s)
					}
				}
			}
		}
	}
}

// Claude Code's ToolSearch answers with tool_reference blocks naming the
// deferred tools it loaded (testdata/clients/claude-code-2.1.328-
// interactive-tool-search.json). A chat upstream is offered every tool
// (defer_loading is dropped), so the tool message says which tools are now
// loaded; a messages upstream gets the blocks unchanged.
func TestToolReferenceResult(t *testing.T) {
	body := `{"model":"m","max_tokens":9,"tools":[{"name":"ToolSearch","input_schema":{"type":"object"}},` +
		`{"name":"WebFetch","input_schema":{"type":"object"},"defer_loading":true}],"messages":[` +
		`{"role":"user","content":"Fetch"},` +
		`{"role":"assistant","content":[{"type":"tool_use","id":"toolu_1","name":"ToolSearch","input":{"query":"select:WebFetch,WebSearch"}}]},` +
		`{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","cache_control":{"type":"ephemeral"},` +
		`"content":[{"type":"tool_reference","tool_name":"WebFetch"},{"type":"tool_reference","tool_name":"WebSearch"}]}]}]}`
	out, _ := mustTranslate(t, Messages, body, Config{Upstream: Chat})
	tool := out.Get(`messages.#(role=="tool")`)
	wantEq(t, "tool message", tool.Get("content").String(), "Tool loaded: WebFetch\nTool loaded: WebSearch")
	wantEq(t, "tools offered", out.Get("tools.#.function.name").Raw, `["ToolSearch","WebFetch"]`)
	if n := len(out.Get("messages").Array()); n != 3 {
		t.Errorf("%d messages, want 3: %s", n, out.Get("messages").Raw)
	}
	pass, _ := mustTranslate(t, Messages, body, Config{Upstream: Messages})
	jsonEq(t, "messages (pass)", pass.Get("messages").Raw, gjson.Get(body, "messages").Raw)

	bad := strings.Replace(body, `"tool_name":"WebSearch"`, `"tool_name":7`, 1)
	if _, _, e := TranslateRequest(Messages, []byte(bad), &Config{Upstream: Chat}, nil); e == nil ||
		!strings.Contains(e.Message, "messages.2.content.0.content.1.tool_name") {
		t.Errorf("a tool_reference without a tool_name string: %v", e)
	}
}

// Claude Code's Read of a PDF returns [text, base64 document] in its
// tool_result (testdata/clients/claude-code-2.1.328-interactive-pdf-
// result.json). A chat tool message holds text only: the text stays there
// and the document follows in a user message as a file part, as a tool's
// images do.
func TestDocumentToolResult(t *testing.T) {
	body := `{"model":"m","max_tokens":9,"messages":[` +
		`{"role":"user","content":"Doc"},` +
		`{"role":"assistant","content":[{"type":"tool_use","id":"toolu_1","name":"Read","input":{"file_path":"/w/doc.pdf"}}]},` +
		`{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":[` +
		`{"type":"text","text":"PDF file read: /w/doc.pdf (587 bytes)"},` +
		`{"type":"document","source":{"type":"base64","media_type":"application/pdf","data":"JVBERi0xLjQK"}}]},` +
		`{"type":"text","text":"Summarise it."}]}]}`
	out, _ := mustTranslate(t, Messages, body, Config{Upstream: Chat})
	msgs := out.Get("messages").Array()
	if len(msgs) != 4 {
		t.Fatalf("%d messages, want 4: %s", len(msgs), out.Get("messages").Raw)
	}
	wantEq(t, "tool message", msgs[2].Get("content").String(), "PDF file read: /w/doc.pdf (587 bytes)")
	jsonEq(t, "user message", msgs[3].Raw, `{"role":"user","content":[`+
		`{"type":"file","file":{"filename":"document.pdf","file_data":"data:application/pdf;base64,JVBERi0xLjQK"}},`+
		`{"type":"text","text":"Summarise it."}]}`)

	// Alone, the document still reaches the model, and the tool message says where.
	alone := strings.Replace(body, `{"type":"text","text":"PDF file read: /w/doc.pdf (587 bytes)"},`, "", 1)
	alone = strings.Replace(alone, `,{"type":"text","text":"Summarise it."}`, "", 1)
	out, _ = mustTranslate(t, Messages, alone, Config{Upstream: Chat})
	msgs = out.Get("messages").Array()
	if len(msgs) != 4 {
		t.Fatalf("%d messages, want 4: %s", len(msgs), out.Get("messages").Raw)
	}
	wantEq(t, "tool message", msgs[2].Get("content").String(), "(see the attached document)")
	wantEq(t, "user message", msgs[3].Get("content.0.type").String(), "file")
}
