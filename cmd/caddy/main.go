// Command caddy is Caddy with the standard modules and Timeblock, for
// `go run ./cmd/caddy run --config Caddyfile.example` without xcaddy.
package main

import (
	caddycmd "github.com/caddyserver/caddy/v2/cmd"

	_ "github.com/caddyserver/caddy/v2/modules/standard"

	_ "github.com/timeblock/timeblock"
)

func main() {
	caddycmd.Main()
}
