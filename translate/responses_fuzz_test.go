package translate

import (
	"encoding/json"
	"testing"
)

// FuzzResponsesRequest: any body, to either upstream: no panic; a
// translation is one JSON object, an error a 400/413 that renders as JSON.
func FuzzResponsesRequest(f *testing.F) {
	f.Add(codexBody(f, "first"))
	f.Add(codexBody(f, "tool-result"))
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
		var out []byte
		for p := in; len(p) > 0; {
			n := min(split, len(p))
			out = s.Write(out, p[:n])
			p = p[n:]
		}
		out = s.Close(out)
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
