package caddymodule

import (
	"reflect"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp/reverseproxy"
	"github.com/caddyserver/caddy/v2/modules/caddytls"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

// route builds a provisioned route: path matchers (nil for none) and handlers.
func route(paths []string, handlers ...caddyhttp.MiddlewareHandler) caddyhttp.Route {
	r := caddyhttp.Route{Handlers: handlers}
	if paths != nil {
		m := caddyhttp.MatchPath(paths)
		r.MatcherSets = caddyhttp.MatcherSets{{&m}}
	}
	return r
}

// handle is what the Caddyfile's `handle <matcher> { ... }` becomes.
func handle(paths []string, handlers ...caddyhttp.MiddlewareHandler) caddyhttp.Route {
	return route(paths, &caddyhttp.Subroute{Routes: caddyhttp.RouteList{route(nil, handlers...)}})
}

// The servers of Caddyfile.example, as the http app holds them after
// provisioning, and an HTTPS site with a host matcher.
func TestDescribeServers(t *testing.T) {
	host := caddyhttp.MatchHost{"api.example.com"}
	tlsSite := &caddyhttp.Server{
		Listen:          []string{":443"},
		TLSConnPolicies: caddytls.ConnectionPolicies{{}},
		Routes: caddyhttp.RouteList{{
			MatcherSets: caddyhttp.MatcherSets{{host}},
			Handlers: []caddyhttp.MiddlewareHandler{&caddyhttp.Subroute{Routes: caddyhttp.RouteList{
				handle([]string{"/v1/chat/completions"}, &Gate{}, &Translate{Upstream: "messages"},
					&reverseproxy.Handler{Upstreams: reverseproxy.UpstreamPool{{Dial: "10.0.0.5:8000"}}}),
			}}},
		}},
	}
	servers := map[string]*caddyhttp.Server{
		"srv0": {Listen: []string{"127.0.0.1:8000"}, Routes: caddyhttp.RouteList{route(nil, &Simulator{})}},
		"srv1": {Listen: []string{":8080"}, Routes: caddyhttp.RouteList{
			handle([]string{"/api", "/api/*"}, &Accounts{}),
			handle([]string{"/v1/*", "/compat/v1/*", "/gemini/*"}, &Gate{}, &Translate{Upstream: "chat"},
				&reverseproxy.Handler{Upstreams: reverseproxy.UpstreamPool{{Dial: "127.0.0.1:8000"}}}),
			handle(nil, &caddyhttp.StaticResponse{}),
		}},
		"srv2": tlsSite,
		"srv3": {Listen: []string{":9000"}, Routes: caddyhttp.RouteList{route(nil, &caddyhttp.StaticResponse{})}},
	}
	got := describeServers(servers)
	want := []siteSummary{
		{Server: "srv0", BaseURL: "http://127.0.0.1:8000", Simulator: []string{"/*"}},
		{Server: "srv1", BaseURL: "http://localhost:8080", API: []string{"/api", "/api/*"},
			Inference: []string{"/v1/*", "/compat/v1/*", "/gemini/*"}, Formats: []string{"chat"}, Upstreams: []string{"127.0.0.1:8000"}},
		{Server: "srv2", BaseURL: "https://api.example.com", Inference: []string{"/v1/chat/completions"},
			Formats: []string{"messages"}, Upstreams: []string{"10.0.0.5:8000"}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("describeServers:\n got %+v\nwant %+v", got, want)
	}

	pools := []*PoolConfig{
		{Slug: "llama-70b", Model: "meta-llama/Llama-3.3-70B-Instruct", Status: "active"},
		{Slug: "later", Model: "m-later", Status: "funding"},
	}
	line := got[1].line(pools)
	for _, part := range []string{
		"Timeblock at http://localhost:8080:",
		"account API on /api /api/*",
		"inference on /v1/* /compat/v1/* /gemini/*",
		"OpenAI-style base URL http://localhost:8080/v1",
		"messages-style base URL http://localhost:8080/compat",
		"Gemini API base URL http://localhost:8080/gemini",
		"to a chat upstream at 127.0.0.1:8000",
		"llama-70b (meta-llama/Llama-3.3-70B-Instruct)",
		"later (m-later, funding: taking pledges)",
	} {
		if !strings.Contains(line, part) {
			t.Errorf("line lacks %q:\n%s", part, line)
		}
	}
	if line := got[0].line(pools); line != "Timeblock at http://127.0.0.1:8000: the simulated model server on /*" {
		t.Errorf("simulator line = %q", line)
	}
	if line := got[2].line(pools); strings.Contains(line, "/compat") || !strings.Contains(line, "base URL https://api.example.com/v1") {
		t.Errorf("TLS site line = %q", line)
	}
}

func TestBaseURL(t *testing.T) {
	for _, tc := range []struct {
		listen string
		tls    bool
		want   string
	}{
		{":8080", false, "http://localhost:8080"},
		{"0.0.0.0:80", false, "http://localhost"},
		{"[::]:8080", false, "http://localhost:8080"},
		{"[::1]:8080", false, "http://[::1]:8080"},
		{"127.0.0.1:8443", true, "https://127.0.0.1:8443"},
		{":443", true, "https://localhost"},
	} {
		srv := &caddyhttp.Server{Listen: []string{tc.listen}}
		if tc.tls {
			srv.TLSConnPolicies = caddytls.ConnectionPolicies{{}}
		}
		if got := baseURL(srv); got != tc.want {
			t.Errorf("baseURL(%s, tls %v) = %q, want %q", tc.listen, tc.tls, got, tc.want)
		}
	}
}

func TestPlaceholderSecret(t *testing.T) {
	for _, s := range []string{
		demoSecret, "please-CHANGE-ME-now-1234", "replace_me_with_something", "example-secret-for-docs",
		"aaaaaaaaaaaaaaaaaaaa", "abababababababab", "journey-secret-0123456789", "YourSecretHere!!",
	} {
		if !placeholderSecret(s) {
			t.Errorf("placeholderSecret(%q) = false", s)
		}
	}
	for _, s := range []string{
		"q3Xv8Lr0ZkP2mN7sT1wY4bC6dF9gH5jK", // openssl rand -base64 24
		"correct horse battery staple 42",
	} {
		if placeholderSecret(s) {
			t.Errorf("placeholderSecret(%q) = true", s)
		}
	}
	if w := secretWarning(demoSecret); !strings.Contains(w, "demo fallback") || !strings.Contains(w, "TIMEBLOCK_SECRET") {
		t.Errorf("demo warning = %q", w)
	}
	// Any other secret is never printed.
	if w := secretWarning("please-CHANGE-ME-now-1234"); strings.Contains(w, "please-CHANGE-ME") {
		t.Errorf("the warning prints the secret: %q", w)
	}
}

// Without an http app (or a readable one) start still logs the secret
// warning and the pools, and never panics.
func TestLogStartupWithoutHTTPApp(t *testing.T) {
	core, logs := observer.New(zap.InfoLevel)
	a := &App{Secret: demoSecret, logger: zap.New(core), Pools: []*PoolConfig{{Slug: "p", Model: "m", Status: "active"}}}
	a.logStartup()
	var warned, described bool
	for _, e := range logs.All() {
		warned = warned || (e.Level == zap.WarnLevel && strings.Contains(e.Message, "public demo fallback"))
		described = described || (e.Level == zap.InfoLevel && strings.Contains(e.Message, "no site serves") &&
			strings.Contains(e.Message, "pools: p (m)"))
	}
	if !warned || !described {
		t.Errorf("logs: %+v", logs.All())
	}

	logs.TakeAll()
	a.Secret = "q3Xv8Lr0ZkP2mN7sT1wY4bC6dF9gH5jK"
	a.logStartup()
	for _, e := range logs.All() {
		if e.Level == zap.WarnLevel {
			t.Errorf("warning for a random secret: %s", e.Message)
		}
	}
}
