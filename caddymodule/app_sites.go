package caddymodule

// What the operator reads at start: one line per HTTP server saying what
// Timeblock serves there, found in Caddy's own provisioned config, and a
// warning when the secret is a placeholder.

import (
	"fmt"
	"net"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp/reverseproxy"
	"go.uber.org/zap"

	"github.com/timeblock/timeblock/accounts"
)

// demoSecret is the fallback secret of Caddyfile.example: public, so keys
// encrypted with it are as good as unencrypted.
const demoSecret = "quickstart-only-change-me-0123456789"

// siteSummary is what Timeblock serves on one HTTP server of the http app.
type siteSummary struct {
	Server    string   // the http app's name for the server (srv0, ...)
	BaseURL   string   // how a client on this machine reaches it
	API       []string // path patterns served by timeblock_accounts
	Inference []string // path patterns behind timeblock_gate
	Formats   []string // upstream formats of timeblock_translate
	Upstreams []string // reverse_proxy upstreams after the gate
	Simulator []string // path patterns served by timeblock_simulator
}

func (s *siteSummary) empty() bool {
	return len(s.API) == 0 && len(s.Inference) == 0 && len(s.Simulator) == 0
}

// logStartup logs what every site serves and warns about a placeholder
// secret. It never fails: a config it cannot read is simply not described.
func (a *App) logStartup() {
	defer func() {
		if r := recover(); r != nil {
			a.logger.Warn("could not describe what the sites serve", zap.Any("panic", r))
		}
	}()
	if placeholderSecret(a.Secret) {
		a.logger.Warn(secretWarning(a.Secret))
	}
	var servers map[string]*caddyhttp.Server
	if httpApp, err := a.ctx.AppIfConfigured("http"); err == nil {
		if h, ok := httpApp.(*caddyhttp.App); ok {
			servers = h.Servers
		}
	}
	sites := describeServers(servers)
	for _, s := range sites {
		a.logger.Info(s.line(a.Pools),
			zap.String("server", s.Server),
			zap.String("base_url", s.BaseURL),
			zap.Strings("account_api", s.API),
			zap.Strings("inference", s.Inference),
			zap.Strings("upstream_format", s.Formats),
			zap.Strings("upstreams", s.Upstreams),
			zap.Strings("simulator", s.Simulator))
	}
	if !slices.ContainsFunc(sites, func(s siteSummary) bool { return len(s.API) > 0 || len(s.Inference) > 0 }) {
		a.logger.Info("Timeblock: no site serves the account API (timeblock_accounts) or inference (timeblock_gate); " +
			poolsOnSale(a.Pools))
	}
}

// secretWarning is the warning for a placeholder secret. It names the
// secret only when it is the public demo value.
func secretWarning(secret string) string {
	what := "the timeblock secret looks like a placeholder"
	if secret == demoSecret {
		what = "the timeblock secret is the public demo fallback of Caddyfile.example (" + demoSecret + ")"
	}
	return what + ": anyone who knows it can decrypt the stored consumption keys. Before you sell anything, " +
		"export TIMEBLOCK_SECRET (at least 16 random characters, e.g. from `openssl rand -base64 32`) and restart; " +
		"keys already stored stay encrypted with the old secret and can no longer be read after the change"
}

// placeholderSecret reports whether a secret is the demo fallback or
// obviously not random: words people put where a secret goes, or a string of
// very few distinct characters.
func placeholderSecret(secret string) bool {
	if secret == demoSecret {
		return true
	}
	s := strings.ToLower(secret)
	for _, word := range []string{
		"change-me", "change_me", "changeme", "changethis", "change-this", "replace-me", "replace_me", "replaceme",
		"placeholder", "example", "quickstart", "dummy", "insecure", "not-secret", "notsecret", "your-secret",
		"your_secret", "yoursecret", "mysecret", "my-secret", "password", "secretsecret", "0123456789", "123456789",
		"abcdefghij", "xxxxxxxx",
	} {
		if strings.Contains(s, word) {
			return true
		}
	}
	distinct := make(map[rune]struct{}, 8)
	for _, r := range s {
		distinct[r] = struct{}{}
	}
	return len(distinct) < 6
}

// describeServers summarises every server that serves something of
// Timeblock's, in server-name order.
func describeServers(servers map[string]*caddyhttp.Server) []siteSummary {
	names := make([]string, 0, len(servers))
	for name := range servers {
		names = append(names, name)
	}
	sort.Strings(names)
	var out []siteSummary
	for _, name := range names {
		srv := servers[name]
		if srv == nil {
			continue
		}
		s := siteSummary{Server: name}
		walkRoutes(srv.Routes, nil, &s)
		if s.empty() {
			continue
		}
		s.BaseURL = baseURL(srv)
		out = append(out, s)
	}
	return out
}

// walkRoutes collects, depth first through subroutes (handle, route), the
// paths each Timeblock handler serves. A route without a path matcher
// inherits the paths of the route around it ("/*" at the top).
func walkRoutes(routes caddyhttp.RouteList, outer []string, s *siteSummary) {
	for _, r := range routes {
		paths := routePaths(r.MatcherSets)
		if paths == nil {
			paths = outer
		}
		shown := paths
		if shown == nil {
			shown = []string{"/*"}
		}
		gated := false
		for _, h := range r.Handlers {
			switch h := h.(type) {
			case *caddyhttp.Subroute:
				walkRoutes(h.Routes, paths, s)
			case *Accounts:
				s.API = appendNew(s.API, shown...)
			case *Gate:
				gated = true
				s.Inference = appendNew(s.Inference, shown...)
			case *Translate:
				if gated {
					s.Formats = appendNew(s.Formats, h.Upstream)
				}
			case *reverseproxy.Handler:
				if gated {
					for _, u := range h.Upstreams {
						if u != nil && u.Dial != "" {
							s.Upstreams = appendNew(s.Upstreams, u.Dial)
						}
					}
					if h.DynamicUpstreams != nil {
						s.Upstreams = appendNew(s.Upstreams, "(dynamic)")
					}
				}
			case *Simulator:
				s.Simulator = appendNew(s.Simulator, shown...)
			}
		}
	}
}

// routePaths is the union of the path matchers of a route's matcher sets,
// or nil when it has none.
func routePaths(sets caddyhttp.MatcherSets) []string {
	var paths []string
	for _, set := range sets {
		for _, m := range set {
			switch m := m.(type) {
			case caddyhttp.MatchPath:
				paths = appendNew(paths, m...)
			case *caddyhttp.MatchPath:
				if m != nil {
					paths = appendNew(paths, (*m)...)
				}
			}
		}
	}
	return paths
}

// routeHost is the first host of the host matchers in the server's
// top-level routes, for the base URL.
func routeHost(routes caddyhttp.RouteList) string {
	for _, r := range routes {
		for _, set := range r.MatcherSets {
			for _, m := range set {
				switch m := m.(type) {
				case caddyhttp.MatchHost:
					if len(m) > 0 {
						return m[0]
					}
				case *caddyhttp.MatchHost:
					if m != nil && len(*m) > 0 {
						return (*m)[0]
					}
				}
			}
		}
	}
	return ""
}

// baseURL is how a client reaches the server: its host matcher if it has
// one, else its first listen address (an unspecified address as localhost).
func baseURL(srv *caddyhttp.Server) string {
	scheme, defaultPort := "http", uint(80)
	if len(srv.TLSConnPolicies) > 0 {
		scheme, defaultPort = "https", 443
	}
	host := routeHost(srv.Routes)
	var port uint
	if len(srv.Listen) > 0 {
		if addr, err := caddy.ParseNetworkAddress(srv.Listen[0]); err == nil {
			port = addr.StartPort
			if host == "" {
				host = addr.Host
			}
		}
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "localhost"
	} else if ip != nil && ip.To4() == nil {
		host = "[" + host + "]"
	}
	if port != 0 && port != defaultPort {
		host += ":" + strconv.FormatUint(uint64(port), 10)
	}
	return scheme + "://" + host
}

// line is the log message for a site: what it serves, how a client names
// it, and the pools on sale where inference is served.
func (s *siteSummary) line(pools []*PoolConfig) string {
	var parts []string
	if len(s.API) > 0 {
		// The page's own paths are named by its address, not listed.
		api := slices.DeleteFunc(slices.Clone(s.API), func(p string) bool { return p == "/account" || strings.HasPrefix(p, "/account/") })
		if len(api) > 0 {
			parts = append(parts, "account API on "+strings.Join(api, " "))
		}
		if slices.ContainsFunc(s.API, func(p string) bool { return coversPrefix(p, "/account/") }) {
			parts = append(parts, "account page at "+s.BaseURL+"/account/ (sign in there)")
		}
	}
	if len(s.Inference) > 0 {
		inf := "inference on " + strings.Join(s.Inference, " ")
		var bases []string
		if slices.ContainsFunc(s.Inference, func(p string) bool { return coversPrefix(p, "/v1/") }) {
			bases = append(bases, "OpenAI-style base URL "+s.BaseURL+"/v1")
		}
		if slices.ContainsFunc(s.Inference, func(p string) bool { return coversPrefix(p, "/compat/v1/") }) {
			bases = append(bases, "messages-style base URL "+s.BaseURL+"/compat")
		}
		if slices.ContainsFunc(s.Inference, func(p string) bool { return coversPrefix(p, "/gemini/v1beta/") }) {
			bases = append(bases, "Gemini API base URL "+s.BaseURL+"/gemini")
		}
		if len(bases) > 0 {
			inf += " (" + strings.Join(bases, ", ") + ")"
		}
		if len(s.Formats) > 0 || len(s.Upstreams) > 0 {
			inf += " to"
			if len(s.Formats) > 0 {
				inf += " a " + strings.Join(s.Formats, "/") + " upstream"
			}
			if len(s.Upstreams) > 0 {
				inf += " at " + strings.Join(s.Upstreams, ", ")
			}
		}
		parts = append(parts, inf)
	}
	if len(s.Simulator) > 0 {
		parts = append(parts, "the simulated model server on "+strings.Join(s.Simulator, " "))
	}
	msg := "Timeblock at " + s.BaseURL + ": " + strings.Join(parts, "; ")
	if len(s.Inference) > 0 || len(s.API) > 0 {
		msg += "; " + poolsOnSale(pools)
	}
	return msg
}

// coversPrefix reports whether a path pattern matches requests under prefix
// (e.g. /v1/* or /* for /v1/).
func coversPrefix(pattern, prefix string) bool {
	if p, ok := strings.CutSuffix(pattern, "*"); ok {
		return strings.HasPrefix(prefix, p) || strings.HasPrefix(p, prefix)
	}
	return strings.HasPrefix(pattern, prefix)
}

// poolsOnSale names the configured pools and their models; pools not open
// for subscriptions say their status.
func poolsOnSale(pools []*PoolConfig) string {
	if len(pools) == 0 {
		return "no pools are configured (add `pool <slug> { ... }` to the timeblock global options)"
	}
	names := make([]string, 0, len(pools))
	for _, p := range pools {
		desc := p.Model
		switch p.Status {
		case "", accounts.PoolActive:
		case accounts.PoolFunding, accounts.PoolActivating:
			desc += ", " + p.Status + ": taking pledges"
		default:
			desc += ", " + p.Status + ": not on sale"
		}
		names = append(names, fmt.Sprintf("%s (%s)", p.Slug, desc))
	}
	return "pools: " + strings.Join(names, ", ")
}

// appendNew appends the values not already in list.
func appendNew(list []string, values ...string) []string {
	for _, v := range values {
		if !slices.Contains(list, v) {
			list = append(list, v)
		}
	}
	return list
}
