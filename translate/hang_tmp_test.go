package translate

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestHangHunt(t *testing.T) {
	m, _ := filepath.Glob("testdata/streams/*.sse")
	r := rand.New(rand.NewPCG(7, 7))
	for iter := 0; iter < 20000; iter++ {
		b, _ := os.ReadFile(m[r.IntN(len(m))])
		for k := 0; k < 1+r.IntN(4); k++ {
			if len(b) == 0 {
				break
			}
			i := r.IntN(len(b))
			switch r.IntN(3) {
			case 0:
				b[i] = byte(r.IntN(256))
			case 1:
				b = append(b[:i], b[min(len(b), i+1+r.IntN(8)):]...)
			case 2:
				j := r.IntN(len(b))
				b = append(b[:i:i], append(b[j:min(len(b), j+r.IntN(20))], b[i:]...)...)
			}
		}
		done := make(chan struct{})
		in := append([]byte(nil), b...)
		go func() {
			defer close(done)
			split := 1 + int(in[0])%64
			for _, up := range []Format{Chat, Messages} {
				for _, client := range []Format{Chat, Messages} {
					for _, reasoning := range []bool{false, true} {
						cfg := &Config{Upstream: up, ThinkPrefilled: reasoning}
						s := NewStream(client, up, Request{Stream: true, IncludeUsage: true, Reasoning: reasoning}, cfg)
						var out []byte
						for p := in; len(p) > 0; {
							n := min(split, len(p))
							out = s.Write(out, p[:n])
							p = p[n:]
						}
						out = s.Close(out)
						if err := checkGrammar(client, up, parseSSE(t, out), false); err != nil {
							t.Errorf("%v <- %v: %v\nin:\n%q\nout:\n%s", client, up, err, in, out)
						}
					}
				}
			}
		}()
		select {
		case <-done:
		case <-time.After(2 * time.Second):
			os.WriteFile("/tmp/hang.sse", in, 0o644)
			t.Fatalf("hang on %q", in)
		}
		if t.Failed() {
			return
		}
	}
}
