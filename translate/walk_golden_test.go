package translate

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
)

// The request readers' golden corpus (testdata/walk, README.md there):
// each file holds one request body and what today's readers make of it,
// as a chat client and as a messages client, for every configuration of
// fuzzConfigs, with and without the gate's check (TranslateValidRequest),
// and the validator's verdict alone. The corpus was first written by the
// readers before the single-pass walk (f786ef7), and today's agreed on
// every file: it stands in for that reference now.
//
//	go test ./translate -run TestWalkGolden -update
//
// rewrites every file's answers from the current code (the bodies and the
// comment before them stay); review the diff.

// walkGoldenFile is one file of the corpus: a comment and named sections.
type walkGoldenFile struct {
	comment  string
	sections []walkSection
}

type walkSection struct{ name, data string }

var walkHeader = regexp.MustCompile(`^-- (.+) --$`)

// parseWalkGolden reads a file: the comment up to the first header line
// `-- name --`, then each section up to the next header. A section's data
// is its bytes without the newline that ends them.
func parseWalkGolden(b []byte) walkGoldenFile {
	var f walkGoldenFile
	cur := -1
	var data []string
	flush := func() {
		s := strings.Join(data, "")
		if cur < 0 {
			f.comment = s
		} else {
			f.sections[cur].data = strings.TrimSuffix(s, "\n")
		}
		data = nil
	}
	for _, line := range strings.SplitAfter(string(b), "\n") {
		if m := walkHeader.FindStringSubmatch(strings.TrimSuffix(line, "\n")); m != nil {
			flush()
			f.sections = append(f.sections, walkSection{name: m[1]})
			cur = len(f.sections) - 1
			continue
		}
		data = append(data, line)
	}
	flush()
	return f
}

func (f walkGoldenFile) format() ([]byte, error) {
	var b bytes.Buffer
	b.WriteString(f.comment)
	for _, s := range f.sections {
		for _, line := range strings.Split(s.data, "\n") {
			if walkHeader.MatchString(line) {
				return nil, fmt.Errorf("section %q holds a header line %q", s.name, line)
			}
		}
		fmt.Fprintf(&b, "-- %s --\n%s\n", s.name, s.data)
	}
	return b.Bytes(), nil
}

func (f walkGoldenFile) section(name string) (string, bool) {
	for _, s := range f.sections {
		if s.name == name {
			return s.data, true
		}
	}
	return "", false
}

// walkGoldenClients are the client formats whose readers the corpus
// covers: the ones the single-pass walk serves.
var walkGoldenClients = []Format{Chat, Messages}

// configName names a configuration in the corpus: chat>messages/openai is
// a chat client to a messages upstream with the openai dialect.
func configName(client Format, c *Config) string {
	n := client.String() + ">" + c.Upstream.String()
	if c.Reasoning != DialectAuto {
		n += "/" + c.Reasoning.String()
	}
	if c.OmitTopK {
		n += "/omit_top_k"
	}
	if c.MaxDepth != 0 {
		n += fmt.Sprintf("/depth%d", c.MaxDepth)
	}
	return n
}

// walkReaders is what the corpus is written from and checked against:
// translateRequest and the validator alone.
type walkReaders struct {
	translate func(client Format, body []byte, cfg *Config, buf []byte, checked bool) ([]byte, Request, *Error)
	validate  func(client Format, s string) *Error
}

var currentReaders = walkReaders{
	translate: func(client Format, body []byte, cfg *Config, buf []byte, checked bool) ([]byte, Request, *Error) {
		return translateRequest(client, Call{}, body, cfg, buf, checked)
	},
	validate: validateBody,
}

// walkAnswers are the sections that follow the body: for each client the
// validator's verdict (when the body is a JSON object), then each distinct
// answer, named by the configurations that give it. A configuration whose
// answer differs when the gate checked the body names it as "… checked".
func walkAnswers(r walkReaders, body []byte) []walkSection {
	var out []walkSection
	s := trimJSON(string(body))
	for _, client := range walkGoldenClients {
		if isObj(s) && gjson.Valid(s) {
			v := "ok"
			if err := r.validate(client, s); err != nil {
				v = "error " + errorFields(err)
			}
			out = append(out, walkSection{name: "validate " + client.String(), data: v})
		}
	}
	var order []string
	names := map[string][]string{}
	add := func(name, answer string) {
		if _, ok := names[answer]; !ok {
			order = append(order, answer)
		}
		names[answer] = append(names[answer], name)
	}
	for _, client := range walkGoldenClients {
		for i := range fuzzConfigs {
			cfg := &fuzzConfigs[i]
			name := configName(client, cfg)
			got := walkAnswer(r.translate(client, body, cfg, nil, false))
			add(name, got)
			if gjson.ValidBytes(body) { // TranslateValidRequest wants what the gate checked
				if v := walkAnswer(r.translate(client, body, cfg, nil, true)); v != got {
					add(name+" checked", v)
				}
			}
		}
	}
	for _, a := range order {
		out = append(out, walkSection{name: strings.Join(names[a], ", "), data: a})
	}
	return out
}

// walkAnswer renders one translation: the error, or the Request and the
// body made, each on its own line.
func walkAnswer(out []byte, req Request, err *Error) string {
	if err != nil {
		if len(out) > 0 || req != (Request{}) {
			return fmt.Sprintf("error %s\nbut also request %+v\n%s", errorFields(err), req, out)
		}
		return "error " + errorFields(err)
	}
	return "request " + requestFields(req) + "\n" + string(out)
}

// errorFields renders an Error as the corpus was written: its fields but
// RetryAfter, which no translation sets.
func errorFields(e *Error) string {
	return fmt.Sprintf("{Status:%d Kind:%s Message:%s Code:%s Param:%s}", e.Status, e.Kind, e.Message, e.Code, e.Param)
}

// requestFields renders every field of a Request, leaving out resp, call
// and showThoughts (what only a Responses or Gemini client's request
// fills) when they are zero.
func requestFields(req Request) string {
	v := reflect.ValueOf(req)
	var l []string
	for i := 0; i < v.NumField(); i++ {
		f := v.Type().Field(i)
		if (f.Name == "resp" || f.Name == "call" || f.Name == "showThoughts") && v.Field(i).IsZero() {
			continue
		}
		l = append(l, fmt.Sprintf("%s:%+v", f.Name, v.Field(i)))
	}
	return "{" + strings.Join(l, " ") + "}"
}

// walkGolden renders the file the corpus wants for f's body and comment.
func walkGolden(r walkReaders, f walkGoldenFile) ([]byte, error) {
	head, body, err := walkBody(f)
	if err != nil {
		return nil, err
	}
	g := walkGoldenFile{comment: f.comment, sections: append([]walkSection{head}, walkAnswers(r, body)...)}
	return g.format()
}

// walkBody finds a file's body: its "body" section, or the file a "body
// from" section names (a path under translate/, then #member for a member
// of that JSON file, in gjson's syntax).
func walkBody(f walkGoldenFile) (walkSection, []byte, error) {
	if body, ok := f.section("body"); ok {
		return walkSection{"body", body}, []byte(body), nil
	}
	from, ok := f.section("body from")
	if !ok {
		return walkSection{}, nil, fmt.Errorf("no body section")
	}
	path, member, _ := strings.Cut(from, "#")
	b, err := os.ReadFile(filepath.FromSlash(path))
	if err != nil {
		return walkSection{}, nil, err
	}
	if member != "" {
		v := gjson.GetBytes(b, member)
		if !v.Exists() {
			return walkSection{}, nil, fmt.Errorf("%s: no member %s", path, member)
		}
		b = []byte(v.Raw)
	}
	return walkSection{"body from", from}, b, nil
}

func walkGoldenFiles(t testing.TB) []string {
	files, _ := filepath.Glob(filepath.Join("testdata", "walk", "*.txt"))
	if len(files) == 0 {
		t.Fatal("no files in testdata/walk")
	}
	return files
}

// TestWalkGolden: every body of the corpus, read as chat and as messages
// for every configuration, gives the answers the file holds (-update
// rewrites them).
func TestWalkGolden(t *testing.T) {
	for _, name := range walkGoldenFiles(t) {
		t.Run(strings.TrimSuffix(filepath.Base(name), ".txt"), func(t *testing.T) {
			b := readFile(t, name)
			got, err := walkGolden(currentReaders, parseWalkGolden(b))
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if *update {
				if !bytes.Equal(got, b) {
					if err := os.WriteFile(name, got, 0o644); err != nil {
						t.Fatal(err)
					}
				}
				return
			}
			diffWalkGolden(t, name, parseWalkGolden(got), parseWalkGolden(b))
		})
	}
}

// diffWalkGolden reports, per client configuration, the answers that
// differ from the file's.
func diffWalkGolden(t *testing.T, name string, got, want walkGoldenFile) {
	t.Helper()
	index := func(f walkGoldenFile) map[string]string {
		m := map[string]string{}
		for _, s := range f.sections {
			if s.name == "body" || s.name == "body from" || strings.HasPrefix(s.name, "validate ") {
				m[s.name] = s.data
				continue
			}
			for _, n := range strings.Split(s.name, ", ") {
				m[n] = s.data
			}
		}
		return m
	}
	g, w := index(got), index(want)
	for k := range w {
		if _, ok := g[k]; !ok {
			g[k] = "(no such answer)"
		}
	}
	keys := make([]string, 0, len(g))
	for k := range g {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		v := g[k]
		if wv, ok := w[k]; !ok {
			t.Errorf("%s: %s: no answer in the file, got\n%s", name, k, v)
		} else if v != wv {
			t.Errorf("%s: %s:\n got %s\nwant %s", name, k, v, wv)
		}
	}
	if !t.Failed() {
		if a, b := mustFormat(t, got), mustFormat(t, want); !bytes.Equal(a, b) {
			t.Errorf("%s: same answers, grouped differently: run with -update", name)
		}
	}
}

func mustFormat(t *testing.T, f walkGoldenFile) []byte {
	b, err := f.format()
	if err != nil {
		t.Fatal(err)
	}
	return b
}
