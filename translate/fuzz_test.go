package translate

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
)

func seedFiles(f *testing.F, pattern string) {
	m, _ := filepath.Glob(filepath.Join("testdata", pattern))
	for _, p := range m {
		if strings.Contains(p, ".want.") {
			continue // goldens are outputs, and large: they slow minimisation down
		}
		b, err := os.ReadFile(p)
		if err == nil {
			f.Add(b)
		}
	}
}

// writeInPieces writes in to s split bytes at a time, then closes it, and
// returns what the client got.
func writeInPieces(s *Stream, in []byte, split int) []byte {
	var out []byte
	for p := in; len(p) > 0; {
		n := min(split, len(p))
		out = s.Write(out, p[:n])
		p = p[n:]
	}
	return s.Close(out)
}

var fuzzConfigs = []Config{
	{Upstream: Chat},
	{Upstream: Chat, Reasoning: DialectChatTemplateKwargs},
	{Upstream: Chat, Reasoning: DialectEffortScale, OmitTopK: true},
	{Upstream: Messages},
	{Upstream: Messages, Reasoning: DialectOpenAI},
	{Upstream: Chat, Reasoning: DialectThinking, MaxDepth: 16},
}

// seedClientBodies adds the bodies of the requests captured from real
// clients (testdata/clients: method, path, headers and body).
func seedClientBodies(f *testing.F) {
	m, _ := filepath.Glob(filepath.Join("testdata", "clients", "*.json"))
	for _, p := range m {
		b, err := os.ReadFile(p)
		if body := gjson.GetBytes(b, "body"); err == nil && body.IsObject() {
			f.Add([]byte(body.Raw))
		}
	}
}

// FuzzTranslateRequest: any body, either client, any configuration: no
// panic; a translation is one JSON object, an error a 400/413 that renders
// as JSON in both formats.
func FuzzTranslateRequest(f *testing.F) {
	seedFiles(f, "requests/*.in.json")
	seedClientBodies(f)
	for _, s := range []string{`{}`, `{"model":"m","max_tokens":1,"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"a","content":[{"type":"image","source":{"type":"base64","media_type":"image/png","data":"x"}}]}]}]}`,
		`{"model":"m","messages":[{"role":"assistant","tool_calls":[{"id":"x:y","function":{"name":"f","arguments":"{\"a\":"}}]},{"role":"tool","tool_call_id":"x:y","content":null}]}`,
		`{"model":"m","max_tokens":5,"messages":[],"thinking":{"type":"enabled","budget_tokens":1e3},"reasoning":{"effort":"high"}}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		for i := range fuzzConfigs {
			cfg := &fuzzConfigs[i]
			for _, client := range []Format{Chat, Messages} {
				out, req, err := TranslateRequest(client, body, cfg, nil)
				if len(body) <= cfg.maxBody() && CheckBody(body) == nil {
					// What the gate already checked (CheckBody) translates the same way.
					vout, vreq, verr := TranslateValidRequest(client, body, cfg, nil)
					if string(vout) != string(out) || vreq != req || (verr == nil) != (err == nil) || (err != nil && verr.Message != err.Message) {
						t.Fatalf("TranslateValidRequest differs on %s: %s %v, want %s %v", body, vout, verr, out, err)
					}
				}
				if err != nil {
					if err.Status != 400 && err.Status != 413 {
						t.Fatalf("status %d: %v", err.Status, err)
					}
					for _, f := range []Format{Chat, Messages} {
						if !json.Valid(err.Body(f)) {
							t.Fatalf("error body is not JSON: %s", err.Body(f))
						}
					}
					continue
				}
				var v map[string]any
				if e := json.Unmarshal(out, &v); e != nil {
					t.Fatalf("%v -> %v upstream body is not a JSON object: %v\nin:  %s\nout: %s", client, cfg.Upstream, e, body, out)
				}
			}
		}
	})
}

// FuzzStream: any upstream bytes, split anywhere, every direction: no panic,
// no hang, and the client gets a well-formed event stream.
func FuzzStream(f *testing.F) {
	seedFiles(f, "streams/*.sse")
	f.Add([]byte("data: {\"choices\":[{\"delta\":{\"content\":\"<think>a</th\"}}]}\n\ndata: [DONE]\n\n"))
	f.Add([]byte("event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":7,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{\"}}\n\n"))
	f.Fuzz(func(t *testing.T, in []byte) {
		// The first byte picks the chunk size and the direction, so that one
		// run stays cheap and the corpus still covers every direction.
		var b byte
		if len(in) > 0 {
			b = in[0]
		}
		split := 1 + int(b>>3)%32
		up, client := Format(1+b&1), Format(1+(b>>1)&1)
		reasoning := b&4 != 0
		cfg := &Config{Upstream: up, ThinkPrefilled: reasoning}
		s := NewStream(client, up, Request{Stream: true, IncludeUsage: true, Reasoning: reasoning}, cfg)
		out := writeInPieces(s, in, split)
		if !s.Done() {
			t.Fatalf("stream not done after Close")
		}
		if err := checkGrammar(client, up, parseSSE(t, out), false); err != nil {
			t.Fatalf("%v <- %v: %v\nin:\n%q\nout:\n%s", client, up, err, in, out)
		}
	})
}

// FuzzTranslateResponse: any upstream body: no panic, JSON out or a 502.
func FuzzTranslateResponse(f *testing.F) {
	seedFiles(f, "responses/*.json")
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, up := range []Format{Chat, Messages} {
			for _, client := range []Format{Chat, Messages} {
				cfg := &Config{Upstream: up}
				out, err := TranslateResponse(client, up, body, Request{Reasoning: true}, cfg, nil)
				if err != nil {
					if !json.Valid(err.Body(client)) {
						t.Fatal("error body is not JSON")
					}
					continue
				}
				if !json.Valid(out) {
					t.Fatalf("%v <- %v: not JSON\nin:  %s\nout: %s", client, up, body, out)
				}
			}
		}
		for _, f := range []Format{Chat, Messages} {
			if out := TranslateErrorBody(f, Chat, 500, body, nil); !json.Valid(out) {
				t.Fatalf("error body not JSON: %s", out)
			}
		}
	})
}
