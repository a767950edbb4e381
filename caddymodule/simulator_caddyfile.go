package caddymodule

import (
	"math"
	"strconv"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
)

func init() {
	httpcaddyfile.RegisterHandlerDirective("timeblock_simulator", parseSimulator)
}

func parseSimulator(h httpcaddyfile.Helper) (caddyhttp.MiddlewareHandler, error) {
	s := new(Simulator)
	err := s.UnmarshalCaddyfile(h.Dispenser)
	return s, err
}

// UnmarshalCaddyfile sets up the simulator from Caddyfile tokens. Syntax:
//
//	timeblock_simulator {
//		token_rate <tokens per second>
//		first_token_latency <duration>
//		reasoning_tokens <n>
//		reply_tokens <n>
//		model <model id>
//	}
func (s *Simulator) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next() // directive name
	if d.NextArg() {
		return d.ArgErr()
	}
	for d.NextBlock(0) {
		switch opt := d.Val(); opt {
		case "token_rate":
			var v string
			if err := singleArg(d, &v); err != nil {
				return err
			}
			rate, err := strconv.ParseFloat(v, 64)
			if err != nil || rate < 0 || math.IsInf(rate, 0) || math.IsNaN(rate) {
				return d.Errf("token_rate: %q is not a number of tokens per second such as 50 (0 means instant)", v)
			}
			s.TokenRate = rate
		case "first_token_latency":
			if err := durationArg(d, &s.FirstTokenLatency); err != nil {
				return err
			}
			if s.FirstTokenLatency < 0 {
				return d.Errf("first_token_latency must not be negative, got %s", d.Val())
			}
		case "reasoning_tokens":
			if err := intArg(d, &s.ReasoningTokens); err != nil {
				return err
			}
			if s.ReasoningTokens < 1 {
				return d.Errf("reasoning_tokens must be at least 1, got %s", d.Val())
			}
		case "reply_tokens":
			if err := intArg(d, &s.ReplyTokens); err != nil {
				return err
			}
			if s.ReplyTokens < 0 {
				return d.Errf("reply_tokens must not be negative (0 echoes the last message), got %s", d.Val())
			}
		case "model":
			if err := singleArg(d, &s.Model); err != nil {
				return err
			}
		default:
			return d.Errf("unknown timeblock_simulator option %q", opt)
		}
	}
	return nil
}

// Interface guard
var _ caddyfile.Unmarshaler = (*Simulator)(nil)
