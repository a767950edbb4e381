package caddymodule

// Header values the gate and the translator read and set on the hot path,
// without the allocations of http.Header's Get and Set.

import (
	"net/http"
	"strconv"
	"unsafe"
)

// headerValue is h.Get(key) for a canonical key, without canonicalizing
// it again on every call: net/http canonicalizes the keys it parses, and
// Caddy's handlers set them through Set.
func headerValue(h http.Header, key string) string {
	if v := h[key]; len(v) > 0 {
		return v[0]
	}
	return ""
}

// headerValues holds the values of the few headers the translator sets on
// a request or a response, inside an allocation made anyway (the forwarded
// body, the response writer), instead of a new []string and string per
// Header.Set.
type headerValues struct {
	vals   [4]string
	n      int
	digits [20]byte // a Content-Length, written once
	length bool     // digits holds one
}

// set makes value the only value of the canonical header key in h. A
// header with one value is changed in place: its slice belongs to this
// request or response (net/http parsed it, or reverse_proxy copied it).
func (hv *headerValues) set(h http.Header, key, value string) {
	if v := h[key]; len(v) == 1 {
		v[0] = value
		return
	}
	if hv.n == len(hv.vals) {
		h[key] = []string{value}
		return
	}
	hv.vals[hv.n] = value
	h[key] = hv.vals[hv.n : hv.n+1 : hv.n+1]
	hv.n++
}

// setLength makes h's Content-Length say n, unless it does already.
func (hv *headerValues) setLength(h http.Header, n int) {
	if v := h["Content-Length"]; len(v) == 1 && isDecimal(v[0], n) {
		return
	}
	if hv.length { // digits are never written twice: a string points into them
		hv.set(h, "Content-Length", strconv.Itoa(n))
		return
	}
	hv.length = true
	d := strconv.AppendInt(hv.digits[:0], int64(n), 10)
	hv.set(h, "Content-Length", unsafe.String(&d[0], len(d)))
}
