package caddymodule

import "github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"

// The directives place themselves, so a Caddyfile needs no `order` option:
// the gate admits, translate rewrites, then reverse_proxy sends; accounts and
// the simulator answer requests themselves, like respond. Caddy only accepts
// standard directives as anchors, and each registration inserts right before
// its anchor, so the sequence below matters: it yields
// gate, translate, reverse_proxy and accounts, simulator, respond.
func init() {
	httpcaddyfile.RegisterDirectiveOrder("timeblock_gate", httpcaddyfile.Before, "reverse_proxy")
	httpcaddyfile.RegisterDirectiveOrder("timeblock_translate", httpcaddyfile.Before, "reverse_proxy")
	httpcaddyfile.RegisterDirectiveOrder("timeblock_accounts", httpcaddyfile.Before, "respond")
	httpcaddyfile.RegisterDirectiveOrder("timeblock_simulator", httpcaddyfile.Before, "respond")
}
