package caddymodule

// Headers on admitted responses that say where the key stands: its lanes,
// the lanes in use, and when its window closes — Timeblock's own, and
// Codex's rate-limit headers, which Codex shows in /status and records in
// its session log. They come from what admission already knows (the
// cached entitlement, the lane just taken): no store read. The window's
// bounds and their text are cached per key, pool and hour, so an admitted
// request spends one small allocation on them (the header values' slice).

import (
	"hash/maphash"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/timeblock/timeblock/accounts"
)

// The headers, in canonical form so that they are stored without copying.
const (
	hdrLanes        = "X-Timeblock-Lanes"         // lanes the key holds in the pool now
	hdrLanesInUse   = "X-Timeblock-Lanes-In-Use"  // of them, in use on this node (this request included)
	hdrWindowCloses = "X-Timeblock-Window-Closes" // RFC 3339, UTC; absent when the window does not close
	hdrWindowOpens  = "X-Timeblock-Window-Opens"  // on a closed-window refusal: RFC 3339, UTC
	// Codex's (codex-rs/codex-api/src/rate_limits.rs): its "primary" limit
	// is the key's window: the share of it gone by, its length, its end.
	hdrCodexUsed    = "X-Codex-Primary-Used-Percent"
	hdrCodexWindow  = "X-Codex-Primary-Window-Minutes"
	hdrCodexResetAt = "X-Codex-Primary-Reset-At" // Unix seconds
)

// percentText[p] is p as text, 0..100, so that the share of the window gone
// by costs nothing to write.
var percentText = func() (t [101]string) {
	for i := range t {
		t[i] = strconv.Itoa(i)
	}
	return t
}()

const windowSlots = 1024

// windowCache holds, per key, pool and UTC hour, the window the key's lanes
// are open in and its pre-encoded text. A slot holds one entry; a newer one
// replaces it. Entries are never changed after they are stored.
type windowCache struct {
	seed  maphash.Seed
	slots [windowSlots]atomic.Pointer[windowEntry]
}

type windowEntry struct {
	ent            *accounts.Entitlement // the entitlement it was computed from: a reloaded one computes again
	pool           string
	hour           int64
	opened, closes int64 // Unix seconds; closes 0: open for the next 24 hours at least
	closesText     string
	resetAt        string
	minutes        string
}

func newWindowCache() *windowCache { return &windowCache{seed: maphash.MakeSeed()} }

// get returns the window of ent's lanes in pool at now.
func (c *windowCache) get(ent *accounts.Entitlement, pool string, now time.Time) *windowEntry {
	sec := now.Unix()
	hour := sec / 3600
	slot := &c.slots[(maphash.String(c.seed, ent.KeyID)^uint64(hour))%windowSlots]
	if e := slot.Load(); e != nil && e.ent == ent && e.hour == hour && e.pool == pool && (e.closes == 0 || sec < e.closes) {
		return e
	}
	opened, closes := ent.Window(now, pool)
	e := &windowEntry{ent: ent, pool: pool, hour: hour}
	if !closes.IsZero() {
		e.opened, e.closes = opened.Unix(), closes.Unix()
		e.closesText = closes.UTC().Format(time.RFC3339)
		e.resetAt = strconv.FormatInt(e.closes, 10)
		e.minutes = strconv.FormatInt((e.closes-e.opened)/60, 10)
	}
	slot.Store(e)
	return e
}

// usedPercent is the share of the window gone by at sec, 0..100.
func (e *windowEntry) usedPercent(sec int64) string {
	total := e.closes - e.opened
	if total <= 0 {
		return percentText[100]
	}
	p := (sec - e.opened) * 100 / total
	return percentText[min(max(p, 0), 100)]
}

// setStanding writes the standing headers of an admitted request: lanes
// the key holds in the pool now, of them in use, and — unless the window
// stays open through the next 24 hours — when it closes, in Timeblock's
// headers and Codex's.
func (g *Gate) setStanding(h http.Header, ent *accounts.Entitlement, adm *accounts.Admission, inUse int, now time.Time) {
	win := g.state.windows.get(ent, adm.PoolID, now)
	n := 2
	if win.closes != 0 {
		n = 6
	}
	// One slice for every value: each header gets its own element, so a
	// handler that edits a value in place edits this response only.
	vals := make([]string, n)
	vals[0] = strconv.Itoa(adm.Lanes) // no allocation below 100
	vals[1] = strconv.Itoa(inUse)
	h[hdrLanes] = vals[0:1:1]
	h[hdrLanesInUse] = vals[1:2:2]
	if win.closes == 0 {
		return
	}
	vals[2], vals[3], vals[4], vals[5] = win.closesText, win.usedPercent(now.Unix()), win.minutes, win.resetAt
	h[hdrWindowCloses] = vals[2:3:3]
	h[hdrCodexUsed] = vals[3:4:4]
	h[hdrCodexWindow] = vals[4:5:5]
	h[hdrCodexResetAt] = vals[5:6:6]
}
