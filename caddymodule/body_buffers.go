package caddymodule

// Request bodies the gate reads and the translator builds live in pooled
// buffers. A 20 KB agent history per request would otherwise be 20–40 KB of
// garbage per request, and under load the collector's share of that cost
// more than checking the JSON.
//
// A buffer is shared by the forwarded body (gate_body.go), while the
// handler that made it runs, and by every reader the transport opens on it:
// the request's Body and each body GetBody hands out for a retry, which the
// transport may still read or close from another goroutine after its
// RoundTrip returned. Reused early, a buffer would send
// one user's prompt in another user's request, so nothing reads one without
// holding a reference, and it goes back to its pool only when the last
// holder lets go. A reference taken through a stale pointer fails rather
// than pin a buffer that has moved on to another request: the count carries
// the buffer's generation.

import (
	"errors"
	"io"
	"math/bits"
	"sync"
	"sync/atomic"
)

// Buffers from 1 KiB to 1 MiB are pooled, a body above that is rare enough
// to leave to the collector (and would pin its buffer in the pool). Between
// two powers of two there are four classes, so that a buffer held for a
// long stream wastes at most a fifth of itself.
const (
	minBodyBuffer = 1 << 10
	maxBodyBuffer = 1 << 20
)

// bodyClasses has a pool per class: classOf(maxBodyBuffer) + 1.
var bodyClasses [41]sync.Pool

// classOf numbers the class sizes 2^k · (1 + q/4) from 1 KiB: size is one
// of them.
func classOf(size int) int {
	k := bits.Len(uint(size)) - 1
	return (k-10)*4 + (size-1<<k)>>(k-2)
}

// classFor returns the size of the smallest class that holds n bytes, or n
// itself above the largest.
func classFor(n int) int {
	if n <= minBodyBuffer {
		return minBodyBuffer
	}
	k := bits.Len(uint(n)) - 1
	step := 1 << (k - 2)
	return 1<<k + (n-1<<k+step-1)/step*step
}

// classBelow returns the size of the largest class a buffer of c bytes can
// serve, or 0 when it is outside the pooled sizes.
func classBelow(c int) int {
	if c < minBodyBuffer || c > maxBodyBuffer {
		return 0
	}
	k := bits.Len(uint(c)) - 1
	step := 1 << (k - 2)
	return 1<<k + (c-1<<k)/step*step
}

// sharedBody is a request body in a buffer that may be pooled.
type sharedBody struct {
	// data is the body: a prefix of mem, or bytes the gate's rewrite had
	// to allocate. It is set before any reader is opened on it.
	data []byte
	// mem is the buffer: pooled when it is released if its size has a
	// class, nil for bytes of someone else's (sharedBytes).
	mem []byte
	// state is the generation in its high 32 bits and the holders in its
	// low 32.
	state atomic.Uint64
}

// newSharedBody returns a buffer of at least n bytes (mem, empty), held
// once by the caller.
func newSharedBody(n int) *sharedBody {
	var sb *sharedBody
	size := classFor(n)
	if size <= maxBodyBuffer {
		sb, _ = bodyClasses[classOf(size)].Get().(*sharedBody)
	}
	if sb == nil {
		sb = &sharedBody{mem: make([]byte, 0, size)}
	}
	sb.state.Store((sb.state.Load()>>32+1)<<32 | 1)
	return sb
}

// sharedBytes holds b, which is not pooled, for a body's readers.
func sharedBytes(b []byte) *sharedBody {
	sb := &sharedBody{data: b}
	sb.state.Store(1<<32 | 1)
	return sb
}

// gen is the generation a holder saw, for retain.
func (sb *sharedBody) gen() uint32 { return uint32(sb.state.Load() >> 32) }

// retain adds a holder, unless the buffer of generation gen was let go.
func (sb *sharedBody) retain(gen uint32) bool {
	for {
		s := sb.state.Load()
		if uint32(s>>32) != gen || uint32(s) == 0 {
			return false
		}
		if sb.state.CompareAndSwap(s, s+1) {
			return true
		}
	}
}

// release drops a holder; the last one returns the buffer to its pool.
// Nil is held by nobody.
func (sb *sharedBody) release() {
	if sb == nil || uint32(sb.state.Add(^uint64(0))) != 0 || sb.mem == nil {
		return
	}
	size := classBelow(cap(sb.mem))
	if size == 0 {
		return
	}
	sb.data, sb.mem = nil, sb.mem[:0]
	bodyClasses[classOf(size)].Put(sb)
}

// bytes returns the body; nil holds none.
func (sb *sharedBody) bytes() []byte {
	if sb == nil {
		return nil
	}
	return sb.data
}

// fill makes b, built in mem (or grown out of it by append), the body.
func (sb *sharedBody) fill(b []byte) {
	sb.data = b
	if sb.mem != nil && cap(b) > cap(sb.mem) {
		sb.mem = b[:0] // append outgrew the pooled buffer: pool the new one
	}
}

// errBodyGone answers a GetBody after every holder of the body let go: the
// request has ended.
var errBodyGone = errors.New("the request body is no longer available")

// errReadAfterClose is net/http's answer to a read of a closed body.
var errReadAfterClose = errors.New("http: invalid Read on closed Body")

// bodyReader reads a sharedBody, holding it until Close. The transport may
// close it while another goroutine reads it (HTTP/2 aborts a body write
// that way), so reads and Close take a lock; it guards a copy from memory,
// never I/O.
type bodyReader struct {
	mu     sync.Mutex
	sb     *sharedBody
	off    int
	closed bool
}

// open makes r read sb from the start, letting go of what it read before.
// It fails when sb was let go (gen is the generation its holder saw).
func (r *bodyReader) open(sb *sharedBody, gen uint32) bool {
	if !sb.retain(gen) {
		return false
	}
	r.mu.Lock()
	old := r.sb
	if r.closed {
		old = nil // released at Close
	}
	r.sb, r.off, r.closed = sb, 0, false
	r.mu.Unlock()
	old.release()
	return true
}

func (r *bodyReader) Read(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case r.closed || r.sb == nil:
		return 0, errReadAfterClose
	case r.off >= len(r.sb.data):
		return 0, io.EOF
	}
	n := copy(p, r.sb.data[r.off:])
	r.off += n
	return n, nil
}

// Close lets go of the body; later reads fail.
func (r *bodyReader) Close() error {
	r.mu.Lock()
	sb := r.sb
	if r.closed {
		sb = nil
	}
	r.closed = true
	r.mu.Unlock()
	sb.release()
	return nil
}
