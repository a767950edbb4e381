package translate

import (
	"strings"
	"testing"
)

// refStringBodyEnd is stringBodyEnd one byte at a time, straight from its
// contract: the reference the word-at-a-time scan is held to.
func refStringBodyEnd(s string, i int) int {
	for ; i < len(s); i++ {
		switch c := s[i]; {
		case c == '"':
			return i + 1
		case c < 0x20:
			return -1
		case c != '\\':
			continue
		}
		if i+1 >= len(s) {
			return -1
		}
		switch s[i+1] {
		case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			i++
		case 'u':
			if i+6 > len(s) {
				return -1
			}
			for _, h := range []byte(s[i+2 : i+6]) {
				if !strings.ContainsRune("0123456789abcdefABCDEF", rune(h)) {
					return -1
				}
			}
			i += 5
		default:
			return -1
		}
	}
	return -1
}

// checkStringBodyEnd holds stringBodyEnd to the reference from the start of
// s and from just after each of its quotes.
func checkStringBodyEnd(t *testing.T, s string) {
	t.Helper()
	for i := 0; i <= len(s); i++ {
		if i == 0 || s[i-1] == '"' {
			if got, want := stringBodyEnd(s, i), refStringBodyEnd(s, i); got != want {
				t.Fatalf("stringBodyEnd(%q, %d) = %d, want %d", s, i, got, want)
			}
		}
	}
}

const proseLine = "The build failed because the linker could not find the symbol init_module; " +
	"check the Makefile and the include paths, then run make again with V=1 to see the full command line. "

// prose is n bytes of text with no byte a string's scan stops at.
func prose(n int) string {
	return strings.Repeat(proseLine, n/len(proseLine)+1)[:n]
}

// stringStopCases are string bodies, without their opening quote, with the
// bytes a scan stops at around the places stringBodyEnd changes gear: each
// word of its first 32 bytes, the start of longRunEnd and its windows, the
// 128 bytes after an escape, and the last byte.
func stringStopCases() []string {
	stops := []string{`"`, `\"`, `\\`, `\/`, `\n`, `\u00e9`, `\u00E9`, `\u00g9`, `\u12"`, `\u`, `\x`, `\`, "\x00", "\n", "\x1f", "\x7f", "\xc3\xa9", "\xff"}
	var cases []string
	for _, n := range []int{0, 1, 7, 8, 9, 15, 16, 17, 23, 24, 25, 31, 32, 33, 39, 40, 41, 63, 64, 65, 127, 128, 129, 160, 161, 287, 288, 289, 530} {
		text := prose(n)
		cases = append(cases, text, text+`"`, text+`"}`, text+`",`+text+`"`)
		for _, stop := range stops {
			cases = append(cases, text+stop, text+stop+`"`, text+stop+text+`"`, stop+text+`"`, `\n`+text+stop+prose(40)+`"`)
		}
	}
	return cases
}

// TestStringBodyEnd: every stop byte at every offset of a long run, in a
// string's first run and after an escape, and pairs of them in short runs,
// as the reference scans them.
func TestStringBodyEnd(t *testing.T) {
	for _, s := range stringStopCases() {
		checkStringBodyEnd(t, s)
		checkStringBodyEnd(t, `"`+s)
	}
	stops := []string{`"`, `\"`, `\n`, `\u12G4`, `\q`, `\`, "\x01", "\x1f"}
	for _, head := range []string{"", `\n`} {
		text := prose(1400)
		for p := 0; p <= len(text); p++ {
			if p > 700 && p < 1280 && p != len(text)-1 {
				p = 1280 // past the second window's start, to the third's
			}
			for _, stop := range stops {
				checkStringBodyEnd(t, `"`+head+text[:p]+stop+text[p:]+`"`)
			}
			checkStringBodyEnd(t, `"`+head+text[:p]) // not closed
		}
	}
	for n := 0; n < 80; n++ {
		for m := 0; m < 80; m += 3 {
			for _, a := range stops {
				for _, b := range stops {
					checkStringBodyEnd(t, `"`+prose(n)+a+prose(m)+b+prose(5)+`"`)
				}
			}
		}
	}
}

// FuzzStringBodyEnd: stringBodyEnd ends a string where the byte-at-a-time
// reference does, from the start of the input and after each quote.
func FuzzStringBodyEnd(f *testing.F) {
	for _, s := range stringStopCases() {
		f.Add([]byte(s))
	}
	for n := 24; n <= 72; n++ { // each offset mod 8, 16 and 32 about the first 32 bytes
		for _, stop := range []string{`"`, `\n`, `\"`, `\u00g9`, "\x01"} {
			f.Add([]byte(`"` + prose(n) + stop + prose(40) + `"`))
		}
	}
	for _, n := range []int{100, 300, 530, 1400, 5000} {
		text := prose(n)
		f.Add([]byte(`"` + text + `"`))
		f.Add([]byte(`"` + text))
		f.Add([]byte(`"` + text + "\x01\""))
		f.Add([]byte(`"` + text[:n/2] + "\x1f" + text[n/2:] + `"`))
		f.Add([]byte(`"` + text[:n/2] + `\u00zz` + text[n/2:] + `"`))
		f.Add([]byte(`"` + text[:n/2] + `\n` + text[n/2:] + `"`))
	}
	f.Add([]byte(`"` + strings.Repeat(`make \"all\"\n`, 40) + `"`))
	f.Add([]byte(`{"role":"user","content":"` + prose(600) + `\n` + prose(90) + `"}`))
	f.Fuzz(func(t *testing.T, b []byte) { checkStringBodyEnd(t, string(b)) })
}

// stringBenchCases are the strings BenchmarkStringBodyEnd scans: a short
// key or value, clean message texts, source code dense with escapes, prose
// broken into lines of 80 bytes, and paragraphs of 300.
func stringBenchCases() []struct{ name, s string } {
	var lines strings.Builder
	for lines.Len() < 2000 {
		lines.WriteString(prose(78) + `\n`)
	}
	return []struct{ name, s string }{
		{"short", `"short one"`},
		{"clean530", `"` + prose(528) + `"`},
		{"clean5000", `"` + prose(4998) + `"`},
		{"dense562", `"` + strings.Repeat(`make \"all\"\n`, 40) + `"`},
		{"lines2000", `"` + lines.String() + `"`},
		{"paragraphs3000", `"` + strings.Repeat(prose(298)+`\n\n`, 10) + `"`},
	}
}

// BenchmarkStringBodyEnd: the scan of one string; strings are most of the
// bytes CheckBody reads.
func BenchmarkStringBodyEnd(b *testing.B) {
	for _, c := range stringBenchCases() {
		b.Run(c.name, func(b *testing.B) {
			s := c.s
			b.SetBytes(int64(len(s)))
			for b.Loop() {
				if stringBodyEnd(s, 1) != len(s) {
					b.Fatal("wrong end")
				}
			}
		})
	}
}
