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

// A body stays readable while anyone holds it: the handler that filled it,
// the request's Body, a body GetBody handed out. It is let go when the last
// of them is done, and nothing reads it after that.
func TestSharedBodyHolders(t *testing.T) {
	want := bytes.Repeat([]byte("a prompt of one user. "), 1000)
	sb := newSharedBody(len(want))
	sb.fill(append(sb.mem, want...))
	r := httptest.NewRequest("POST", "/v1/chat/completions", nil)
	fb := setBody(r, sb)
	if holders(sb) != 2 {
		t.Fatalf("%d holders after setBody, want the handler and the request's Body", holders(sb))
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
	sb.release()   // the handler returns
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

// The translator's new body replaces the gate's: the request's Body lets go
// of the old one and holds the new one.
func TestForwardedBodyReplace(t *testing.T) {
	r := httptest.NewRequest("POST", "/compat/v1/messages", nil)
	gate, translated := newSharedBody(10), newSharedBody(10)
	gate.fill(append(gate.mem, `{"old":1}`...))
	translated.fill(append(translated.mem, `{"new":2}`...))
	fb := setBody(r, gate)
	fb.replace(r, translated)
	if holders(gate) != 1 || holders(translated) != 2 {
		t.Fatalf("holders: gate's %d, translated %d", holders(gate), holders(translated))
	}
	if got, _ := io.ReadAll(r.Body); string(got) != `{"new":2}` || r.ContentLength != 9 {
		t.Fatalf("Body %q, length %d", got, r.ContentLength)
	}
	r.Body.Close()
	translated.release()
	gate.release()
	if holders(gate)+holders(translated) != 0 {
		t.Fatalf("holders left: %d, %d", holders(gate), holders(translated))
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
		setBody(r, sb)
		retry, err := r.GetBody()
		if err != nil {
			t.Fatal(err)
		}
		sb.release()
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

// Buffers come in power-of-two classes from 1 KiB; above 1 MiB they are
// not pooled.
func TestNewSharedBodySizes(t *testing.T) {
	for _, c := range []struct{ n, cap int }{{0, 1 << 10}, {1, 1 << 10}, {1024, 1 << 10}, {1025, 2 << 10}, {20001, 32 << 10}, {1 << 20, 1 << 20}} {
		sb := newSharedBody(c.n)
		if cap(sb.mem) != c.cap || len(sb.mem) != 0 || holders(sb) != 1 {
			t.Errorf("newSharedBody(%d): cap %d, len %d, %d holders; want cap %d", c.n, cap(sb.mem), len(sb.mem), holders(sb), c.cap)
		}
		sb.release()
	}
	if sb := newSharedBody(1<<20 + 1); cap(sb.mem) != 1<<20+1 {
		t.Errorf("a body above 1 MiB: cap %d", cap(sb.mem))
	}
}
