package translate

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"image"
	"image/gif"
	"image/jpeg"
	"image/png"
	"math/rand/v2"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"
)

// textTokensSlow is the rule of textTokens written plainly: a token per
// four ASCII bytes, one per other character.
func textTokensSlow(s string) int64 {
	ascii, other := 0, 0
	for _, r := range s {
		if r < utf8.RuneSelf {
			ascii++
		} else {
			other++
		}
	}
	return int64(ascii+3)/4 + int64(other)
}

func TestTextTokens(t *testing.T) {
	cases := map[string]int64{
		``:                        0,
		`a`:                       1,
		`hello world!`:            3,
		`日本語`:                     3,
		`naïve café, déjà vu`:     4 + 4, // 15 ASCII bytes, 4 accented letters
		strings.Repeat("x", 4000): 1000,
	}
	for s, want := range cases {
		if got := textTokens(strconv.Quote(s)); got != want {
			t.Errorf("textTokens(%q) = %d, want %d", s, got, want)
		}
	}
	// The eight-bytes-at-a-time count agrees with the plain one wherever the
	// characters fall across word boundaries.
	rng := rand.New(rand.NewPCG(1, 2))
	alphabet := []string{"a", "b", " ", "é", "日", "😀", "ж", "\t"}
	for range 500 {
		var b strings.Builder
		for n := rng.IntN(40); n > 0; n-- {
			b.WriteString(alphabet[rng.IntN(len(alphabet))])
		}
		s := b.String()
		if got, want := textTokens(`"`+s+`"`), textTokensSlow(s); got != want {
			t.Fatalf("textTokens(%q) = %d, want %d", s, got, want)
		}
	}
}

func encodeImage(t *testing.T, format string, w, h int) string {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	var buf bytes.Buffer
	var err error
	switch format {
	case "png":
		err = png.Encode(&buf, img)
	case "gif":
		err = gif.Encode(&buf, img, nil)
	case "jpeg":
		err = jpeg.Encode(&buf, img, nil)
	}
	if err != nil {
		t.Fatal(err)
	}
	return base64.StdEncoding.EncodeToString(buf.Bytes())
}

// webp builds the first bytes of a WebP file of each kind, enough for its size.
func webp(kind string, w, h int) string {
	b := []byte("RIFF\x00\x00\x00\x00WEBP" + kind + "\x00\x00\x00\x00")
	switch kind {
	case "VP8X":
		b = append(b, 0, 0, 0, 0, byte(w-1), byte((w-1)>>8), byte((w-1)>>16), byte(h-1), byte((h-1)>>8), byte((h-1)>>16))
	case "VP8L":
		b = append(b, 0x2f)
		b = binary.LittleEndian.AppendUint32(b, uint32(w-1)|uint32(h-1)<<14)
	case "VP8 ":
		b = append(b, 0, 0, 0, 0x9d, 0x01, 0x2a)
		b = binary.LittleEndian.AppendUint16(b, uint16(w))
		b = binary.LittleEndian.AppendUint16(b, uint16(h))
	}
	return base64.RawStdEncoding.EncodeToString(append(b, make([]byte, 16)...))
}

func TestImageSize(t *testing.T) {
	cases := []struct {
		name, data string
		w, h       int64
	}{
		{"png", encodeImage(t, "png", 640, 480), 640, 480},
		{"gif", encodeImage(t, "gif", 300, 17), 300, 17},
		{"jpeg", encodeImage(t, "jpeg", 1024, 768), 1024, 768},
		{"webp VP8X", webp("VP8X", 2000, 1000), 2000, 1000},
		{"webp VP8L", webp("VP8L", 123, 456), 123, 456},
		{"webp VP8", webp("VP8 ", 800, 600), 800, 600},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w, h, ok := imageSize(tc.data)
			if !ok || w != tc.w || h != tc.h {
				t.Fatalf("imageSize = %d×%d %v, want %d×%d", w, h, ok, tc.w, tc.h)
			}
		})
	}
	jpg := encodeImage(t, "jpeg", 64, 64)
	for _, bad := range []string{"", "aGVsbG8gd29ybGQ=", "iVBORw0KGgo", jpg[:20], `iVBORw0K\/Ggo` + strings.Repeat("A", 40)} {
		if w, h, ok := imageSize(bad); ok {
			t.Errorf("imageSize(%.30q) = %d×%d, want not ok", bad, w, h)
		}
	}
}

func TestPixelTokens(t *testing.T) {
	cases := []struct{ w, h, want int64 }{
		{200, 200, 54},     // 40000/750 = 53.3
		{1092, 1092, 1590}, // the messages API's largest square that is not scaled
		{1000, 1000, 1334},
		{4000, 3000, tokensImage}, // 1568×1176 is more than 1600 tokens: scaled down to 1600
		{10000, 10, 3},            // 1568×1
		{0, 10, tokensImage},
	}
	for _, tc := range cases {
		if got := pixelTokens(tc.w, tc.h); got != tc.want {
			t.Errorf("pixelTokens(%d, %d) = %d, want %d", tc.w, tc.h, got, tc.want)
		}
	}
}

func TestCountTokens(t *testing.T) {
	png := encodeImage(t, "png", 750, 100) // 100 tokens
	tool := `{"name":"get_weather","description":"Weather of a city","input_schema":{"type":"object","properties":{"city":{"type":"string"}}}}`
	body := `{"model":"m","max_tokens":10,
		"system":[{"type":"text","text":"Be brief.","cache_control":{"type":"ephemeral"}}],
		"tools":[` + tool + `],
		"messages":[
			{"role":"user","content":"What is the weather in Paris?"},
			{"role":"assistant","content":[
				{"type":"thinking","thinking":"The user wants the weather; call the tool.","signature":"sig"},
				{"type":"tool_use","id":"t1","name":"get_weather","input":{"city":"Paris"}}]},
			{"role":"user","content":[
				{"type":"tool_result","tool_use_id":"t1","content":[{"type":"text","text":"18 degrees"}]},
				{"type":"image","source":{"type":"base64","media_type":"image/png","data":"` + png + `"}},
				{"type":"image","source":{"type":"url","url":"https://example.com/cat.jpg"}}]}]}`
	want := int64(tokensReply) +
		tokensPerMessage + 3 + // "Be brief." 9 bytes
		tokensPerTool + int64(len(tool)+3)/4 + tokensTools +
		tokensPerMessage + 8 + // 29 bytes
		tokensPerMessage + 0 + tokensPerCall + 3 + 4 + // name 11 bytes, input {"city":"Paris"} 16 bytes
		tokensPerMessage + tokensPerCall + 3 + 100 + tokensImage
	b := []byte(body)
	got, err := CountTokens(b)
	if err != nil || got != want {
		t.Fatalf("CountTokens = %d, %v; want %d", got, err, want)
	}
	if n := testing.AllocsPerRun(100, func() { _, _ = CountTokens(b) }); n != 0 {
		t.Errorf("CountTokens allocates %v times", n)
	}

	// The smallest request: one message, a string system prompt.
	got, err = CountTokens([]byte(`{"model":"m","system":"abcd","messages":[{"role":"user","content":"abcdefgh"}]}`))
	if want := int64(tokensReply + tokensPerMessage + 1 + tokensPerMessage + 2); err != nil || got != want {
		t.Fatalf("small request: %d, %v; want %d", got, err, want)
	}

	for _, bad := range []string{`[]`, `{"model":"m"}`, `{"model":"m","messages":{}}`, ``} {
		if _, err := CountTokens([]byte(bad)); err == nil || err.Status != 400 {
			t.Errorf("CountTokens(%q): %v, want a 400", bad, err)
		}
	}
}

func TestAppendCountTokens(t *testing.T) {
	if got := string(AppendCountTokens(nil, 1234)); got != `{"input_tokens":1234}` {
		t.Fatal(got)
	}
}

func BenchmarkCountTokens(b *testing.B) {
	for _, n := range []int{4 << 10, 20 << 10, 200 << 10} {
		body := history(Messages, n)
		b.Run(strconv.Itoa(n>>10)+"KB", func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := CountTokens(body); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// A streamed messages request to a chat upstream is estimated once, when it
// is translated; message_start reports the estimate, and the final
// message_delta the upstream's own count (or the estimate when there is none).
func TestMessageStartInputEstimate(t *testing.T) {
	body := []byte(`{"model":"m","max_tokens":100,"stream":true,"system":"You are terse.",` +
		`"messages":[{"role":"user","content":"How many tokens is this prompt, roughly?"}]}`)
	want, cerr := CountTokens(body)
	if cerr != nil {
		t.Fatal(cerr)
	}
	cfg := Config{Upstream: Chat}
	_, req, err := TranslateRequest(Messages, body, &cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	if req.InputTokens != want {
		t.Fatalf("Request.InputTokens = %d, want the estimate %d", req.InputTokens, want)
	}
	const id = `"id":"c1","object":"chat.completion.chunk","created":1,"model":"m"`
	chunks := `data: {` + id + `,"choices":[{"index":0,"delta":{"role":"assistant","content":"Hi"},"finish_reason":null}]}` + "\n\n" +
		`data: {` + id + `,"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}` + "\n\n"
	usageChunk := `data: {` + id + `,"choices":[],"usage":{"prompt_tokens":31,"completion_tokens":1,"total_tokens":32}}` + "\n\n"
	for _, tc := range []struct {
		name      string
		upstream  string
		wantFinal int64
	}{
		{"upstream counts", chunks + usageChunk + "data: [DONE]\n\n", 31},
		{"upstream does not count", chunks + "data: [DONE]\n\n", want},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := NewStream(Messages, Chat, req, &cfg)
			out := s.Close(s.Write(nil, []byte(tc.upstream)))
			var start, final int64 = -1, -1
			for _, ev := range parseSSE(t, out) {
				switch ev.Event {
				case "message_start":
					start = gjsonInt(ev.Data, "message.usage.input_tokens")
				case "message_delta":
					final = gjsonInt(ev.Data, "usage.input_tokens")
				}
			}
			if start != want || final != tc.wantFinal {
				t.Fatalf("input_tokens: message_start %d, message_delta %d; want %d and %d\n%s", start, final, want, tc.wantFinal, out)
			}
		})
	}

	// Not streamed, or to a messages upstream (which counts in its own
	// message_start): no estimate is made.
	for _, c := range []struct {
		name, body string
		upstream   Format
	}{
		{"not streamed", strings.Replace(string(body), `"stream":true`, `"stream":false`, 1), Chat},
		{"messages upstream", string(body), Messages},
	} {
		cfg := Config{Upstream: c.upstream}
		if _, req, err := TranslateRequest(Messages, []byte(c.body), &cfg, nil); err != nil || req.InputTokens != 0 {
			t.Errorf("%s: InputTokens %d, %v; want 0", c.name, req.InputTokens, err)
		}
	}
}

func gjsonInt(doc, path string) int64 { return gjson.Get(doc, path).Int() }

// The estimate a streamed messages → chat translation makes on the way is
// the number CountTokens gives for the same body, for every request
// fixture, the captured Claude Code requests and bodies made here to reach
// each kind of content; and the translation still allocates nothing.
func TestTranslationEstimateIsCountTokens(t *testing.T) {
	png := encodeImage(t, "png", 750, 100)
	jpg := encodeImage(t, "jpeg", 2000, 1500)
	para := `"The linker could not find \"init_module\"; check the Makefile. 日本語のテキスト, naïve café.\n"`
	bodies := map[string]string{}
	for _, p := range fixtures(t, "requests", ".in.json") {
		b := readFile(t, p)
		if gjson.GetBytes(b, "messages.0.role").Exists() && gjson.GetBytes(b, "max_tokens").Exists() &&
			!gjson.GetBytes(b, "messages.#(role==\"tool\")").Exists() && !gjson.GetBytes(b, "tools.0.function").Exists() {
			bodies[filepath.Base(p)] = string(b)
		}
	}
	if len(bodies) < 3 {
		t.Fatalf("want the messages request fixtures, found %d", len(bodies))
	}
	for _, fx := range claudeCodeFixtures(t) {
		bodies[fx.name] = string(fx.body)
	}
	hand := func(name, extra, messages string) {
		bodies[name] = `{"model":"m","max_tokens":64` + extra + `,"messages":[` + messages + `]}`
	}
	hand("system string", `,"system":`+para, `{"role":"user","content":`+para+`}`)
	hand("system blocks", `,"system":[{"type":"text","text":`+para+`,"cache_control":{"type":"ephemeral"}},{"type":"text","text":"","cache_control":{"type":"ephemeral"}},{"text":"Be brief.","type":"text"}]`,
		`{"role":"user","content":[{"type":"text","text":"hi"}]}`)
	hand("system empty", `,"system":""`, `{"role":"user","content":"x"}`)
	hand("system null", `,"system":null`, `{"role":"user","content":"x"}`)
	hand("system no text", `,"system":[{"type":"text","text":""}]`, `{"role":"user","content":"x"}`)
	hand("system-role messages", ``, `{"role":"system","content":"Stay on task."},{"role":"user","content":"a"},
		{"role":"system","content":[{"type":"text","text":`+para+`},{"type":"text","text":""}]},{"role":"system","content":""}`)
	hand("images", ``, `{"role":"user","content":[
		{"type":"text","text":"Compare these."},
		{"type":"image","source":{"type":"base64","media_type":"image/png","data":"`+png+`"}},
		{"source":{"data":"`+jpg+`","media_type":"image/jpeg","type":"base64"},"type":"image","cache_control":{"type":"ephemeral"}},
		{"type":"image","source":{"type":"base64","media_type":"image/webp","data":"`+webp("VP8X", 300, 200)+`"}},
		{"type":"image","source":{"type":"base64","media_type":"image/png","data":"bm90IGFuIGltYWdl"}},
		{"type":"image","source":{"type":"url","url":"https://example.com/cat.jpg"}}]}`)
	hand("documents", ``, `{"role":"user","content":[
		{"type":"document","source":{"type":"text","media_type":"text/plain","data":`+para+`},"title":"notes"},
		{"type":"document","source":{"type":"base64","media_type":"application/pdf","data":"JVBERi0xLjQK"}},
		{"type":"document","source":{"type":"content","content":[{"type":"text","text":"one"},{"type":"text","text":"two"}]}},
		{"type":"document","source":{"type":"content","content":"three"}}]}`)
	toolsJSON := `,"tools":[{"name":"run_shell","description":"Run a shell command","input_schema":{"type":"object","properties":{"cmd":{"type":"string"}},"required":["cmd"]}},
		{"input_schema":{"type":"object"},"name":"noop","cache_control":{"type":"ephemeral"}},{"name":"bare"}],"tool_choice":{"type":"auto"}`
	calls := `{"role":"user","content":"Build it."},
		{"role":"assistant","content":[
			{"type":"thinking","thinking":"Look at the Makefile first.","signature":"EqQBCgIYAhIM"},
			{"type":"redacted_thinking","data":"c2VjcmV0"},
			{"type":"text","text":"I'll check."},{"type":"text","text":""},
			{"type":"tool_use","id":"call_1","name":"run_shell","input":{"cmd":"cat Makefile"}},
			{"input":null,"name":"noop","id":"call_2","type":"tool_use"},
			{"type":"tool_use","id":"call_3","name":"bare"}]},
		{"role":"user","content":[
			{"type":"tool_result","tool_use_id":"call_1","content":` + para + `},
			{"content":[{"type":"text","text":"done"},{"type":"text","text":"日本"},
				{"type":"image","source":{"type":"base64","media_type":"image/png","data":"` + png + `"}},
				{"type":"document","source":{"type":"text","media_type":"text/plain","data":"log"}}],"tool_use_id":"call_2","type":"tool_result"},
			{"type":"tool_result","tool_use_id":"call_3","is_error":true},
			{"type":"tool_result","tool_use_id":"call_4","content":null},
			{"type":"tool_result","tool_use_id":"call_5","content":""},
			{"type":"tool_result","tool_use_id":"call_6","content":[{"type":"image","source":{"type":"url","url":"https://example.com/x.png"}}]},
			{"type":"text","text":"Go on."}]},
		{"role":"assistant","content":"Done: 日本語."},
		{"role":"user","content":[]}`
	hand("tools and calls", toolsJSON, calls)
	hand("tool calls without tools", ``, calls)
	hand("tools empty", `,"tools":[]`, `{"role":"user","content":"x"}`)
	hand("tools null", `,"tools":null`, `{"role":"user","content":"x"}`)
	hand("thinking on", `,"thinking":{"type":"enabled","budget_tokens":1024},"system":"s"`, calls)
	hand("members first", `,"system":"s","tools":[{"name":"t"}]`, `{"content":"x","role":"user"}`)
	bodies["members before the rest"] = `{"messages":[{"role":"user","content":"x"}],"tools":[{"name":"t"}],"system":[{"type":"text","text":"s"}],"model":"m","max_tokens":8}`
	bodies["bench history"] = string(history(Messages, 20<<10))

	cfg := Config{Upstream: Chat}
	for name, body := range bodies {
		body, err := sjson.Set(body, "stream", true)
		if err != nil {
			t.Fatal(err)
		}
		want, cerr := CountTokens([]byte(body))
		if cerr != nil {
			t.Fatalf("%s: CountTokens: %v", name, cerr)
		}
		_, req, terr := TranslateRequest(Messages, []byte(body), &cfg, nil)
		if terr != nil {
			t.Fatalf("%s: %v", name, terr)
		}
		if req.InputTokens != want {
			t.Errorf("%s: Request.InputTokens = %d, CountTokens = %d", name, req.InputTokens, want)
		}
		if _, req, _ := TranslateValidRequest(Messages, []byte(body), &cfg, nil); req.InputTokens != want {
			t.Errorf("%s: TranslateValidRequest: InputTokens = %d, CountTokens = %d", name, req.InputTokens, want)
		}
		buf := make([]byte, 0, 2*len(body)+4096)
		b := []byte(body)
		if n := testing.AllocsPerRun(20, func() { _, _, _ = TranslateValidRequest(Messages, b, &cfg, buf[:0]) }); n != 0 {
			t.Errorf("%s: the translation allocates %v times", name, n)
		}
	}

	// The one corner where they differ: duplicate members. The translation
	// counts the copy it translates (the last of a request's or a message's
	// members, the first of a content block's); CountTokens counts every
	// copy. The difference is the dropped copies' tokens, no more.
	for _, c := range []struct {
		name, body string
		diff       int64 // CountTokens - InputTokens
	}{
		{"two contents", `{"role":"user","content":"aaaaaaaaaaaa","content":"b"}`, 3},
		{"two texts", `{"role":"user","content":[{"type":"text","text":"aaaa","text":"bbbbbbbbbbbb"}]}`, 3 - 1},
	} {
		body := `{"model":"m","max_tokens":8,"stream":true,"messages":[` + c.body + `]}`
		want, _ := CountTokens([]byte(body))
		_, req, err := TranslateRequest(Messages, []byte(body), &cfg, nil)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if want-req.InputTokens != c.diff {
			t.Errorf("%s: InputTokens %d, CountTokens %d; want a difference of %d", c.name, req.InputTokens, want, c.diff)
		}
	}
}

// FuzzCountTokens: any body, well-formed or not, is counted without a panic
// and never below zero.
func FuzzCountTokens(f *testing.F) {
	f.Add(history(Messages, 4<<10))
	f.Add([]byte(`{"messages":[{"role":"user","content":[{"type":"tool_result","content":[{"type":"tool_result","content":"x"}]}]}]}`))
	f.Add([]byte(`{"messages":[{"content":[{"type":"image","source":{"type":"base64","data":"/9j/4AAQSkZJRg"}}]}]}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		if n, err := CountTokens(body); err == nil && n < 0 {
			t.Fatalf("CountTokens = %d", n)
		}
		for _, s := range []string{string(body), `"` + string(body) + `"`} {
			if w, h, ok := imageSize(s); ok && (w < 0 || h < 0) {
				t.Fatalf("imageSize = %d×%d", w, h)
			}
		}
	})
}
