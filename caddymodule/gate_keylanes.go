package caddymodule

// GET /v1/key/lanes: an SSE stream of the key's lanes in use. Like GET
// /v1/key it takes no lane and answers at any hour. The stream subscribes
// to the key in laneWatch, which the gate tells about each request of a
// watched key it admits and finishes; the inference path pays one atomic
// load for it while nobody watches any key.
//
// Every event is `event: lanes` with data
//
//	{"lanesInUse": n, "lanes": m, "inFlight": [{"model", "endpoint", "startedAt"}]}
//
// lanesInUse counts the key's requests in flight on every node (as GET
// /v1/key does); lanes is what the key holds now. inFlight lists the
// requests in flight on the node serving the stream that it admitted while
// the key was watched there: on PostgreSQL the others' show in lanesInUse
// only, and requests that began before the first stream of the key on this
// node are counted but not listed. An event goes out on connect, on every
// change seen here (at once), and when a poll every lanesPoll finds another
// node's change or a new hour's lanes: on PostgreSQL another node's request
// shows within lanesPoll plus a count across the nodes (about 2 s). A
// comment (": ping") goes out every lanesPing. A stream ends when the
// client leaves, when its key is revoked or deleted, when the config that
// serves it is unloaded (a reload: the client reconnects to the new one),
// and at the first poll once the process exits.
//
// The account API serves the same stream to a key's owner at GET
// /api/keys/{id}/lanes and /api/meta-keys/{id}/lanes (serveAccountLanes,
// handed to it as api.Options.KeyLanes by the timeblock app, which shares
// this state with the gates): there the poll reads the key's status from
// the store, and a signed-out session or a deleted key ends the stream.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/caddyserver/caddy/v2"
	"go.uber.org/zap"

	"github.com/timeblock/timeblock/accounts"
	"github.com/timeblock/timeblock/accounts/admission"
	"github.com/timeblock/timeblock/accounts/api"
	"github.com/timeblock/timeblock/translate"
)

const (
	defaultLanesPoll = 2 * time.Second
	defaultLanesPing = 15 * time.Second
)

// laneWatch holds the subscribers of GET /v1/key/lanes per key, and for
// each watched key the requests in flight on this node admitted since.
type laneWatch struct {
	// watched counts the keys with a subscriber: while it is 0, admitted
	// and finished do nothing but load it.
	watched atomic.Int32
	mu      sync.RWMutex // guards keys; taken before a keyWatch's mu
	keys    map[string]*keyWatch

	poll, ping time.Duration // lanesPoll and lanesPing; tests shorten them
}

type keyWatch struct {
	mu      sync.Mutex
	subs    map[*laneSub]struct{}
	flights map[*flight]struct{}
}

// flight is a request of a watched key in flight on this node.
type flight struct {
	kw       *keyWatch
	model    string
	endpoint string
	started  time.Time
}

// laneSub is one stream. changed holds at most one wake-up: changes that
// come while the stream writes merge into one recount.
type laneSub struct {
	changed chan struct{}
}

func newLaneWatch() *laneWatch {
	return &laneWatch{keys: make(map[string]*keyWatch), poll: defaultLanesPoll, ping: defaultLanesPing}
}

// subscribe watches keyID until cancel is called.
func (lw *laneWatch) subscribe(keyID string) (sub *laneSub, kw *keyWatch, cancel func()) {
	sub = &laneSub{changed: make(chan struct{}, 1)}
	lw.mu.Lock()
	kw = lw.keys[keyID]
	if kw == nil {
		kw = &keyWatch{subs: make(map[*laneSub]struct{}), flights: make(map[*flight]struct{})}
		lw.keys[keyID] = kw
		lw.watched.Add(1)
	}
	kw.mu.Lock()
	kw.subs[sub] = struct{}{}
	kw.mu.Unlock()
	lw.mu.Unlock()
	return sub, kw, func() {
		lw.mu.Lock()
		kw.mu.Lock()
		delete(kw.subs, sub)
		last := len(kw.subs) == 0
		kw.mu.Unlock()
		if last && lw.keys[keyID] == kw {
			delete(lw.keys, keyID)
			lw.watched.Add(-1)
		}
		lw.mu.Unlock()
	}
}

// subscribers returns how many streams watch keyID (for tests).
func (lw *laneWatch) subscribers(keyID string) int {
	lw.mu.RLock()
	defer lw.mu.RUnlock()
	kw := lw.keys[keyID]
	if kw == nil {
		return 0
	}
	kw.mu.Lock()
	defer kw.mu.Unlock()
	return len(kw.subs)
}

// admitted records a request of keyID that took a lane, when the key is
// watched, and wakes its streams. It returns nil, having allocated nothing,
// when nobody watches the key.
func (lw *laneWatch) admitted(keyID, model string, ep gateEndpoint, now time.Time) *flight {
	if lw.watched.Load() == 0 {
		return nil
	}
	lw.mu.RLock()
	kw := lw.keys[keyID]
	lw.mu.RUnlock()
	if kw == nil {
		return nil
	}
	f := &flight{kw: kw, model: model, endpoint: ep.path(), started: now}
	kw.mu.Lock()
	kw.flights[f] = struct{}{}
	kw.wake()
	kw.mu.Unlock()
	return f
}

// finished forgets f (nil: the request was not watched) and wakes the
// key's streams. Call it after the lane went back, so that they count
// without it.
func (lw *laneWatch) finished(f *flight) {
	if f == nil {
		return
	}
	kw := f.kw
	kw.mu.Lock()
	delete(kw.flights, f)
	kw.wake()
	kw.mu.Unlock()
}

// wake tells each stream of the key to count again. The caller holds kw.mu.
func (kw *keyWatch) wake() {
	for s := range kw.subs {
		select {
		case s.changed <- struct{}{}:
		default:
		}
	}
}

// inFlightJSON is one entry of the event's inFlight.
type inFlightJSON struct {
	Model     string    `json:"model"`
	Endpoint  string    `json:"endpoint"`
	StartedAt time.Time `json:"startedAt"`
}

// lanesEventJSON is the data of an `event: lanes`.
type lanesEventJSON struct {
	LanesInUse int            `json:"lanesInUse"`
	Lanes      int            `json:"lanes"`
	InFlight   []inFlightJSON `json:"inFlight"`
}

// inFlight lists the key's watched requests, oldest first.
func (kw *keyWatch) inFlight() []inFlightJSON {
	kw.mu.Lock()
	out := make([]inFlightJSON, 0, len(kw.flights))
	for f := range kw.flights {
		out = append(out, inFlightJSON{Model: f.model, Endpoint: f.endpoint, StartedAt: f.started.UTC().Truncate(time.Millisecond)})
	}
	kw.mu.Unlock()
	slices.SortFunc(out, func(a, b inFlightJSON) int {
		if c := a.StartedAt.Compare(b.StartedAt); c != 0 {
			return c
		}
		if a.Model != b.Model {
			if a.Model < b.Model {
				return -1
			}
			return 1
		}
		return 0
	})
	return out
}

// releaseLane gives the lane back, then tells the key's streams (when the
// request was watched): in that order, so that they count without it.
func (s *gateState) releaseLane(lease *admission.Lease, f *flight) {
	lease.Release()
	s.watch.finished(f)
}

// path is the canonical path of an inference endpoint, as inFlight names it.
func (e gateEndpoint) path() string {
	switch e {
	case epChat:
		return "/v1/chat/completions"
	case epMessages:
		return "/v1/messages"
	case epResponses:
		return "/v1/responses"
	case epGemini:
		return "/v1beta/models/{model}:generateContent"
	}
	return ""
}

// serveKeyLanes answers GET /v1/key/lanes with the stream; key is the
// credential, looked up again at each poll so that a key revoked meanwhile
// ends its stream.
func (g *Gate) serveKeyLanes(w http.ResponseWriter, r *http.Request, format translate.Format, ent *accounts.Entitlement, key string, now time.Time) error {
	g.state.metrics.laneless[lanelessKeyLanes].Inc()
	g.state.lastUsed.Record(ent.KeyID, ent.Combined, now)
	ctx := r.Context()
	ls, first, err := g.state.openLaneStream(ctx, ent.KeyID, ent.Status(now).Lanes, lanePools(ent))
	switch {
	case err != nil && ctx.Err() != nil:
		return g.clientGone(w, ent)
	case err != nil:
		g.logger.Error("counting the lanes in use of a key", zap.String("key_id", ent.KeyID), zap.Error(err))
		return g.reject(w, format, rejectClusterDown, http.StatusServiceUnavailable, "",
			"the lanes in use of this key could not be counted right now; retry in a moment", 1, ent)
	}
	defer ls.close()
	ls.run(w, r, first, g.unloaded, g.logger, func(ctx context.Context) (int, []string, bool) {
		now := g.now()
		fresh, err := g.state.cache.Lookup(ctx, key, now, g.source)
		switch {
		case errors.Is(err, admission.ErrUnknownKey):
			return 0, nil, false // deleted: the stream ends, a new one gets the 401
		case err == nil && fresh.Denied != "":
			return 0, nil, false
		case err == nil:
			ent = fresh
		}
		return ent.Status(now).Lanes, lanePools(ent), true
	})
	return nil
}

// serveAccountLanes is the account API's GET /api/keys/{id}/lanes and
// /api/meta-keys/{id}/lanes (api.Options.KeyLanes): the stream of GET
// /v1/key/lanes, for a key its owner names by id. status is read at each
// poll for the key's lanes; it fails with 401 or 404 once the session has
// ended or the key is deleted, which ends the stream.
func (s *gateState) serveAccountLanes(unloaded <-chan struct{}, logger *zap.Logger) api.KeyLanesFunc {
	return func(w http.ResponseWriter, r *http.Request, keyID string, status api.KeyStatusFunc) error {
		ctx := r.Context()
		st, pools, err := status(ctx)
		if err != nil {
			return err
		}
		// status has read the store, so the state is open (shared.open opens
		// it first); the wait only keeps the stream off a state that is not.
		if err := s.wait(ctx); err != nil {
			return err
		}
		ls, first, err := s.openLaneStream(ctx, keyID, st.Lanes, pools)
		switch {
		case err != nil && ctx.Err() != nil:
			return nil // nobody is left to answer
		case err != nil:
			logger.Error("counting the lanes in use of a key", zap.String("key_id", keyID), zap.Error(err))
			w.Header().Set("Retry-After", "1")
			return &accounts.Error{Status: http.StatusServiceUnavailable,
				Message: "the lanes in use of this key could not be counted right now; retry in a moment"}
		}
		defer ls.close()
		lanes := st.Lanes
		ls.run(w, r, first, unloaded, logger, func(ctx context.Context) (int, []string, bool) {
			st, p, err := status(ctx)
			var ae *accounts.Error
			switch {
			case errors.As(err, &ae) && (ae.Status == http.StatusNotFound || ae.Status == http.StatusUnauthorized):
				return 0, nil, false
			case err != nil:
				// The store did not answer: keep what the stream last had.
				logger.Warn("reading a key's status for its lane stream", zap.String("key_id", keyID), zap.Error(err))
			default:
				lanes, pools = st.Lanes, p
			}
			return lanes, pools, true
		})
		return nil
	}
}

// laneStream is one stream of a key's lanes, subscribed to the key in
// laneWatch from before its first count, so that no change falls between.
type laneStream struct {
	state  *gateState
	keyID  string
	sub    *laneSub
	kw     *keyWatch
	cancel func()
	lanes  int
	pools  []string
}

// openLaneStream subscribes to keyID and counts the stream's first event.
// On error it has already unsubscribed.
func (s *gateState) openLaneStream(ctx context.Context, keyID string, lanes int, pools []string) (*laneStream, []byte, error) {
	ls := &laneStream{state: s, keyID: keyID, lanes: lanes, pools: pools}
	ls.sub, ls.kw, ls.cancel = s.watch.subscribe(keyID)
	first, err := ls.event(ctx)
	if err != nil {
		ls.cancel()
		return nil, nil, err
	}
	return ls, first, nil
}

func (ls *laneStream) close() { ls.cancel() }

// laneRefresh reads a streamed key's lanes now and the pools they are in,
// at each poll; ok false ends the stream (the key is gone or denied).
type laneRefresh func(ctx context.Context) (lanes int, pools []string, ok bool)

// run writes the stream's headers and first event, then an event on every
// change and a ping every lanesPing, until the client leaves, refresh says
// the key is gone, unloaded closes (a config reload: the client reconnects
// to the new one) or the process exits.
func (ls *laneStream) run(w http.ResponseWriter, r *http.Request, first []byte, unloaded <-chan struct{}, logger *zap.Logger, refresh laneRefresh) {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no") // proxies in front must not hold events back
	h.Del("Content-Length")
	w.WriteHeader(http.StatusOK)
	if r.Method == http.MethodHead {
		return
	}
	ctx := r.Context()
	rc := http.NewResponseController(w)
	// A server's write_timeout is for responses that end; this one runs
	// until the client leaves.
	_ = rc.SetWriteDeadline(time.Time{})
	send := func(b []byte) bool {
		if _, err := w.Write(b); err != nil {
			return false
		}
		return rc.Flush() == nil
	}
	if !send(first) {
		return
	}
	last := first

	lw := ls.state.watch
	poll := time.NewTicker(lw.poll)
	defer poll.Stop()
	ping := time.NewTicker(lw.ping)
	defer ping.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-unloaded:
			return
		case <-ping.C:
			if !send([]byte(": ping\n\n")) {
				return
			}
			continue
		case <-poll.C:
			if caddy.Exiting() {
				// The servers wait for every response before the process
				// exits, and this config is unloaded only after.
				return
			}
			lanes, pools, ok := refresh(ctx)
			if !ok {
				return
			}
			ls.lanes, ls.pools = lanes, pools
		case <-ls.sub.changed:
		}
		ev, err := ls.event(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			// The next change or poll tries again.
			logger.Warn("counting the lanes in use of a key for its stream", zap.String("key_id", ls.keyID), zap.Error(err))
			continue
		}
		if bytes.Equal(ev, last) {
			continue
		}
		if !send(ev) {
			return
		}
		last = ev
	}
}

// event counts the key's lanes in use and encodes the event.
func (ls *laneStream) event(ctx context.Context) ([]byte, error) {
	n, err := ls.state.lanesInUse(ctx, ls.keyID, ls.pools)
	if err != nil {
		return nil, err
	}
	data, err := json.Marshal(lanesEventJSON{LanesInUse: n, Lanes: ls.lanes, InFlight: ls.kw.inFlight()})
	if err != nil {
		return nil, err
	}
	b := make([]byte, 0, len(data)+20)
	b = append(b, "event: lanes\ndata: "...)
	b = append(b, data...)
	return append(b, "\n\n"...), nil
}
