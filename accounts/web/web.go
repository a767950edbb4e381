// Package web serves the buyer's account page at /account/: static files
// embedded in the binary (no build step, nothing from third-party hosts but
// Stripe.js when Stripe is the processor) that talk to /api/*.
package web

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"strings"
	"time"
)

//go:embed static
var files embed.FS

// Prefix is where the page lives.
const Prefix = "/account/"

// Options configures the page.
type Options struct {
	// Stripe allows Stripe.js and its frames in the page's Content-Security-Policy.
	Stripe bool
}

// Handler serves the page.
type Handler struct {
	assets map[string]asset // by name under static/
	csp    string
}

type asset struct {
	body        []byte
	etag        string
	contentType string
}

// New loads the embedded files.
func New(opts Options) *Handler {
	h := &Handler{assets: make(map[string]asset), csp: contentSecurityPolicy(opts.Stripe)}
	err := fs.WalkDir(files, "static", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		body, err := files.ReadFile(p)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(body)
		ct := mime.TypeByExtension(path.Ext(p))
		if ct == "" {
			ct = http.DetectContentType(body)
		}
		h.assets[strings.TrimPrefix(p, "static/")] = asset{body: body, etag: `"` + hex.EncodeToString(sum[:12]) + `"`, contentType: ct}
		return nil
	})
	if err != nil {
		panic("web: reading embedded files: " + err.Error()) // the binary itself is broken
	}
	return h
}

// contentSecurityPolicy allows the page's own files and, with Stripe, what
// Stripe.js needs to load, call its API and show its card and 3-D Secure frames.
func contentSecurityPolicy(stripe bool) string {
	script, connect, frame := "'self'", "'self'", "'none'"
	if stripe {
		script += " https://js.stripe.com"
		connect += " https://api.stripe.com"
		frame = "https://js.stripe.com https://hooks.stripe.com"
	}
	return "default-src 'self'; script-src " + script + "; style-src 'self'; img-src 'self' data:; " +
		"connect-src " + connect + "; frame-src " + frame + "; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
}

// ServeHTTP serves a file of the page, or the page itself for any other
// path under /account/ (the sign-in link's /account/sign-in among them).
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "the account page only answers GET and HEAD", http.StatusMethodNotAllowed)
		return
	}
	if r.URL.Path == strings.TrimSuffix(Prefix, "/") {
		http.Redirect(w, r, Prefix, http.StatusMovedPermanently)
		return
	}
	name, ok := strings.CutPrefix(r.URL.Path, Prefix)
	if !ok {
		http.NotFound(w, r)
		return
	}
	a, ok := h.assets[name]
	if !ok {
		if path.Ext(name) != "" {
			http.Error(w, "no such file: "+r.URL.Path, http.StatusNotFound)
			return
		}
		a = h.assets["index.html"]
	}
	hdr := w.Header()
	hdr.Set("Content-Type", a.contentType)
	hdr.Set("ETag", a.etag)
	// Revalidate every time: an upgrade must never leave an old script
	// talking to a new API. The ETag makes that a 304.
	hdr.Set("Cache-Control", "no-cache")
	hdr.Set("X-Content-Type-Options", "nosniff")
	// The sign-in link's token is in the URL: never send it on as a Referer.
	hdr.Set("Referrer-Policy", "no-referrer")
	hdr.Set("Content-Security-Policy", h.csp)
	hdr.Set("X-Frame-Options", "DENY")
	http.ServeContent(w, r, name, time.Time{}, bytes.NewReader(a.body))
}
