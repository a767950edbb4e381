package caddymodule

import (
	"fmt"
	"net/http"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
)

func init() {
	caddy.RegisterModule(Translate{})
	httpcaddyfile.RegisterHandlerDirective("timeblock_translate", parseTranslate)
}

// Translate lets a client speak either format (chat completions or messages)
// to an upstream that speaks one: it rewrites the request body and path and
// translates the response as it streams back.
type Translate struct {
	// Upstream is the format the upstream speaks: "chat" or "messages".
	Upstream string `json:"upstream"`
	// Path is the upstream path requests are rewritten to (default
	// /v1/chat/completions for chat, /v1/messages for messages).
	Path string `json:"path,omitempty"`
}

// CaddyModule returns the Caddy module information.
func (Translate) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "http.handlers.timeblock_translate",
		New: func() caddy.Module { return new(Translate) },
	}
}

// Provision fills defaults.
func (t *Translate) Provision(caddy.Context) error {
	if t.Path == "" {
		switch t.Upstream {
		case "chat":
			t.Path = "/v1/chat/completions"
		case "messages":
			t.Path = "/v1/messages"
		}
	}
	return nil
}

// Validate checks the options.
func (t *Translate) Validate() error {
	if t.Upstream != "chat" && t.Upstream != "messages" {
		return fmt.Errorf("timeblock_translate: upstream format must be chat or messages, got %q", t.Upstream)
	}
	return nil
}

// Cleanup releases nothing.
func (t *Translate) Cleanup() error { return nil }

// ServeHTTP translates the request and the response.
func (t *Translate) ServeHTTP(w http.ResponseWriter, r *http.Request, next caddyhttp.Handler) error {
	return notImplemented(w, r, "format translation is not implemented in this build")
}

func parseTranslate(h httpcaddyfile.Helper) (caddyhttp.MiddlewareHandler, error) {
	t := new(Translate)
	err := t.UnmarshalCaddyfile(h.Dispenser)
	return t, err
}

// UnmarshalCaddyfile parses:
//
//	timeblock_translate chat|messages {
//		path <upstream path>
//	}
func (t *Translate) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next() // directive name
	if !d.NextArg() {
		return d.Err("timeblock_translate needs the format the upstream speaks: chat or messages")
	}
	t.Upstream = d.Val()
	if t.Upstream != "chat" && t.Upstream != "messages" {
		return d.Errf("unknown upstream format %q (use chat or messages)", t.Upstream)
	}
	if d.NextArg() {
		return d.ArgErr()
	}
	for d.NextBlock(0) {
		switch d.Val() {
		case "path":
			if err := singleArg(d, &t.Path); err != nil {
				return err
			}
			if len(t.Path) == 0 || t.Path[0] != '/' {
				return d.Errf("path must start with /, got %q", t.Path)
			}
		default:
			return d.Errf("unknown timeblock_translate option %q", d.Val())
		}
	}
	return nil
}

// Interface guards
var (
	_ caddy.Provisioner           = (*Translate)(nil)
	_ caddy.Validator             = (*Translate)(nil)
	_ caddy.CleanerUpper          = (*Translate)(nil)
	_ caddyhttp.MiddlewareHandler = (*Translate)(nil)
	_ caddyfile.Unmarshaler       = (*Translate)(nil)
)
