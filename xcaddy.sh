#!/usr/bin/env bash
# Builds ./caddy: Caddy with the Timeblock plugin from this checkout, using
# xcaddy (installed through the Go toolchain when it is missing).
#
#   ./xcaddy.sh                 # builds ./caddy
#   OUTPUT=/usr/local/bin/caddy ./xcaddy.sh
#
# CADDY_VERSION defaults to the Caddy version in go.mod, so the binary runs the
# same Caddy the tests ran against.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
cd "$here"

die() { echo "xcaddy.sh: $*" >&2; exit 1; }

command -v go >/dev/null 2>&1 || die "Go is not installed; install Go 1.26 or newer from https://go.dev/dl/"

CADDY_VERSION="${CADDY_VERSION:-$(go list -m -f '{{.Version}}' github.com/caddyserver/caddy/v2)}"
XCADDY_VERSION="${XCADDY_VERSION:-v0.4.5}"
OUTPUT="${OUTPUT:-$here/caddy}"

find_xcaddy() {
	if command -v xcaddy >/dev/null 2>&1; then
		command -v xcaddy
	elif [ -x "$(go env GOPATH)/bin/xcaddy" ]; then
		echo "$(go env GOPATH)/bin/xcaddy"
	fi
}

install_xcaddy() {
	echo "xcaddy.sh: installing xcaddy $XCADDY_VERSION with the Go toolchain" >&2
	local bin
	bin="$(go env GOPATH)/bin"
	mkdir -p "$bin"
	if GOFLAGS= go install "github.com/caddyserver/xcaddy/cmd/xcaddy@$XCADDY_VERSION" 2>/tmp/xcaddy-install.$$; then
		rm -f /tmp/xcaddy-install.$$
		return
	fi
	# Some module proxies refuse the version listing that `go install pkg@v`
	# looks up for deprecation notices; building from a scratch module asks
	# only for the version itself.
	local tmp
	tmp="$(mktemp -d)"
	trap 'rm -rf "$tmp"' RETURN
	(
		cd "$tmp"
		go mod init xcaddy-build >/dev/null 2>&1
		GOFLAGS=-mod=mod go get "github.com/caddyserver/xcaddy/cmd/xcaddy@$XCADDY_VERSION" >/dev/null 2>&1 &&
			go build -o "$bin/xcaddy" github.com/caddyserver/xcaddy/cmd/xcaddy
	) || {
		cat /tmp/xcaddy-install.$$ >&2 || true
		rm -f /tmp/xcaddy-install.$$
		die "could not install xcaddy $XCADDY_VERSION (see the errors above); install it by hand and put it on PATH"
	}
	rm -f /tmp/xcaddy-install.$$
}

XCADDY="$(find_xcaddy)"
if [ -z "$XCADDY" ]; then
	install_xcaddy
	XCADDY="$(find_xcaddy)"
	[ -n "$XCADDY" ] || die "xcaddy was installed but cannot be found in $(go env GOPATH)/bin"
fi

# The plugin is pinned to the zero pseudo-version and replaced by this
# checkout, so Go never asks a module proxy for a release of it (this module
# is built from source, not fetched).
echo "xcaddy.sh: building Caddy $CADDY_VERSION with github.com/timeblock/timeblock from $here" >&2
"$XCADDY" build "$CADDY_VERSION" \
	--with "github.com/timeblock/timeblock@v0.0.0-00010101000000-000000000000=$here" \
	--output "$OUTPUT" || die "xcaddy build failed (see the output above)"

"$OUTPUT" list-modules 2>/dev/null | grep -q '^timeblock$' || die "the built binary at $OUTPUT does not list the timeblock module"
echo "xcaddy.sh: built $OUTPUT"
echo "xcaddy.sh: run it with: $OUTPUT run --config Caddyfile.example"
