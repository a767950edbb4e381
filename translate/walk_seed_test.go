package translate

// Kept in the commit that adds testdata/walk, deleted in the next with the
// old readers: it wrote the corpus from them. At this commit,
//
//	rm -r translate/testdata/walk && WALK_SEED=1 go test ./translate -run TestWalkSeed
//
// writes it again, and TestWalkGolden checks today's readers against it.

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
)

// One-off: writes testdata/walk from the old readers (WALK_SEED=1).
func TestWalkSeed(t *testing.T) {
	if os.Getenv("WALK_SEED") == "" {
		t.Skip()
	}
	old := walkReaders{translate: oldTranslateRequest, validate: oldValidateBody}
	dir := filepath.Join("testdata", "walk")
	os.MkdirAll(dir, 0o755)
	seen := map[string]string{}
	slug := regexp.MustCompile(`[^a-z0-9]+`)
	write := func(name, comment string, body []byte, from ...string) {
		name = strings.Trim(slug.ReplaceAllString(strings.ToLower(name), "-"), "-")
		if prev, ok := seen[string(body)]; ok {
			t.Logf("%s: same body as %s", name, prev)
			return
		}
		if _, ok := seen["name:"+name]; ok {
			t.Fatalf("two cases named %s", name)
		}
		seen[string(body)], seen["name:"+name] = name, name
		f := walkGoldenFile{comment: comment + "\n", sections: []walkSection{{"body", string(body)}}}
		if len(from) > 0 {
			f.sections[0] = walkSection{"body from", from[0]}
			if _, b, err := walkBody(f); err != nil || string(b) != string(body) {
				t.Fatalf("%s: body from %s: %v", name, from[0], err)
			}
		}
		b, err := walkGolden(old, f)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if err := os.WriteFile(filepath.Join(dir, name+".txt"), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	m, _ := filepath.Glob("testdata/requests/*.in.json")
	for _, p := range m {
		write("requests-"+strings.TrimSuffix(filepath.Base(p), ".in.json"), "The request testdata/requests/"+filepath.Base(p)+".", readFile(t, p), "testdata/requests/"+filepath.Base(p))
	}
	m, _ = filepath.Glob("testdata/clients/*.json")
	for _, p := range m {
		b := readFile(t, p)
		write("clients-"+strings.TrimSuffix(filepath.Base(p), ".json"), "The body of testdata/clients/"+filepath.Base(p)+" (a captured request).", []byte(gjson.GetBytes(b, "body").Raw), "testdata/clients/"+filepath.Base(p)+"#body")
	}
	for _, c := range walkGoldenClients {
		for _, r := range refusedShapes[c] {
			write("refused-"+c.String()+"-"+r.name, fmt.Sprintf("From refusedShapes[%v] (validate_test.go): %s.", c, r.name), []byte(r.body))
		}
		for i, b := range acceptedShapes[c] {
			write(fmt.Sprintf("accepted-%v-%d", c, i), fmt.Sprintf("From acceptedShapes[%v][%d] (validate_test.go).", c, i), []byte(b))
		}
		for _, n := range []int{0, 4 << 10, 20 << 10} {
			write(fmt.Sprintf("history-%v-%d", c, n), fmt.Sprintf("history(%v, %d) (bench_test.go): an agent conversation of at least %d bytes (the system prompt and tools alone are over 2 KB).", c, n, n), history(c, n))
		}
	}
	m, _ = filepath.Glob("testdata/fuzz/FuzzWalk*/*")
	for _, p := range m {
		b := readFile(t, p)
		line := strings.Split(string(b), "\n")[1]
		var s string
		fmt.Sscanf(strings.TrimSuffix(strings.TrimPrefix(line, "[]byte("), ")"), "%q", &s)
		write("fuzz-"+filepath.Base(p), "Found by "+filepath.Base(filepath.Dir(p))+" against the old readers ("+p+").", []byte(s))
	}
	for i, s := range []string{`{}`, `{"model":"m","max_tokens":1,"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"a","content":[{"type":"image","source":{"type":"base64","media_type":"image/png","data":"x"}}]}]}]}`,
		`{"model":"m","messages":[{"role":"assistant","tool_calls":[{"id":"x:y","function":{"name":"f","arguments":"{\"a\":"}}]},{"role":"tool","tool_call_id":"x:y","content":null}]}`,
		`{"model":"m","max_tokens":5,"messages":[],"thinking":{"type":"enabled","budget_tokens":1e3},"reasoning":{"effort":"high"}}`} {
		write(fmt.Sprintf("seed-translate-%d", i), "A seed of FuzzTranslateRequest (fuzz_test.go).", []byte(s))
	}
	for _, e := range walkEdges {
		write("edge-"+e.name, e.comment, []byte(e.body))
	}
}

var walkEdges = []struct{ name, comment, body string }{
	{"not-json", "Cut short: not JSON.", `{"model":"m",`},
	{"not-object", "JSON, but not an object.", `[1,2]`},
	{"empty", "An empty body.", ``},
	{"whitespace", "Whitespace around the object, and inside it.", "  {\"model\" : \"m\" ,\n \"max_tokens\": 5, \"messages\" : [ { \"role\":\"user\" , \"content\" : \"hi\" } ] }  \n"},
	{"duplicate-keys", "Members given twice.", `{"model":"a","model":"b","max_tokens":5,"max_tokens":7,"messages":[],"messages":[{"role":"user","content":"x"}],"stream":true,"stream":false}`},
	{"deep", "Nesting past the depth16 configuration's limit.", `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"hi"}],"metadata":{"a":[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]]}}`},
	{"escapes", "Escapes in keys and values.", `{"mod\u0065l":"m","max_tokens":5,"messages":[{"role":"us\u0065r","content":"h\u00e9 \ud83d\ude00 \"q\" \\ \n"}]}`},
	{"stream-options", "A streamed chat request that declines the usage chunk and passes another option.", `{"model":"m","stream":true,"stream_options":{"include_usage":false,"x":1},"messages":[{"role":"user","content":"hi"}]}`},
	{"stream-no-options", "A streamed request without stream_options.", `{"model":"m","max_tokens":5,"stream":true,"messages":[{"role":"user","content":"hi"}]}`},
	{"max-tokens-null", "max_tokens null beside max_completion_tokens.", `{"model":"m","max_tokens":null,"max_completion_tokens":9,"messages":[{"role":"user","content":"hi"}]}`},
	{"thinking-and-effort", "Both reasoning controls.", `{"model":"m","max_tokens":2048,"thinking":{"type":"enabled","budget_tokens":1024},"reasoning_effort":"low","messages":[{"role":"user","content":"hi"}]}`},
	{"thinking-disabled", "Thinking turned off.", `{"model":"m","max_tokens":100,"thinking":{"type":"disabled"},"messages":[{"role":"user","content":"hi"}]}`},
	{"thinking-adaptive", "Adaptive thinking with an effort.", `{"model":"m","max_tokens":100,"thinking":{"type":"adaptive"},"output_config":{"effort":"medium"},"messages":[{"role":"user","content":"hi"}]}`},
	{"effort-minimal", "The lowest effort.", `{"model":"m","max_tokens":100,"reasoning_effort":"minimal","messages":[{"role":"user","content":"hi"}]}`},
	{"effort-none", "No effort.", `{"model":"m","max_tokens":100,"reasoning_effort":"none","messages":[{"role":"user","content":"hi"}]}`},
	{"systems", "System and developer messages, first and in the middle, as strings and parts.", `{"model":"m","max_tokens":5,"messages":[{"role":"system","content":"a"},{"role":"developer","content":[{"type":"text","text":"b"},{"type":"text","text":"c"}]},{"role":"user","content":"hi"},{"role":"system","content":"mid"},{"role":"assistant","content":"ok"},{"role":"user","content":"again"}]}`},
	{"tool-round", "Parallel tool calls, results out of order, a user message between them.", `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"go"},{"role":"assistant","content":"calling","tool_calls":[{"id":"a","type":"function","function":{"name":"f","arguments":"{\"x\":1}"}},{"id":"b","type":"function","function":{"name":"g","arguments":""}}]},{"role":"tool","tool_call_id":"b","content":"rb"},{"role":"user","content":"note"},{"role":"tool","tool_call_id":"a","content":[{"type":"text","text":"ra"}]},{"role":"assistant","content":"done"}],"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object"}}},{"type":"function","function":{"name":"g"}}],"tool_choice":"required","parallel_tool_calls":false}`},
	{"messages-tool-round", "A tool round in messages: results after other blocks, an error result, a call without input.", `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"go"},{"role":"assistant","content":[{"type":"text","text":"calling"},{"type":"tool_use","id":"a","name":"f","input":{"x":1}},{"type":"tool_use","id":"b","name":"g","input":{}}]},{"role":"user","content":[{"type":"text","text":"note"},{"type":"tool_result","tool_use_id":"b","content":"rb","is_error":true},{"type":"tool_result","tool_use_id":"a","content":[{"type":"text","text":"ra"}]}]}],"tools":[{"name":"f","input_schema":{"type":"object"}},{"name":"g","input_schema":{}}],"tool_choice":{"type":"any","disable_parallel_tool_use":true}}`},
	{"stops", "stop as a string, stop_sequences empty.", `{"model":"m","max_tokens":5,"stop":"x","stop_sequences":[],"messages":[{"role":"user","content":"hi"}]}`},
	{"top-k", "top_k, which the omit_top_k configuration drops.", `{"model":"m","max_tokens":5,"top_k":40,"top_p":0.5,"temperature":0,"messages":[{"role":"user","content":"hi"}]}`},
	{"nulls", "Optional members given as null.", `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"hi"}],"tools":null,"tool_choice":null,"temperature":null,"system":null,"stop_sequences":null,"stop":null,"metadata":null,"top_p":null,"stream":null}`},
	{"tool-choice-none", "tool_choice none with tools.", `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":"none"}`},
	{"json-object", "response_format json_object.", `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"hi"}],"response_format":{"type":"json_object"}}`},
	{"empty-content", "Empty contents, as a string and as an array.", `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":""},{"role":"assistant","content":[]},{"role":"user","content":[]}]}`},
	{"think-tags", "Thinking in history, and think tags in a text.", `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":[{"type":"thinking","thinking":"hmm","signature":"s"},{"type":"text","text":"<think>x</think>y"}]},{"role":"user","content":"more"}]}`},
	{"images", "Images as data URLs, URLs and base64 blocks.", `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:image/png;base64,AAAA"}},{"type":"image_url","image_url":{"url":"https://x/i.png"}},{"type":"image","source":{"type":"base64","media_type":"image/jpeg","data":"BBBB"}},{"type":"image","source":{"type":"url","url":"https://x/j.png"}}]}]}`},
	{"numbers", "Numbers in exponent and fraction forms.", `{"model":"m","max_tokens":1e3,"max_completion_tokens":2.0,"temperature":1e-1,"top_p":1.0,"messages":[{"role":"user","content":"hi"}]}`},
}
