package translate

import (
	"encoding/json"
	"regexp"
	"slices"
	"testing"
)

// FuzzResponsesRequest: any body, to either upstream: no panic; a
// translation is one JSON object, an error a 400/413 that renders as JSON.
func FuzzResponsesRequest(f *testing.F) {
	f.Add(codexBody(f, "first"))
	f.Add(codexBody(f, "tool-result"))
	seedFiles(f, "requests/responses_*.in.json")
	for _, s := range []string{
		`{"model":"m","input":"hi"}`,
		`{"model":"m","input":[{"type":"reasoning","summary":[],"encrypted_content":"tb1:XCI="},{"type":"function_call","call_id":"c","name":"f","namespace":"n","arguments":{}},{"type":"function_call_output","call_id":"c","output":[{"type":"input_image","image_url":"x"}]}]}`,
		`{"model":"m","input":[],"tools":[{"type":"namespace","name":"n","tools":[{"type":"function","name":"f"}]}],"tool_choice":{"type":"allowed_tools","mode":"required","tools":[{"type":"namespace","name":"n"}]}}`,
		`{"model":"m","input":"x","text":{"format":{"type":"json_schema","name":"o","schema":{"type":"object"}}},"reasoning":{"effort":"xhigh","summary":"detailed"},"max_output_tokens":100}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		for i := range fuzzConfigs {
			cfg := &fuzzConfigs[i]
			out, req, err := TranslateRequest(Responses, body, cfg, nil)
			if len(body) <= cfg.maxBody() && CheckBody(body) == nil {
				vout, vreq, verr := TranslateValidRequest(Responses, body, cfg, nil)
				if string(vout) != string(out) || vreq != req || (verr == nil) != (err == nil) {
					t.Fatalf("TranslateValidRequest differs on %s", body)
				}
			}
			if err != nil {
				if err.Status != 400 && err.Status != 413 {
					t.Fatalf("status %d: %v", err.Status, err)
				}
				if !json.Valid(err.Body(Responses)) {
					t.Fatalf("error body is not JSON: %s", err.Body(Responses))
				}
				continue
			}
			var v map[string]any
			if e := json.Unmarshal(out, &v); e != nil {
				t.Fatalf("-> %v: upstream body is not a JSON object: %v\nin:  %s\nout: %s", cfg.Upstream, e, body, out)
			}
		}
	})
}

// FuzzResponsesStream: any upstream bytes, split anywhere, either upstream:
// no panic, and the client gets a well-formed Responses event stream.
func FuzzResponsesStream(f *testing.F) {
	seedFiles(f, "streams/*.sse")
	f.Fuzz(func(t *testing.T, in []byte) {
		var b byte
		if len(in) > 0 {
			b = in[0]
		}
		split := 1 + int(b>>3)%32
		up := Format(1 + b&1)
		reasoning := b&4 != 0
		cfg := &Config{Upstream: up, ThinkPrefilled: reasoning}
		req := Request{Stream: true, Reasoning: reasoning, resp: respOptions{encrypted: b&2 != 0, namespaces: "n\x00"}}
		s := NewStream(Responses, up, req, cfg)
		out := writeInPieces(s, in, split)
		if !s.Done() {
			t.Fatalf("stream not done after Close")
		}
		if err := checkResponsesGrammar(parseSSE(t, out), false); err != nil {
			t.Fatalf("<- %v: %v\nin:\n%q\nout:\n%s", up, err, in, out)
		}
	})
}

// FuzzResponsesResponse: any upstream body: no panic, JSON out or a 502.
func FuzzResponsesResponse(f *testing.F) {
	seedFiles(f, "responses/*.json")
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, up := range []Format{Chat, Messages} {
			cfg := &Config{Upstream: up}
			out, err := TranslateResponse(Responses, up, body, Request{Reasoning: true, resp: respOptions{encrypted: true, namespaces: "n\x00"}}, cfg, nil)
			if err != nil {
				if !json.Valid(err.Body(Responses)) {
					t.Fatal("error body is not JSON")
				}
				continue
			}
			if !json.Valid(out) {
				t.Fatalf("<- %v: not JSON\nin:  %s\nout: %s", up, body, out)
			}
		}
	})
}

// FuzzResponsesStreamViews: a Responses client's stream from a chat
// upstream, which reads each chunk directly into its view where it can
// (viewChunk), writes the events and counts the usage that passing every
// chunk through passChunk does, for any upstream bytes split anywhere.
func FuzzResponsesStreamViews(f *testing.F) {
	seedFiles(f, "streams/*.sse")
	for _, c := range [][]byte{chatContentChunk, chatReasoningChunk, chatToolChunk, chatThinkTagChunk} {
		f.Add(slices.Concat(c, c, []byte("data: {\"choices\":[{\"delta\":{},\"finish_reason\":\"stop\"}],\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":2}}\n\ndata: [DONE]\n\n")))
	}
	for _, d := range []string{
		// Given twice: choices, usage, error; a choice's delta; tool_calls.
		`{"choices":[{"delta":{"content":"a"}}],"choices":[{"delta":{"content":"b"}}]}`,
		`{"choices":[],"usage":{"prompt_tokens":1},"usage":{"completion_tokens":2}}`,
		`{"error":null,"error":{"message":"x"},"choices":[]}`,
		`{"choices":[{"delta":{"reasoning":"r"},"delta":{"content":"<think>c"}}]}`,
		`{"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{}"}}],"tool_calls":[{"index":0}]}}]}`,
		// A finish before the delta that calls tools; another choice.
		`{"choices":[{"finish_reason":"stop","delta":{"tool_calls":[{"index":0,"id":"c1","function":{"name":"f","arguments":"{}"}}]}}]}`,
		`{"choices":[{"index":1,"delta":{"content":"other"}},{"index":0,"delta":{"content":"mine"}}]}`,
		`{"choices":[{"index":"0","delta":{"content":"<think>r</think>t"},"finish_reason":"length"}]}`,
		`{"choices":[{"delta":{"content":"<thi"}}]}` + "\n\ndata: " + `{"choices":[{"finish_reason":"stop"}]}`,
		`{"choices":[7,null,{"message":{"content":"m"},"finish_reason":"stop"}],"usage":null}`,
	} {
		f.Add([]byte("data: " + d + "\n\ndata: [DONE]\n\n"))
	}
	ids := regexp.MustCompile(`[0-9A-Za-z]{24}`) // made up at random on each side
	f.Fuzz(func(t *testing.T, in []byte) {
		var b byte
		if len(in) > 0 {
			b = in[0]
		}
		split := 1 + int(b>>3)%32
		reasoning := b&4 != 0
		cfg := &Config{Upstream: Chat, ThinkPrefilled: reasoning}
		req := Request{Stream: true, Reasoning: reasoning, resp: respOptions{encrypted: b&2 != 0}}
		run := func(direct bool) (string, [4]int64) {
			directViews = direct
			defer func() { directViews = true }()
			s := NewStream(Responses, Chat, req, cfg)
			out := writeInPieces(s, in, split)
			var u [4]int64
			u[0], u[1], u[2], u[3] = s.Usage()
			return ids.ReplaceAllString(string(out), "…"), u
		}
		got, gotUsage := run(true)
		want, wantUsage := run(false)
		if got != want || gotUsage != wantUsage {
			t.Fatalf("in:\n%q\nread directly: usage %v\n%s\npassed: usage %v\n%s", in, gotUsage, got, wantUsage, want)
		}
	})
}
