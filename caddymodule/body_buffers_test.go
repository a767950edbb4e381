package caddymodule

import (
	"bytes"
	"errors"
	"io"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// holders is how many hold sb now.
func holders(sb *sharedBody) uint32 { return uint32(sb.state.Load()) }

// A body stays readable while anyone holds it: the forwarded body (until
// the handler that made it returns), the request's Body, a body GetBody
// handed out. It is let go when the last of them is done, and nothing reads
// it after that.
func TestSharedBodyHolders(t *testing.T) {
	want := bytes.Repeat([]byte("a prompt of one user. "), 1000)
	sb := newSharedBody(len(want))
	sb.fill(append(sb.mem, want...))
	r := httptest.NewRequest("POST", "/v1/chat/completions", nil)
	fb := setBody(r, sb)
	if holders(sb) != 2 {
		t.Fatalf("%d holders after setBody, want the forwarded body and the request's Body", holders(sb))
	}
	retry, err := r.GetBody()
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := io.ReadAll(r.Body); !bytes.Equal(got, want) {
		t.Fatalf("Body read %d bytes, want %d", len(got), len(want))
	}
	r.Body.Close()
	r.Body.Close() // a second Close lets go of nothing more
	fb.release()   // the handler returns
	if holders(sb) != 1 {
		t.Fatalf("%d holders, want the retry's body alone", holders(sb))
	}
	if _, err := r.Body.Read(make([]byte, 8)); !errors.Is(err, errReadAfterClose) {
		t.Fatalf("read after Close: %v", err)
	}
	if got, _ := io.ReadAll(retry); !bytes.Equal(got, want) {
		t.Fatalf("retry read %d bytes, want %d", len(got), len(want))
	}
	if !bytes.Equal(fb.Bytes(), want) {
		t.Fatal("Bytes changed while the body was held")
	}
	retry.Close()
	if holders(sb) != 0 || sb.mem == nil || len(sb.mem) != 0 || sb.data != nil {
		t.Fatalf("after the last Close: %d holders, data %d bytes: not returned to its pool", holders(sb), len(sb.data))
	}
	if _, err := r.GetBody(); !errors.Is(err, errBodyGone) {
		t.Fatalf("GetBody after the request ended: %v", err)
	}
	// The buffer moves on to another request (as newSharedBody does): a
	// GetBody through the old request's stale pointer must not take it.
	sb.state.Store((uint64(sb.gen())+1)<<32 | 1)
	if _, err := r.GetBody(); !errors.Is(err, errBodyGone) || holders(sb) != 1 {
		t.Fatalf("GetBody on a reused buffer: %v, %d holders", err, holders(sb))
	}
}

// The translator's new body replaces the gate's: the forwarded body and the
// request's Body let go of the old one, which is free at once, and hold the
// new one.
func TestForwardedBodyReplace(t *testing.T) {
	r := httptest.NewRequest("POST", "/compat/v1/messages", nil)
	gate, translated := newSharedBody(10), newSharedBody(10)
	gate.fill(append(gate.mem, `{"old":1}`...))
	translated.fill(append(translated.mem, `{"new":2}`...))
	fb := setBody(r, gate)
	fb.replace(r, translated)
	if holders(gate) != 0 || gate.data != nil || holders(translated) != 2 {
		t.Fatalf("holders: gate's %d (data %q), translated %d", holders(gate), gate.data, holders(translated))
	}
	if got, _ := io.ReadAll(r.Body); string(got) != `{"new":2}` || r.ContentLength != 9 {
		t.Fatalf("Body %q, length %d", got, r.ContentLength)
	}
	r.Body.Close()
	fb.release()
	if holders(translated) != 0 {
		t.Fatalf("%d holders left", holders(translated))
	}
}

// The transport may close a body while another goroutine reads it (HTTP/2
// aborting a write). Run with -race: reads see the body or an error, never
// a buffer let go, and the body is let go once.
func TestBodyReaderCloseWhileReading(t *testing.T) {
	want := strings.Repeat("0123456789", 3000)
	for range 200 {
		sb := newSharedBody(len(want))
		sb.fill(append(sb.mem, want...))
		r := httptest.NewRequest("POST", "/v1/chat/completions", nil)
		fb := setBody(r, sb)
		retry, err := r.GetBody()
		if err != nil {
			t.Fatal(err)
		}
		fb.release()
		var wg sync.WaitGroup
		for _, rd := range []io.ReadCloser{r.Body, retry} {
			wg.Go(func() {
				var got []byte
				buf := make([]byte, 512)
				for {
					n, err := rd.Read(buf)
					got = append(got, buf[:n]...)
					if err == io.EOF {
						if string(got) != want {
							t.Errorf("read %d bytes, not the body", len(got))
						}
						return
					}
					if err != nil {
						if !strings.HasPrefix(want, string(got)) {
							t.Error("read bytes that are not the body's")
						}
						return
					}
				}
			})
			wg.Go(func() { rd.Close() })
		}
		wg.Wait()
		if h := holders(sb); h != 0 {
			t.Fatalf("%d holders after both readers closed", h)
		}
	}
}

// Buffers come in four classes per power of two from 1 KiB; above 1 MiB
// they are not pooled. A buffer goes back to the largest class it can
// serve.
func TestBodyBufferClasses(t *testing.T) {
	if n := classOf(maxBodyBuffer) + 1; n != len(bodyClasses) {
		t.Fatalf("%d classes, %d pools", n, len(bodyClasses))
	}
	for _, c := range []struct{ n, cap int }{
		{0, 1024}, {1, 1024}, {1024, 1024}, {1025, 1280}, {1280, 1280}, {1281, 1536}, {1793, 2048},
		{20001, 20480}, {20481, 24576}, {1 << 20, 1 << 20},
	} {
		sb := newSharedBody(c.n)
		if cap(sb.mem) != c.cap || len(sb.mem) != 0 || holders(sb) != 1 {
			t.Errorf("newSharedBody(%d): cap %d, len %d, %d holders; want cap %d", c.n, cap(sb.mem), len(sb.mem), holders(sb), c.cap)
		}
		sb.release()
	}
	if sb := newSharedBody(1<<20 + 1); cap(sb.mem) < 1<<20+1 {
		t.Errorf("a body above 1 MiB: cap %d", cap(sb.mem))
	}
	seen := map[int]bool{}
	for size := minBodyBuffer; size <= maxBodyBuffer; size = classFor(size + 1) {
		if classFor(size) != size || classBelow(size) != size || (size < maxBodyBuffer && classBelow(size+1) != size) || seen[classOf(size)] {
			t.Errorf("class %d: classFor %d, classBelow %d and of one more %d, index %d seen %v",
				size, classFor(size), classBelow(size), classBelow(size+1), classOf(size), seen[classOf(size)])
		}
		seen[classOf(size)] = true
	}
	if len(seen) != len(bodyClasses) {
		t.Errorf("%d class sizes, %d pools", len(seen), len(bodyClasses))
	}
	for _, c := range []int{minBodyBuffer - 1, maxBodyBuffer + 1} {
		if classBelow(c) != 0 {
			t.Errorf("classBelow(%d) = %d, want 0: not pooled", c, classBelow(c))
		}
	}
}

// A request answered without being sent on (nobody closes its Body) still
// gives its buffer back when the handler that made the forwarded body
// returns; a body GetBody handed out keeps it until it is closed.
func TestForwardedBodyReleaseClosesBody(t *testing.T) {
	r := httptest.NewRequest("POST", "/compat/v1/messages/count_tokens", nil)
	sb := newSharedBody(10)
	sb.fill(append(sb.mem, `{"a":1}`...))
	fb := setBody(r, sb)
	retry, err := r.GetBody()
	if err != nil {
		t.Fatal(err)
	}
	fb.release()
	if _, err := r.Body.Read(make([]byte, 1)); !errors.Is(err, errReadAfterClose) || holders(sb) != 1 {
		t.Fatalf("after release: read %v, %d holders (want the retry's alone)", err, holders(sb))
	}
	if got, _ := io.ReadAll(retry); string(got) != `{"a":1}` {
		t.Fatalf("retry read %q", got)
	}
	retry.Close()
	if holders(sb) != 0 {
		t.Fatalf("%d holders", holders(sb))
	}
}
