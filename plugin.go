// Package timeblock registers every Timeblock Caddy module, so that one
// `xcaddy build --with github.com/timeblock/timeblock` brings them all.
package timeblock

import (
	_ "github.com/timeblock/timeblock/caddymodule"
)
