package caddymodule

import (
	"net/http"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
)

func init() {
	caddy.RegisterModule(Accounts{})
	httpcaddyfile.RegisterHandlerDirective("timeblock_accounts", parseAccounts)
}

// Accounts serves the account API (/api/*) from the timeblock app's store.
type Accounts struct {
	app *App
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
	return nil
}

// Cleanup releases nothing: the store belongs to the app.
func (a *Accounts) Cleanup() error { return nil }

// ServeHTTP answers an account API request; it never calls next.
func (a *Accounts) ServeHTTP(w http.ResponseWriter, r *http.Request, _ caddyhttp.Handler) error {
	a.app.api.ServeHTTP(w, r)
	return nil
}

func parseAccounts(h httpcaddyfile.Helper) (caddyhttp.MiddlewareHandler, error) {
	a := new(Accounts)
	err := a.UnmarshalCaddyfile(h.Dispenser)
	return a, err
}

// UnmarshalCaddyfile parses `timeblock_accounts`, which takes no options.
func (a *Accounts) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next() // directive name
	if d.NextArg() {
		return d.ArgErr()
	}
	for d.NextBlock(0) {
		return d.Errf("unknown timeblock_accounts option %q", d.Val())
	}
	return nil
}

// Interface guards
var (
	_ caddy.Provisioner           = (*Accounts)(nil)
	_ caddy.CleanerUpper          = (*Accounts)(nil)
	_ caddyhttp.MiddlewareHandler = (*Accounts)(nil)
	_ caddyfile.Unmarshaler       = (*Accounts)(nil)
)
