// Package reliability is Timeblock's reliability suite: adversarial scenarios
// run against real Caddy processes with the plugin (both stores, and several
// nodes on one PostgreSQL database), each ending in figures — seats oversold,
// lanes leaked, charges without a subscription, store reads per 10,000
// guessed keys — that must hold.
//
// The suite is behind the build tag "reliability" so that the ordinary test
// run stays short; CI runs it on its own and prints the table of figures:
//
//	go test -tags reliability -count=1 -v ./reliability/
//
// Add -soak for the longer version (more rounds, more requests). The figures,
// how each is produced and the latest numbers are listed in
// docs/reliability.md.
package reliability
