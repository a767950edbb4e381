package caddymodule

import (
	"errors"
	"net/http"

	"github.com/caddyserver/caddy/v2"
)

func init() {
	caddy.RegisterModule(Admin{})
}

// Admin serves the operator endpoints under /timeblock/ on Caddy's admin API.
// Admin routers are provisioned before apps, so it finds the timeblock app of
// the running config at request time.
type Admin struct{}

// CaddyModule returns the Caddy module information.
func (Admin) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "admin.api.timeblock",
		New: func() caddy.Module { return new(Admin) },
	}
}

// Routes returns the operator routes.
func (a *Admin) Routes() []caddy.AdminRoute {
	return []caddy.AdminRoute{{Pattern: "/timeblock/", Handler: caddy.AdminHandlerFunc(a.serve)}}
}

func (a *Admin) serve(w http.ResponseWriter, r *http.Request) error {
	app, ok := activeApp()
	if !ok {
		return caddy.APIError{
			HTTPStatus: http.StatusServiceUnavailable,
			Err:        errors.New("the timeblock app is not configured; add a `timeblock { ... }` global option block"),
		}
	}
	app.operator.ServeHTTP(w, r)
	return nil
}

// activeApp returns the timeblock app of the running config, if any.
func activeApp() (*App, bool) {
	app, err := caddy.ActiveContext().AppIfConfigured("timeblock")
	if err != nil || app == nil {
		return nil, false
	}
	a, ok := app.(*App)
	return a, ok
}

// Interface guards
var _ caddy.AdminRouter = (*Admin)(nil)
