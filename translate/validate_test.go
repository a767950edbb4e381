package translate

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
)

// validationPairs are every client format with every upstream.
var validationPairs = [...]struct{ client, up Format }{
	{Chat, Chat}, {Chat, Messages}, {Messages, Messages}, {Messages, Chat}, {Responses, Chat}, {Responses, Messages},
}

// refusedShapes: what each client format refuses, whatever the upstream.
// want is the start of the message (the path it names); fix a word of what
// to send instead, when the message carries one.
var refusedShapes = map[Format][]struct {
	name, body, want, fix string
}{
	Chat: {
		// The five findings of issue 14.
		{"server-side tool", `{"model":"m","messages":[{"role":"user","content":"hi"}],"tools":[{"type":"web_search_20250305"}]}`, "tools.0: server-side tool type \"web_search_20250305\"", "function tools"},
		{"role evil", `{"model":"m","messages":[{"role":"evil","content":"hi"}]}`, "messages.0.role: must be", "developer"},
		{"messages of numbers", `{"model":"m","messages":[1,2,3]}`, "messages.0: must be an object", "role"},
		{"object content", `{"model":"m","messages":[{"role":"user","content":{"a":1}}]}`, "messages.0.content: must be a string or an array", "parts"},
		{"tools string", `{"model":"m","messages":[{"role":"user","content":"hi"}],"tools":"x"}`, "tools: must be an array", "function"},
		// More of the same.
		{"hosted tool type", `{"model":"m","messages":[],"tools":[{"type":"file_search"}]}`, "tools.0.type: tool type \"file_search\" is not supported", "function tools"},
		{"tool not object", `{"model":"m","messages":[],"tools":[5]}`, "tools.0: must be an object", "function"},
		{"tool without function", `{"model":"m","messages":[],"tools":[{"type":"function"}]}`, "tools.0.function: must be an object", "name"},
		{"tool without name", `{"model":"m","messages":[],"tools":[{"type":"function","function":{"parameters":{}}}]}`, "tools.0.function.name: must be a non-empty string", ""},
		{"tool parameters", `{"model":"m","messages":[],"tools":[{"type":"function","function":{"name":"f","parameters":"x"}}]}`, "tools.0.function.parameters: must be", "schema"},
		{"tool_choice number", `{"model":"m","messages":[],"tool_choice":5}`, "tool_choice: must be none, auto, required", ""},
		{"tool_choice word", `{"model":"m","messages":[],"tool_choice":"any"}`, "tool_choice: must be none, auto, required", ""},
		{"tool_choice function", `{"model":"m","messages":[],"tool_choice":{"type":"function","function":{}}}`, "tool_choice.function.name: must be a string", ""},
		{"role missing", `{"model":"m","messages":[{"content":"hi"}]}`, "messages.0.role: must be", "user"},
		{"role number", `{"model":"m","messages":[{"role":1,"content":"hi"}]}`, "messages.0.role: must be", "user"},
		{"user content null", `{"model":"m","messages":[{"role":"user","content":null}]}`, "messages.0.content: must be a string or an array", ""},
		{"assistant content number", `{"model":"m","messages":[{"role":"assistant","content":5}]}`, "messages.0.content: must be a string, an array of content parts or null", ""},
		{"part not object", `{"model":"m","messages":[{"role":"user","content":["hi"]}]}`, "messages.0.content.0: must be an object", "type"},
		{"part without type", `{"model":"m","messages":[{"role":"user","content":[{"text":"hi"}]}]}`, "messages.0.content.0.type: must be a string", "text"},
		{"text part number", `{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":5}]}]}`, "messages.0.content.0.text: must be a string", ""},
		{"image part url", `{"model":"m","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":5}}]}]}`, "messages.0.content.0.image_url: must be an object {url}", "URL"},
		{"audio part", `{"model":"m","messages":[{"role":"user","content":[{"type":"input_audio","input_audio":"x"}]}]}`, "messages.0.content.0.input_audio: must be an object {data, format}", ""},
		{"image in system", `{"model":"m","messages":[{"role":"system","content":[{"type":"image_url","image_url":{"url":"x"}}]}]}`, "messages.0.content.0: system messages may only hold text parts", ""},
		{"tool message without id", `{"model":"m","messages":[{"role":"tool","content":"x"}]}`, "messages.0.tool_call_id: must be a string", ""},
		{"function message without name", `{"model":"m","messages":[{"role":"function","content":"x"}]}`, "messages.0.name: must be a string", ""},
		{"name number", `{"model":"m","messages":[{"role":"user","name":5,"content":"x"}]}`, "messages.0.name: must be a string", ""},
		{"tool_calls object", `{"model":"m","messages":[{"role":"assistant","tool_calls":{}}]}`, "messages.0.tool_calls: must be an array", ""},
		{"tool call without id", `{"model":"m","messages":[{"role":"assistant","tool_calls":[{"type":"function","function":{"name":"f","arguments":"{}"}}]}]}`, "messages.0.tool_calls.0.id: must be a string", ""},
		{"tool call arguments object", `{"model":"m","messages":[{"role":"assistant","tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":{}}}]}]}`, "messages.0.tool_calls.0.function.arguments: must be a string", "JSON"},
		{"tool call without function", `{"model":"m","messages":[{"role":"assistant","tool_calls":[{"id":"c"}]}]}`, "messages.0.tool_calls.0.function: must be an object {name, arguments}", ""},
		{"tool call type", `{"model":"m","messages":[{"role":"assistant","tool_calls":[{"id":"c","type":"web_search","function":{"name":"f"}}]}]}`, "messages.0.tool_calls.0.type: must be function or custom", ""},
		{"n string", `{"model":"m","messages":[],"n":"x"}`, "n: must be a positive integer", "1"},
		{"n zero", `{"model":"m","messages":[],"n":0}`, "n: must be a positive integer", "1"},
		{"temperature high", `{"model":"m","messages":[],"temperature":1.5}`, "temperature: must be between 0 and 1", ""},
		{"top_p type", `{"model":"m","messages":[],"top_p":"x"}`, "top_p: must be a number", ""},
		{"max_tokens negative", `{"model":"m","messages":[],"max_tokens":-1}`, "max_tokens: must be a positive integer", ""},
		{"max_completion_tokens huge", `{"model":"m","messages":[],"max_completion_tokens":1e400}`, "max_completion_tokens: must be a positive integer", ""},
		{"top_logprobs range", `{"model":"m","messages":[],"top_logprobs":21}`, "top_logprobs: must be an integer between 0 and 20", ""},
		{"penalty range", `{"model":"m","messages":[],"presence_penalty":3}`, "presence_penalty: must be between -2 and 2", ""},
		{"seed type", `{"model":"m","messages":[],"seed":"x"}`, "seed: must be an integer", ""},
		{"logprobs type", `{"model":"m","messages":[],"logprobs":"yes"}`, "logprobs: must be a boolean", ""},
		{"parallel type", `{"model":"m","messages":[],"parallel_tool_calls":1}`, "parallel_tool_calls: must be a boolean", ""},
		{"user type", `{"model":"m","messages":[],"user":5}`, "user: must be a string", ""},
		{"metadata type", `{"model":"m","messages":[],"metadata":[]}`, "metadata: must be an object", ""},
		{"response_format type", `{"model":"m","messages":[],"response_format":"json"}`, "response_format: must be an object", "json_object"},
		{"response_format schema", `{"model":"m","messages":[],"response_format":{"type":"json_schema"}}`, "response_format.json_schema: must be an object", "schema"},
		{"stop type", `{"model":"m","messages":[],"stop":5}`, "stop: must be a string or an array of strings", ""},
		{"stream type", `{"model":"m","messages":[],"stream":"yes"}`, "stream: must be a boolean", ""},
		{"stream_options type", `{"model":"m","messages":[],"stream_options":true}`, "stream_options: must be an object", ""},
		{"modalities type", `{"model":"m","messages":[],"modalities":"text"}`, "modalities: must be an array of strings", ""},
		{"web_search_options", `{"model":"m","messages":[],"web_search_options":{}}`, "web_search_options: server-side web search is not supported", "leave"},
		{"effort", `{"model":"m","messages":[],"reasoning_effort":"extreme"}`, "reasoning_effort", ""},
		{"model type", `{"model":5,"messages":[]}`, "model: must be a non-empty string", ""},
		{"messages missing", `{"model":"m"}`, "messages: must be an array", ""},
	},
	Messages: {
		{"server-side tool", `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"hi"}],"tools":[{"type":"web_search_20250305","name":"web_search"}]}`, "tools.0: server-side tool type \"web_search_20250305\"", "client tools"},
		{"role evil", `{"model":"m","max_tokens":5,"messages":[{"role":"evil","content":"hi"}]}`, "messages.0.role: must be user, assistant or system", ""},
		{"messages of numbers", `{"model":"m","max_tokens":5,"messages":[1,2,3]}`, "messages.0: must be an object", "role"},
		{"object content", `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":{"a":1}}]}`, "messages.0.content: must be a string or an array of content blocks", ""},
		{"tools string", `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"hi"}],"tools":"x"}`, "tools: must be an array", "input_schema"},
		{"tool search tool", `{"model":"m","max_tokens":5,"messages":[],"tools":[{"type":"tool_search_tool_regex_20251119","name":"s"}]}`, "tools.0: server-side tool type", ""},
		{"mcp toolset", `{"model":"m","max_tokens":5,"messages":[],"tools":[{"type":"mcp_toolset","mcp_server_name":"s"}]}`, "tools.0: server-side tool type", ""},
		{"tool not object", `{"model":"m","max_tokens":5,"messages":[],"tools":[5]}`, "tools.0: must be an object", "input_schema"},
		{"tool without name", `{"model":"m","max_tokens":5,"messages":[],"tools":[{"input_schema":{}}]}`, "tools.0.name: must be a non-empty string", ""},
		{"tool schema", `{"model":"m","max_tokens":5,"messages":[],"tools":[{"name":"f","input_schema":"x"}]}`, "tools.0.input_schema: must be an object", ""},
		{"tool type number", `{"model":"m","max_tokens":5,"messages":[],"tools":[{"type":5,"name":"f"}]}`, "tools.0.type: must be a string", ""},
		{"tool_choice string", `{"model":"m","max_tokens":5,"messages":[],"tool_choice":"auto"}`, "tool_choice: must be an object", "auto"},
		{"tool_choice type", `{"model":"m","max_tokens":5,"messages":[],"tool_choice":{"type":"sometimes"}}`, "tool_choice.type: must be auto, any, tool or none", ""},
		{"tool_choice name", `{"model":"m","max_tokens":5,"messages":[],"tool_choice":{"type":"tool"}}`, "tool_choice.name: must be a string", ""},
		{"role missing", `{"model":"m","max_tokens":5,"messages":[{"content":"hi"}]}`, "messages.0.role: must be user, assistant or system", ""},
		{"content null", `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":null}]}`, "messages.0.content: must be a string or an array of content blocks", ""},
		{"block not object", `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":["hi"]}]}`, "messages.0.content.0: must be a content block object", "type"},
		{"block without type", `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":[{"text":"hi"}]}]}`, "messages.0.content.0.type: must be a string", "text"},
		{"text block number", `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":[{"type":"text","text":5}]}]}`, "messages.0.content.0.text: must be a string", ""},
		{"image without source", `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":[{"type":"image"}]}]}`, "messages.0.content.0.source: must be an object", ""},
		{"tool_use without id", `{"model":"m","max_tokens":5,"messages":[{"role":"assistant","content":[{"type":"tool_use","name":"f","input":{}}]}]}`, "messages.0.content.0: tool_use needs id and name strings", ""},
		{"tool_use input", `{"model":"m","max_tokens":5,"messages":[{"role":"assistant","content":[{"type":"tool_use","id":"t","name":"f","input":"x"}]}]}`, "messages.0.content.0.input: must be an object", ""},
		{"tool_result id", `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":[{"type":"tool_result","content":"x"}]}]}`, "messages.0.content.0.tool_use_id: must be a string", ""},
		{"tool_result content", `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":5}]}]}`, "messages.0.content.0.content: must be a string or an array", ""},
		{"tool_result inner block", `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":[{"type":"text"}]}]}]}`, "messages.0.content.0.content.0.text: must be a string", ""},
		{"tool_result is_error", `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","is_error":"yes"}]}]}`, "messages.0.content.0.is_error: must be a boolean", ""},
		{"thinking block", `{"model":"m","max_tokens":5,"messages":[{"role":"assistant","content":[{"type":"thinking","thinking":5,"signature":"s"}]}]}`, "messages.0.content.0.thinking: must be a string", ""},
		{"server block in history", `{"model":"m","max_tokens":5,"messages":[{"role":"assistant","content":[{"type":"server_tool_use","id":"s","name":"web_search","input":{}}]}]}`, "messages.0.content.0: server_tool_use blocks belong to server-side tools", "leave"},
		{"system number", `{"model":"m","max_tokens":5,"messages":[],"system":5}`, "system: must be a string or an array of text blocks", ""},
		{"system image", `{"model":"m","max_tokens":5,"messages":[],"system":[{"type":"image","source":{}}]}`, "system.0: only text blocks are allowed in system", ""},
		{"metadata type", `{"model":"m","max_tokens":5,"messages":[],"metadata":"x"}`, "metadata: must be an object", ""},
		{"metadata user", `{"model":"m","max_tokens":5,"messages":[],"metadata":{"user_id":5}}`, "metadata.user_id: must be a string", ""},
		{"max_tokens missing", `{"model":"m","messages":[]}`, "max_tokens: required", ""},
		{"max_tokens string", `{"model":"m","max_tokens":"5","messages":[]}`, "max_tokens: must be a positive integer", ""},
		{"top_k type", `{"model":"m","max_tokens":5,"messages":[],"top_k":"x"}`, "top_k: must be a non-negative integer", ""},
		{"temperature high", `{"model":"m","max_tokens":5,"messages":[],"temperature":2}`, "temperature: must be between 0 and 1", ""},
		{"stop_sequences", `{"model":"m","max_tokens":5,"messages":[],"stop_sequences":[1]}`, "stop_sequences.0: must be a string", ""},
		{"stop_sequences string", `{"model":"m","max_tokens":5,"messages":[],"stop_sequences":"x"}`, "stop_sequences: must be an array of strings", ""},
		{"mcp_servers", `{"model":"m","max_tokens":5,"messages":[],"mcp_servers":[{"type":"url","url":"https://x"}]}`, "mcp_servers: MCP servers are server-side tools", "client tools"},
		{"container", `{"model":"m","max_tokens":5,"messages":[],"container":"c"}`, "container: server-side code execution", "leave"},
		{"thinking type", `{"model":"m","max_tokens":5,"messages":[],"thinking":{"type":"sometimes"}}`, "thinking.type", ""},
		{"service_tier type", `{"model":"m","max_tokens":5,"messages":[],"service_tier":5}`, "service_tier: must be a string", ""},
	},
	Responses: {
		// Hosted tools offered are withdrawn (README); one required is refused.
		{"hosted tool required", `{"model":"m","input":"hi","tools":[{"type":"web_search"}],"tool_choice":{"type":"web_search_preview"}}`, "tool_choice: web_search_preview is a hosted tool", "function tools"},
		{"role evil", `{"model":"m","input":[{"role":"evil","content":"hi"}]}`, "input.0.role: must be", "user"},
		{"input of numbers", `{"model":"m","input":[1,2,3]}`, "input.0: must be an object", ""},
		{"object content", `{"model":"m","input":[{"role":"user","content":{"a":1}}]}`, "input.0.content: must be a string or an array", ""},
		{"tools string", `{"model":"m","input":"hi","tools":"x"}`, "tools: must be an array", ""},
		{"input number", `{"model":"m","input":5}`, "input: must be a string or an array", ""},
		{"hosted item in history", `{"model":"m","input":[{"type":"web_search_call","id":"w","status":"completed"}]}`, "input.0.type: web_search_call items belong to hosted tools", ""},
		{"temperature type", `{"model":"m","input":"hi","temperature":"x"}`, "temperature: must be a number", ""},
		{"max_output_tokens", `{"model":"m","input":"hi","max_output_tokens":0}`, "max_output_tokens: must be a positive integer", ""},
		{"store type", `{"model":"m","input":"hi","store":"no"}`, "store: must be a boolean", ""},
		{"metadata type", `{"model":"m","input":"hi","metadata":[]}`, "metadata: must be an object", ""},
		{"user type", `{"model":"m","input":"hi","user":5}`, "user: must be a string", ""},
		{"previous_response_id", `{"model":"m","input":"hi","previous_response_id":"r"}`, "previous_response_id: Timeblock keeps no response state", "whole conversation"},
		{"instructions type", `{"model":"m","input":"hi","instructions":5}`, "instructions: must be a string", ""},
	},
}

// TestValidationEveryPath: each refused shape is a 400 invalid_request_error
// on every path of its client format, with one message whatever the
// upstream, naming the member, rendered in the client's error format.
func TestValidationEveryPath(t *testing.T) {
	for _, p := range validationPairs {
		for _, c := range refusedShapes[p.client] {
			t.Run(p.client.String()+"->"+p.up.String()+"/"+c.name, func(t *testing.T) {
				cfg := &Config{Upstream: p.up}
				out, _, err := TranslateRequest(p.client, []byte(c.body), cfg, nil)
				if err == nil {
					t.Fatalf("accepted; sent upstream as %s", out)
				}
				if err.Status != 400 || err.Kind != InvalidRequest {
					t.Fatalf("got %d %s, want 400 invalid_request_error", err.Status, err.Kind)
				}
				if !strings.HasPrefix(err.Message, c.want) || !strings.Contains(err.Message, c.fix) {
					t.Errorf("message %q, want it to start with %q and say %q", err.Message, c.want, c.fix)
				}
				// The same refusal to the other upstream: validation is the
				// client format's, not the path's.
				other := Chat
				if p.up == Chat {
					other = Messages
				}
				if _, _, oerr := TranslateRequest(p.client, []byte(c.body), &Config{Upstream: other}, nil); oerr == nil || oerr.Message != err.Message {
					t.Errorf("to a %v upstream: %v, want %q", other, oerr, err.Message)
				}
				// In the endpoint's own error format.
				body := err.Body(p.client)
				switch p.client {
				case Messages:
					if gjson.GetBytes(body, "type").Str != "error" || gjson.GetBytes(body, "error.type").Str != "invalid_request_error" ||
						gjson.GetBytes(body, "error.message").Str != err.Message {
						t.Errorf("messages error body %s", body)
					}
				default:
					if gjson.GetBytes(body, "error.type").Str != "invalid_request_error" || gjson.GetBytes(body, "error.message").Str != err.Message {
						t.Errorf("openai error body %s", body)
					}
				}
			})
		}
	}
}

// acceptedShapes: valid requests of today's SDKs (openai-go v3 chat
// completion params, anthropic-sdk-go message params) and of servers'
// extensions, which a pass-through must let through unchanged.
var acceptedShapes = map[Format][]string{
	Chat: {
		`{"model":"m","messages":[{"role":"developer","content":"be brief","name":"d"},{"role":"system","content":[{"type":"text","text":"s"}]},{"role":"user","name":"ada","content":"hi"}]}`,
		`{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"look"},{"type":"image_url","image_url":{"url":"data:image/png;base64,AAAA","detail":"low"}},{"type":"input_audio","input_audio":{"data":"AAAA","format":"wav"}},{"type":"file","file":{"file_data":"data:application/pdf;base64,AAAA","filename":"a.pdf"}},{"type":"file","file":{"file_id":"file-1"}}]}]}`,
		`{"model":"m","messages":[{"role":"user","content":"q"},{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"f","arguments":"{\"a\":1}"}},{"id":"call_2","type":"custom","custom":{"name":"g","input":"raw"}}]},{"role":"tool","tool_call_id":"call_1","content":"r"},{"role":"tool","tool_call_id":"call_2","content":[{"type":"text","text":"r2"}]}]}`,
		`{"model":"m","messages":[{"role":"assistant","tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{}"}}]}]}`,
		`{"model":"m","messages":[{"role":"assistant","content":[{"type":"text","text":"a"},{"type":"refusal","refusal":"no"}],"refusal":null,"audio":{"id":"au_1"}}]}`,
		`{"model":"m","messages":[{"role":"assistant","content":null,"function_call":{"name":"f","arguments":"{}"}},{"role":"function","name":"f","content":"r"},{"role":"function","name":"f","content":null}]}`,
		`{"model":"m","messages":[{"role":"user","content":[{"type":"video_url","video_url":{"url":"https://x/v.mp4"}},{"type":"image_url","image_url":"https://x/i.png"}]}]}`,
		`{"model":"m","messages":[],"tools":[{"type":"function","function":{"name":"f","description":"d","parameters":{"type":"object"},"strict":true}},{"type":"custom","custom":{"name":"g","format":{"type":"text"}}}],"tool_choice":{"type":"allowed_tools","allowed_tools":{"mode":"auto","tools":[]}},"parallel_tool_calls":false}`,
		`{"model":"m","messages":[],"tool_choice":"required","tools":[{"type":"function","function":{"name":"f"}}]}`,
		`{"model":"m","messages":[],"tool_choice":{"type":"function","function":{"name":"f"}},"tools":null}`,
		`{"model":"m","messages":[],"n":2,"logprobs":true,"top_logprobs":5,"seed":7,"frequency_penalty":-1.5,"presence_penalty":0.5,"logit_bias":{"50256":-100},"user":"u","store":false,"metadata":{"a":"b"},"service_tier":"auto","response_format":{"type":"json_schema","json_schema":{"name":"o","schema":{}}},"modalities":["text","audio"],"audio":{"voice":"alloy","format":"wav"},"prediction":{"type":"content","content":"x"},"verbosity":"low","prompt_cache_key":"k","safety_identifier":"s","stop":["a","b"],"max_completion_tokens":10,"stream":true,"stream_options":{"include_usage":true}}`,
		`{"model":"m","messages":[],"response_format":{"type":"structural_tag","structures":[]},"functions":[{"name":"f"}],"function_call":"auto"}`,
		`{"model":"m","messages":[],"guided_json":{"type":"object"},"top_k":20,"min_p":0.1,"repetition_penalty":1.1,"chat_template_kwargs":{"enable_thinking":false},"web_search_options":null,"n":null}`,
	},
	Messages: {
		`{"model":"m","max_tokens":5,"system":[{"type":"text","text":"s","cache_control":{"type":"ephemeral"}}],"messages":[{"role":"user","content":"hi"},{"role":"system","content":"mid"},{"role":"assistant","content":[{"type":"thinking","thinking":"t","signature":"sig"},{"type":"redacted_thinking","data":"x"},{"type":"text","text":"a","citations":[]},{"type":"tool_use","id":"t1","name":"f","input":{"a":1}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":[{"type":"text","text":"r"},{"type":"image","source":{"type":"base64","media_type":"image/png","data":"AAAA"}},{"type":"search_result","source":"https://x","title":"t","content":[{"type":"text","text":"s"}]},{"type":"document","source":{"type":"text","media_type":"text/plain","data":"d"}}],"is_error":false}]}]}`,
		`{"model":"m","max_tokens":5,"messages":[{"role":"user","content":[{"type":"document","source":{"type":"base64","media_type":"application/pdf","data":"AAAA"},"title":"a","context":"c","citations":{"enabled":true}},{"type":"document","source":{"type":"content","content":[{"type":"text","text":"x"}]}},{"type":"document","source":{"type":"url","url":"https://x/a.pdf"}},{"type":"image","source":{"type":"url","url":"https://x/i.png"}},{"type":"image","source":{"type":"file","file_id":"f"}},{"type":"search_result","source":"s","title":"t","content":[{"type":"text","text":"x"}],"citations":{"enabled":true}},{"type":"some_future_block","x":1}]}]}`,
		`{"model":"m","max_tokens":5,"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"t"},{"type":"tool_result","tool_use_id":"t","content":"x","is_error":true}]}]}`,
		`{"model":"m","max_tokens":5,"messages":[],"tools":[{"name":"f","description":"d","input_schema":{"type":"object"},"cache_control":{"type":"ephemeral"},"strict":true,"defer_loading":true},{"type":"custom","name":"g","input_schema":{}},{"type":"memory_20250818","name":"memory"}],"tool_choice":{"type":"tool","name":"f","disable_parallel_tool_use":true}}`,
		`{"model":"m","max_tokens":5,"messages":[],"tool_choice":{"type":"none"},"metadata":{"user_id":"u"},"service_tier":"auto","stop_sequences":["x"],"top_k":5,"top_p":0.9,"temperature":0.5,"stream":true,"thinking":{"type":"enabled","budget_tokens":1024},"context_management":{"edits":[]},"output_config":{"effort":"high"},"mcp_servers":[],"container":null}`,
		`{"model":"m","max_tokens":5,"messages":[],"some_extension":{"a":[1,2]},"metadata":{"user_id":null}}`,
	},
}

// TestValidationAccepts: valid shapes pass through unchanged, and the
// captured Claude Code and Codex requests are accepted on every path.
func TestValidationAccepts(t *testing.T) {
	for _, f := range []Format{Chat, Messages} {
		for i, b := range acceptedShapes[f] {
			out, _, err := TranslateRequest(f, []byte(b), &Config{Upstream: f}, nil)
			if err != nil {
				t.Errorf("%v pass-through %d refused: %v\n%s", f, i, err, b)
				continue
			}
			if !gjson.ValidBytes(out) {
				t.Errorf("%v %d: not JSON: %s", f, i, out)
			}
			// Only the validator: it has no opinion on what a translation
			// cannot carry.
			if err := validateBody(f, b); err != nil {
				t.Errorf("%v %d: validator refuses: %v", f, i, err)
			}
		}
	}
	m, _ := filepath.Glob(filepath.Join("testdata", "clients", "*.json"))
	if len(m) == 0 {
		t.Fatal("no captured client requests")
	}
	for _, path := range m {
		raw, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		var c struct {
			Path string          `json:"path"`
			Body json.RawMessage `json:"body"`
		}
		if err := json.Unmarshal(raw, &c); err != nil {
			t.Fatal(err)
		}
		client := FormatFromPath(strings.SplitN(c.Path, "?", 2)[0])
		for _, up := range []Format{Chat, Messages} {
			if _, _, err := TranslateRequest(client, c.Body, &Config{Upstream: up}, nil); err != nil {
				t.Errorf("%s to a %v upstream: %v", filepath.Base(path), up, err)
			}
		}
	}
}

// validateBody runs the validator alone over a Chat or Messages body.
func validateBody(f Format, s string) *Error {
	it, _ := objIter(s)
	for {
		k, v, ok := it.next()
		if !ok {
			return nil
		}
		if err := validateMember(f, k, v); err != nil {
			return err
		}
	}
}

// TestValidationAllocs: a valid body is validated without allocating.
func TestValidationAllocs(t *testing.T) {
	for _, f := range []Format{Chat, Messages} {
		for _, b := range acceptedShapes[f] {
			if n := testing.AllocsPerRun(20, func() { _ = validateBody(f, b) }); n != 0 {
				t.Errorf("%v: %v allocations validating %s", f, n, b)
			}
		}
	}
}
