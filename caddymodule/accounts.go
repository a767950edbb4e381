package caddymodule

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/timeblock/timeblock/accounts/admission"
	"github.com/timeblock/timeblock/accounts/api"
	"github.com/timeblock/timeblock/accounts/web"
)

func init() {
	caddy.RegisterModule(Accounts{})
	httpcaddyfile.RegisterHandlerDirective("timeblock_accounts", parseAccounts)
}

// Accounts serves the account API (/api/*) from the timeblock app's store,
// and the buyer's account page (/account/).
//
// Failed credential checks (every 401 the API answers: no credential, an
// unknown or expired session token, an unknown or revoked management key)
// count against the client address in the same throttle as the gate's key
// checks; past KeyFailuresPerMinute in a minute, the address gets 429 with
// Retry-After before its credential is looked up.
type Accounts struct {
	// KeyFailuresPerMinute is as for timeblock_gate (default 60; a negative
	// value, written 0 in the Caddyfile, turns the throttle off).
	KeyFailuresPerMinute int `json:"key_failures_per_minute,omitempty"`
	// SiteAddress is the base URL e-mail sign-in links point to, such as
	// https://seats.example. Without it, links are only sent for requests
	// to a loopback host (the quick start): otherwise a request's Host
	// header could aim someone's link at another site.
	SiteAddress string `json:"site_address,omitempty"`
	// IdentityHeader names the header an identity provider sets to the
	// signed-in user's e-mail (forward_auth's copy_headers, e.g.
	// Remote-Email). Set it only on a handler behind forward_auth, on a
	// route that first deletes the header from the client's request: the
	// header is trusted as is. E-mail sign-in is then off on every
	// timeblock_accounts handler of the config, not only this one.
	IdentityHeader string `json:"identity_header,omitempty"`

	app  *App
	api  http.Handler // the app's account API, or one built with this handler's options
	page *web.Handler
}

// CaddyModule returns the Caddy module information.
func (Accounts) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "http.handlers.timeblock_accounts",
		New: func() caddy.Module { return new(Accounts) },
	}
}

// Provision binds the handler to the timeblock app.
func (a *Accounts) Provision(ctx caddy.Context) error {
	app, err := ctx.App("timeblock")
	if err != nil {
		return err
	}
	a.app = app.(*App)
	a.api = a.app.api
	if a.IdentityHeader != "" {
		// Requests come only after every handler is provisioned, so each
		// handler of the app sees this before its first sign-in request.
		a.app.identityProvider.Store(true)
	}
	if a.SiteAddress != "" || a.IdentityHeader != "" {
		opts := a.app.apiOpts
		opts.SiteAddress = strings.TrimSuffix(a.SiteAddress, "/")
		opts.IdentityHeader = a.IdentityHeader
		a.api = api.New(a.app.service, opts)
	}
	a.page = web.New(web.Options{Stripe: a.app.Billing != nil})
	return nil
}

// Validate checks the sign-in options.
func (a *Accounts) Validate() error {
	if a.SiteAddress != "" {
		u, err := url.Parse(a.SiteAddress)
		if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || (u.Path != "" && u.Path != "/") || u.RawQuery != "" {
			return fmt.Errorf("timeblock_accounts: site_address %q is not a site's address such as https://seats.example", a.SiteAddress)
		}
	}
	if a.IdentityHeader != "" && http.CanonicalHeaderKey(a.IdentityHeader) == "Authorization" {
		return errors.New("timeblock_accounts: identity_header cannot be Authorization (scripts send their credentials there)")
	}
	return nil
}

// Cleanup releases nothing: the store belongs to the app.
func (a *Accounts) Cleanup() error { return nil }

// ServeHTTP answers an account API request or serves the page; it never
// calls next.
func (a *Accounts) ServeHTTP(w http.ResponseWriter, r *http.Request, _ caddyhttp.Handler) error {
	if p := r.URL.Path; p == "/account" || strings.HasPrefix(p, web.Prefix) {
		a.page.ServeHTTP(w, r)
		return nil
	}
	limit := (&Gate{KeyFailuresPerMinute: a.KeyFailuresPerMinute}).keyFailureLimit()
	var throttle *admission.FailureThrottle
	// The throttle is the gate's; it exists once the store is open, which
	// every API request but the page waits for anyway.
	if gs := a.app.shared.gate; limit > 0 && gs.wait(r.Context()) == nil {
		throttle = gs.guard.throttle
	}
	if throttle == nil {
		a.api.ServeHTTP(w, r)
		return nil
	}
	addr := clientAddr(r)
	if wait := throttle.Check(addr, limit, time.Now()); wait > 0 {
		retry := strconv.Itoa(int((wait + time.Second - 1) / time.Second))
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		w.Header().Set("Retry-After", retry)
		w.WriteHeader(http.StatusTooManyRequests)
		_, err := w.Write([]byte(`{"success":false,"error":"too many requests with missing or invalid credentials from this address; retry in ` + retry + `s"}` + "\n"))
		return err
	}
	sw := &statusWriter{ResponseWriter: w}
	a.api.ServeHTTP(sw, r)
	if sw.status == http.StatusUnauthorized {
		throttle.Fail(addr, time.Now())
	}
	return nil
}

// statusWriter remembers the status an account API answer was written with.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(status int) {
	if w.status == 0 {
		w.status = status
	}
	w.ResponseWriter.WriteHeader(status)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func parseAccounts(h httpcaddyfile.Helper) (caddyhttp.MiddlewareHandler, error) {
	a := new(Accounts)
	err := a.UnmarshalCaddyfile(h.Dispenser)
	return a, err
}

// UnmarshalCaddyfile parses:
//
//	timeblock_accounts {
//		key_failures_per_minute <n>
//		site_address <https://your.site>
//		identity_header <header name>
//	}
func (a *Accounts) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next() // directive name
	if d.NextArg() {
		return d.ArgErr()
	}
	for d.NextBlock(0) {
		switch d.Val() {
		case "key_failures_per_minute":
			n, err := keyFailuresArg(d)
			if err != nil {
				return err
			}
			a.KeyFailuresPerMinute = n
		case "site_address":
			if err := singleArg(d, &a.SiteAddress); err != nil {
				return err
			}
		case "identity_header":
			if err := singleArg(d, &a.IdentityHeader); err != nil {
				return err
			}
		default:
			return d.Errf("unknown timeblock_accounts option %q", d.Val())
		}
	}
	return nil
}

// Interface guards
var (
	_ caddy.Provisioner           = (*Accounts)(nil)
	_ caddy.Validator             = (*Accounts)(nil)
	_ caddy.CleanerUpper          = (*Accounts)(nil)
	_ caddyhttp.MiddlewareHandler = (*Accounts)(nil)
	_ caddyfile.Unmarshaler       = (*Accounts)(nil)
)
