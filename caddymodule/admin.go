package caddymodule

import (
	"errors"
	"net/http"
	"slices"
	"sync"

	"github.com/caddyserver/caddy/v2"
)

func init() {
	caddy.RegisterModule(Admin{})
}

// Admin serves the operator endpoints under /timeblock/ on Caddy's admin API.
// Admin routers are provisioned before apps, so it finds the timeblock app at
// request time (see liveApps).
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

// liveApps lists the provisioned timeblock apps, newest last. Admin routers
// are provisioned before apps and get no handle on them, and
// caddy.ActiveContext() only changes after every app of a new config has
// started, so at startup (and during a reload) the operator endpoints would
// answer 503 while the HTTP servers already serve. Apps register at the end
// of Provision and leave in Cleanup: the newest live app serves, and if a new
// config fails to start, its app leaves and the running one serves again.
var liveApps struct {
	sync.Mutex
	apps []*App
}

func registerApp(a *App) {
	liveApps.Lock()
	defer liveApps.Unlock()
	liveApps.apps = append(liveApps.apps, a)
}

func unregisterApp(a *App) {
	liveApps.Lock()
	defer liveApps.Unlock()
	liveApps.apps = slices.DeleteFunc(liveApps.apps, func(x *App) bool { return x == a })
}

// activeApp returns the newest provisioned timeblock app, if any.
func activeApp() (*App, bool) {
	liveApps.Lock()
	defer liveApps.Unlock()
	if n := len(liveApps.apps); n > 0 {
		return liveApps.apps[n-1], true
	}
	return nil, false
}

// Interface guards
var _ caddy.AdminRouter = (*Admin)(nil)
