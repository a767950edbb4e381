package translate

import (
	"slices"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
)

// oldStringEnd and oldMaxDepth are stringEnd and maxDepth as they were
// before the word-at-a-time scan: the references the new ones are held to.
func oldStringEnd(s string, i int) int {
	j := i + 1
	for end := min(len(s), j+32); j < end; j++ {
		switch s[j] {
		case '"':
			return j + 1
		case '\\':
			j++
		}
	}
	for j < len(s) {
		k := strings.IndexByte(s[j:], '"')
		if k < 0 {
			return -1
		}
		j += k
		n := 0
		for b := j - 1; b > i && s[b] == '\\'; b-- {
			n++
		}
		if n%2 == 0 {
			return j + 1
		}
		j++
	}
	return -1
}

func oldMaxDepth(s string, limit int) int {
	depth, deepest := 0, 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '"':
			e := oldStringEnd(s, i)
			if e < 0 {
				return deepest
			}
			i = e - 1
		case '{', '[':
			depth++
			if depth > deepest {
				deepest = depth
				if deepest > limit {
					return deepest
				}
			}
		case '}', ']':
			depth--
		}
	}
	return deepest
}

var scanLimits = []int{1, 2, 3, 8, DefaultMaxDepth}

// checkScan holds checkJSON, checkBody and stringEnd to the references on s.
func checkScan(t *testing.T, s string) {
	t.Helper()
	want := gjson.Valid(s)
	if ok, deep := checkJSON(s, len(s)); ok != want || deep {
		t.Fatalf("checkJSON(%q, no limit) = %v, %v; gjson.Valid says %v", s, ok, deep, want)
	}
	if validJSONAny(s) != want {
		t.Fatalf("validJSONAny(%q) = %v; gjson.Valid says %v", s, !want, want)
	}
	for _, limit := range scanLimits {
		wantDeep := oldMaxDepth(s, limit) > limit
		ok, deep := checkJSON(s, limit)
		if deep != wantDeep || (!deep && ok != want) || (deep && ok) {
			t.Fatalf("checkJSON(%q, %d) = %v, %v; want deep %v, valid %v", s, limit, ok, deep, wantDeep, want)
		}
		// The translator's old order: depth, then validity.
		var msg string
		switch {
		case wantDeep:
			msg = "nested"
		case !want:
			msg = "not valid JSON"
		}
		err := checkBody(s, limit)
		if (err == nil) != (msg == "") || (err != nil && !strings.Contains(err.Message, msg)) {
			t.Fatalf("checkBody(%q, %d) = %v, want %q", s, limit, err, msg)
		}
	}
	checkMembers(t, s)
	for i := 0; i < len(s); i++ {
		if s[i] == '"' {
			if got, want := stringEnd(s, i), oldStringEnd(s, i); got != want {
				t.Fatalf("stringEnd(%q, %d) = %d, want %d", s, i, got, want)
			}
		}
	}
}

// checkMembers: CheckBodyMembers errs as CheckBody does, and on an object
// gives the members gjson reads, raw.
func checkMembers(t *testing.T, s string) {
	t.Helper()
	var got []string
	err := CheckBodyMembers([]byte(s), func(k, v string) { got = append(got, k, v) })
	if want := CheckBody([]byte(s)); !sameError(err, want) {
		t.Fatalf("CheckBodyMembers(%q) = %v, CheckBody says %v", s, err, want)
	}
	if err != nil {
		return
	}
	var want []string
	if root := gjson.Parse(s); root.IsObject() {
		root.ForEach(func(k, v gjson.Result) bool {
			want = append(want, k.Raw, v.Raw)
			return true
		})
	}
	if !slices.Equal(got, want) {
		t.Fatalf("CheckBodyMembers(%q) members %q, gjson reads %q", s, got, want)
	}
}

var scanCases = []string{
	``, ` `, `{}`, ` {} `, `[]`, `[ ]`, `{ }`, `{`, `}`, `[`, `]`, `{]`, `[}`, `[[]`, `[]]`, `{}{}`, `{} x`,
	`0`, `-0`, `-`, `01`, `1.`, `1.5`, `.5`, `1e`, `1e+`, `1e+5`, `1E-5`, `1.5e3`, `-1.5e-3x`, `+1`, `2 `, `[1,]`, `[,1]`, `[1 2]`,
	`true`, `tru`, `truex`, `[true,false,null]`, `nul`, `[nulll]`, `falsey`,
	`""`, `"`, `"a`, `"\"`, `"\\"`, `"\\\""`, `"\/\b\f\n\r\t"`, `"\x"`, `"\u00e9"`, `"\u00G9"`, `"\u00e"`, `"\uD83D\uDE00"`,
	"\"a\tb\"", "\"a\x1fb\"", "\"a\x7fb\"", "\"\xff\xfe\"", "\"caf\xc3\xa9\"", "{\"a\"\n:\r1\t}",
	`{"a":1}`, `{"a":1,}`, `{"a" 1}`, `{"a":}`, `{a:1}`, `{"a":1 "b":2}`, `{"a":[1,{"b":[]}],"c":{}}`, `{"a":{"b":{"c":[[[]]]}}}`,
	`{"a":"01234567\"89abcdef\\"}`, `{"abcdefghijklmnop":"qrstuvwxyz012345678\\\\\\"9"}`, `["abcdefgh\u12", "x"]`,
	`[1,2]]`, `[{"a":1}}`, `{"a":[1}`, `[[[[[[[[[1]]]]]]]]]`, `{"x":"}"]`, `"{["`, `{"a":"[[[[[[[[["}`,
}

func TestCheckJSON(t *testing.T) {
	for _, s := range scanCases {
		checkScan(t, s)
	}
	for _, f := range []Format{Chat, Messages} {
		checkScan(t, string(history(f, 20<<10)))
	}
}

// A deep body costs no stack: refused at the limit, or checked to the end
// (past the bit stack's first 256 levels) when there is none.
func TestCheckJSONDeep(t *testing.T) {
	deep := strings.Repeat(`[{"a":`, 100000) + "1" + strings.Repeat("}]", 100000)
	if ok, tooDeep := checkJSON(deep, DefaultMaxDepth); ok || !tooDeep {
		t.Errorf("limit %d: %v, %v", DefaultMaxDepth, ok, tooDeep)
	}
	if !validJSONAny(deep) {
		t.Error("a valid 200000-level body is refused")
	}
	for _, broken := range []string{deep[:len(deep)-1], strings.Replace(deep, "}", "]", 1), strings.Replace(deep, "}]", "]}", 1)} {
		if validJSONAny(broken) {
			t.Errorf("a broken deep body is accepted")
		}
	}
}

func TestCheckJSONAllocs(t *testing.T) {
	body := string(history(Messages, 20<<10))
	if n := testing.AllocsPerRun(20, func() { checkJSON(body, DefaultMaxDepth) }); n != 0 {
		t.Errorf("%v allocs", n)
	}
}

func seedScan(f *testing.F) {
	for _, s := range scanCases {
		f.Add([]byte(s))
	}
	for _, pat := range []string{"requests/*.in.json", "responses/*.json", "streams/*.sse"} {
		seedFiles(f, pat)
	}
	seedClientBodies(f)
	for _, c := range []Format{Chat, Messages} {
		f.Add(history(c, 1<<10))
		f.Add(history(c, 4<<10))
	}
}

// FuzzCheckJSON: checkJSON says what gjson.Valid and the old maxDepth say.
func FuzzCheckJSON(f *testing.F) {
	seedScan(f)
	f.Fuzz(func(t *testing.T, b []byte) { checkScan(t, string(b)) })
}

// FuzzStringEnd: stringEnd finds the end the old byte loop found, from any
// quote, in strings full of quotes and backslashes.
func FuzzStringEnd(f *testing.F) {
	seedScan(f)
	f.Add([]byte(`"\\\\\\\\\\\\\\\\\\\\\\\\\\\\\\\\\\\\\\\\\\\\\\\\\\\\\\\\\\\\\\\"\\\\"`))
	f.Fuzz(func(t *testing.T, b []byte) {
		s := string(b)
		for i := 0; i < len(s); i++ {
			if s[i] == '"' {
				if got, want := stringEnd(s, i), oldStringEnd(s, i); got != want {
					t.Fatalf("stringEnd(%q, %d) = %d, want %d", s, i, got, want)
				}
			}
		}
	})
}

// BenchmarkCheckJSON: the gate's and the translator's checks of a 20 KB
// body, one pass against the two they made.
func BenchmarkCheckJSON(b *testing.B) {
	body := string(history(Messages, 20<<10))
	for _, c := range []struct {
		name  string
		check func(string) bool
	}{
		{"checkJSON", func(s string) bool { ok, deep := checkJSON(s, DefaultMaxDepth); return ok && !deep }},
		{"gjson.Valid", gjson.Valid},
		{"gjson.Valid+maxDepth", func(s string) bool { return gjson.Valid(s) && maxDepth(s, DefaultMaxDepth) <= DefaultMaxDepth }},
		{"maxDepth", func(s string) bool { return maxDepth(s, DefaultMaxDepth) <= DefaultMaxDepth }},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			for b.Loop() {
				if !c.check(body) {
					b.Fatal("refused")
				}
			}
		})
	}
}

// toInt reads short integers itself (smallInt) and the rest with strconv;
// both give what strconv alone gives.
func TestToInt(t *testing.T) {
	for _, c := range []struct {
		in   string
		n    int64
		isOK bool
	}{
		{"0", 0, true}, {"7", 7, true}, {"-0", 0, true}, {"-12", -12, true}, {"12345678901234567", 12345678901234567, true},
		{"123456789012345678", 123456789012345678, true}, {"-9223372036854775808", -9223372036854775808, true},
		{"9223372036854775808", 0, false}, {"3.0", 3, true}, {"3e2", 300, true}, {"1.5", 0, false},
		{"-", 0, false}, {"", 0, false}, {"+1", 0, false}, {"1a", 0, false}, {`"1"`, 0, false}, {"null", 0, false},
	} {
		if n, ok := toInt(c.in); n != c.n || ok != c.isOK {
			t.Errorf("toInt(%q) = %d, %v; want %d, %v", c.in, n, ok, c.n, c.isOK)
		}
	}
}
