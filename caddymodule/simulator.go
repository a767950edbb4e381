package caddymodule

import (
	"fmt"
	"net/http"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/timeblock/timeblock/simulator"
)

func init() {
	caddy.RegisterModule(Simulator{})
}

// Simulator is the Caddy module of the built-in simulated model server
// (package simulator) for the quick start, demos, tests and load benchmarks:
// chat completions, messages, count_tokens and the model list, streaming and
// not, answered deterministically from the request. It answers requests
// itself and never calls the next handler.
//
// It matches paths by suffix, so it can be mounted under any prefix, e.g.
// /compat/v1/messages.
type Simulator struct {
	// TokenRate is the generation speed in tokens per second; 0 (the default)
	// generates instantly. Streams send one token per chunk at this pace; a
	// non-streamed response is held back as long as its stream would take.
	TokenRate float64 `json:"token_rate,omitempty"`
	// FirstTokenLatency is the wait before the first token (the time a real
	// server spends on the prompt). Streams send their headers at once.
	FirstTokenLatency caddy.Duration `json:"first_token_latency,omitempty"`
	// ReasoningTokens is how many reasoning tokens precede the answer when
	// reasoning is asked for (default 16). A smaller thinking.budget_tokens
	// in the request lowers it.
	ReasoningTokens int `json:"reasoning_tokens,omitempty"`
	// ReplyTokens fixes the reply length in tokens, padding or cutting the
	// echo. 0 (the default) sends the echo as it is, at most 64 words of the
	// last message after a "Simulated reply <digest>:" prefix.
	ReplyTokens int `json:"reply_tokens,omitempty"`
	// Model is the model id answered when the request names none, and the
	// one GET /v1/models lists (default "timeblock-sim").
	Model string `json:"model,omitempty"`

	srv *simulator.Server
}

// CaddyModule returns the Caddy module information.
func (Simulator) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "http.handlers.timeblock_simulator",
		New: func() caddy.Module { return new(Simulator) },
	}
}

func (s *Simulator) config() simulator.Config {
	return simulator.Config{
		TokenRate:         s.TokenRate,
		FirstTokenLatency: time.Duration(s.FirstTokenLatency),
		ReasoningTokens:   s.ReasoningTokens,
		ReplyTokens:       s.ReplyTokens,
		Model:             s.Model,
	}
}

// Provision fills defaults and builds the server. Options out of range build
// nothing: Validate, which Caddy calls next, reports them as an invalid
// configuration.
func (s *Simulator) Provision(caddy.Context) error {
	if s.ReasoningTokens == 0 {
		s.ReasoningTokens = simulator.DefaultReasoningTokens
	}
	if s.Model == "" {
		s.Model = simulator.DefaultModel
	}
	if srv, err := simulator.New(s.config()); err == nil {
		s.srv = srv
	}
	return nil
}

// Validate checks the options.
func (s *Simulator) Validate() error {
	if err := s.config().Validate(); err != nil {
		return fmt.Errorf("timeblock_simulator: %w", err)
	}
	return nil
}

// ServeHTTP answers as a model server would. Errors are written in the
// endpoint's own format rather than returned to Caddy, because a simulated
// upstream must look like a real one to the clients and translators under
// test; only a failure to write the response is returned.
func (s *Simulator) ServeHTTP(w http.ResponseWriter, r *http.Request, _ caddyhttp.Handler) error {
	return s.srv.Serve(w, r)
}

// Interface guards
var (
	_ caddy.Provisioner           = (*Simulator)(nil)
	_ caddy.Validator             = (*Simulator)(nil)
	_ caddyhttp.MiddlewareHandler = (*Simulator)(nil)
)
