package caddymodule

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/dustin/go-humanize"
	"go.uber.org/zap"

	"github.com/timeblock/timeblock/accounts"
	"github.com/timeblock/timeblock/accounts/admission"
	"github.com/timeblock/timeblock/translate"
)

func init() {
	caddy.RegisterModule(Gate{})
	httpcaddyfile.RegisterHandlerDirective("timeblock_gate", parseGate)
}

const defaultLaneWait = 5 * time.Second

// Request variables the gate leaves for the handlers after it (translate
// reads them instead of parsing the body again):
const (
	// VarBody holds the request body as forwarded, after the gate's
	// rewrites: a *forwardedBody (a pointer, so that storing it allocates
	// nothing), whose Bytes are what r.Body reads. They are in a pooled
	// buffer (body_buffers.go): read them while the handlers after the gate
	// run, and keep no slice of them after.
	VarBody = "timeblock.body"
	// VarBoost holds the priority boost to apply (int): the number of boost
	// members open now, or 0 when boost_priority is off. On chat requests
	// the gate has already set the body's priority to minus this; the
	// translator hands it to a translation that builds a chat body from
	// another format (translate.Call.Boost).
	VarBoost = "timeblock.boost"
)

// Gate admits inference requests before reverse_proxy sends them on: it
// checks the key (through the entitlement cache), the hour window, the model
// and a free lane, clamps the output limit (max_tokens; max_output_tokens on
// /v1/responses), raises priority for boosted keys, and publishes
// placeholders for routing. Rejections are answered in the format of the
// endpoint that was called.
//
// It serves every inference route (gate_routes.go): the three inference
// endpoints; token counts (/v1/messages/count_tokens), checked like
// inference but let through without a lane; the model lists
// (/v1/models[/{id}]), which it answers itself from the cached entitlement;
// the key's status (/v1/key), answered from the cached entitlement and the
// lane registry; the stream of its lanes in use (/v1/key/lanes,
// gate_keylanes.go); and a JSON 404 or 405 for any other path or method, before
// the key is looked at.
//
// Placeholders: {timeblock.pool} (pool slug), {timeblock.model},
// {timeblock.key_id}, {timeblock.boost} (boost members open now) and
// {timeblock.lanes} (lanes the key holds in the pool now).
type Gate struct {
	// LaneWait is how long a request waits for a free lane before 429
	// (default 5s; a negative value, written 0 in the Caddyfile, rejects at once).
	LaneWait caddy.Duration `json:"lane_wait,omitempty"`
	// MaxRequestBody limits request bodies in bytes (default: the timeblock
	// app's max_request_body, 32 MiB unless set).
	MaxRequestBody int64 `json:"max_request_body,omitempty"`
	// NoBoostPriority keeps the gate from writing `priority` into request
	// bodies, for upstreams that reject it (vLLM does unless started with
	// --scheduling-policy priority). {timeblock.boost} is set either way, so
	// boosted traffic can still be routed elsewhere.
	NoBoostPriority bool `json:"no_boost_priority,omitempty"`
	// KeyFailuresPerMinute is how many failed key checks (no key, a key of
	// the wrong kind, an unknown key) one client address may have in a
	// minute; past it the gate answers 429 with Retry-After before looking
	// at the key (default 60; a negative value, written 0 in the Caddyfile,
	// turns the throttle off). The address is Caddy's client IP, so
	// trusted_proxies decide whether a proxy's X-Forwarded-For counts; IPv6
	// addresses count by their /64.
	KeyFailuresPerMinute int `json:"key_failures_per_minute,omitempty"`

	state   *gateState
	source  admission.Source
	maxBody int64
	now     func() time.Time
	logger  *zap.Logger
	// unloaded closes when this config is unloaded (its caddy.Context is
	// done): the lanes streams it serves end then, or they would hold the
	// old servers open for ever (Caddy's grace period is eternal by default).
	unloaded <-chan struct{}
}

// CaddyModule returns the Caddy module information.
func (Gate) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "http.handlers.timeblock_gate",
		New: func() caddy.Module { return new(Gate) },
	}
}

// Provision binds the gate to the timeblock app and its shared state.
func (g *Gate) Provision(ctx caddy.Context) error {
	g.logger = ctx.Logger()
	g.now = time.Now
	g.unloaded = ctx.Done()
	if g.LaneWait == 0 {
		g.LaneWait = caddy.Duration(defaultLaneWait)
	}
	appModule, err := ctx.App("timeblock")
	if err != nil {
		return fmt.Errorf("timeblock_gate needs the timeblock app: %w", err)
	}
	app := appModule.(*App)
	if app.shared == nil || app.Service() == nil {
		return errors.New("timeblock_gate: the timeblock app is not provisioned")
	}
	g.state = app.shared.gate
	g.source = app.Service()
	g.maxBody = g.MaxRequestBody
	if g.maxBody == 0 {
		g.maxBody = app.MaxRequestBody
	}
	return g.state.metrics.register(ctx.GetMetricsRegistry())
}

// Validate checks the options.
func (g *Gate) Validate() error {
	if g.MaxRequestBody < 0 {
		return fmt.Errorf("timeblock_gate: max_request_body must not be negative, got %d", g.MaxRequestBody)
	}
	return nil
}

// Cleanup releases nothing: the shared state belongs to the app.
func (g *Gate) Cleanup() error { return nil }

// keyFailureLimit is the throttle's limit; 0 means off.
func (g *Gate) keyFailureLimit() int {
	switch {
	case g.KeyFailuresPerMinute == 0:
		return defaultKeyFailuresPerMinute
	case g.KeyFailuresPerMinute < 0:
		return 0
	}
	return g.KeyFailuresPerMinute
}

func (g *Gate) laneWait() time.Duration {
	return max(time.Duration(g.LaneWait), 0)
}

// ServeHTTP admits or rejects the request, or answers it itself (model
// lists, paths and methods it does not serve).
func (g *Gate) ServeHTTP(w http.ResponseWriter, r *http.Request, next caddyhttp.Handler) error {
	ep, modelID := gateRoute(r.URL.Path)
	format := ep.format(r)
	switch {
	case ep == epUnknown:
		return g.unknownEndpoint(w, r, format)
	case !ep.allows(r.Method):
		return g.methodNotAllowed(w, r, ep, format)
	}
	ctx := r.Context()
	now := g.now()
	ent, err := g.entitlement(w, r, ep, format, now)
	if ent == nil {
		return err
	}
	switch ep {
	case epModels, epModel, epGeminiModels, epGeminiModel:
		stripCredentials(r)
		return g.serveModels(w, r, ep, modelID, format, ent, now)
	case epKey:
		stripCredentials(r)
		return g.serveKeyStatus(w, r, format, ent, now)
	case epKeyLanes:
		key := credential(r) // the stream looks it up again as it runs
		stripCredentials(r)
		return g.serveKeyLanes(w, r, format, ent, key, now)
	}
	stripCredentials(r)

	sb, err := readBody(r, g.maxBody)
	// The gate holds the buffer until it hands it to the forwarded body.
	defer func() { sb.release() }()
	switch {
	case errors.Is(err, errBodyTooLarge):
		return g.reject(w, format, rejectBodyTooLarge, http.StatusRequestEntityTooLarge, "request_too_large",
			"request body is larger than "+humanize.IBytes(uint64(g.maxBody))+"; send a smaller request", 0, ent)
	case errors.Is(err, errBodyEncoded):
		return g.reject(w, format, rejectBadRequest, http.StatusUnsupportedMediaType, "", errBodyEncoded.Error(), 0, ent)
	case err != nil && ctx.Err() != nil:
		return g.clientGone(w, ent)
	case err != nil:
		return g.reject(w, format, rejectBadRequest, http.StatusBadRequest, "", "could not read the request body: "+err.Error(), 0, ent)
	}
	body := sb.bytes()
	fields, err := scanInference(body, format, modelID)
	if err != nil {
		return g.reject(w, format, rejectBadRequest, http.StatusBadRequest, "", err.Error(), 0, ent)
	}

	adm := ent.At(now, fields.model)
	if !adm.ModelHeld {
		return g.modelNotHeld(w, format, ent, fields.model, now)
	}
	if adm.Lanes == 0 {
		return g.windowClosed(w, format, ent, adm.Model, adm.NextOpen, now)
	}
	if ep == epCount || ep == epGeminiCount {
		fb := setBody(r, sb)
		sb = nil // held by fb
		defer fb.release()
		return g.passCount(w, r, next, ent, &adm, fb, now)
	}

	priority := adm.Boosts
	if g.NoBoostPriority {
		priority = 0
	}
	body, clamped, err := rewriteBody(body, &fields, adm.MaxOutputTokens, format == translate.Chat, priority)
	if err != nil {
		return g.reject(w, format, rejectBadRequest, http.StatusBadRequest, "", err.Error(), 0, ent)
	}
	sb.fill(body)

	lease, waited, err := g.state.lanes.Acquire(ctx, admission.LaneKey{KeyID: ent.KeyID, PoolID: adm.PoolID}, adm.PoolSlug, adm.Lanes, g.laneWait())
	g.state.metrics.laneWait.Observe(waited.Seconds())
	switch {
	case errors.Is(err, admission.ErrLanesFull):
		return g.reject(w, format, rejectLanesFull, http.StatusTooManyRequests, "rate_limit_exceeded",
			fmt.Sprintf("all %d lanes of this key in pool %s are busy; retry when a request finishes", adm.Lanes, adm.PoolSlug), 1, ent)
	case errors.Is(err, admission.ErrClusterDown):
		// The lanes are shared with other nodes through the database, which
		// cannot be reached: admitting on a lane this node does not hold could
		// exceed what the key was sold.
		g.logger.Error("taking a lane from the cluster", zap.Error(err))
		return g.reject(w, format, rejectClusterDown, http.StatusServiceUnavailable, "",
			"the lanes of this key could not be checked right now; retry in a moment", 1, ent)
	case err != nil:
		return g.clientGone(w, ent)
	}
	// However the request ends (done, client gone, upstream error, panic),
	// the lane goes back to the registry it came from, and then the key's
	// lane streams hear of it (fl is nil, and costs nothing, unless one
	// watches the key).
	fl := g.state.watch.admitted(ent.KeyID, adm.Model, ep, now)
	defer g.state.releaseLane(&lease, fl)
	admittedAt := g.now()

	g.setStanding(w.Header(), ent, &adm, lease.InUse(), now)
	g.state.metrics.admissions.WithLabelValues(adm.PoolSlug).Inc()
	g.state.lastUsed.Record(ent.KeyID, ent.Combined, now)
	if ce := g.logger.Check(zap.DebugLevel, "admitted"); ce != nil {
		ce.Write(zap.String("key_id", ent.KeyID), zap.String("pool", adm.PoolSlug), zap.String("model", adm.Model),
			zap.Int("lanes", adm.Lanes), zap.Int("boosts", adm.Boosts), zap.Duration("waited", waited), zap.Bool("clamped", clamped))
	}

	publish(r, ent, &adm)
	fb := setBody(r, sb)
	sb = nil // held by fb
	// Runs before the lane goes back, however the request ends.
	defer g.finishAdmitted(ent.KeyID, adm.PoolSlug, now, admittedAt, fb)
	caddyhttp.SetVar(ctx, VarBody, fb)
	caddyhttp.SetVar(ctx, VarBoost, priority)
	return next.ServeHTTP(w, r)
}

// finishAdmitted counts an admitted request's usage in the hour it arrived
// (at): the tokens the translator saw the upstream report (none without
// timeblock_translate) and how long it held its lane. Then it releases the
// forwarded body.
func (g *Gate) finishAdmitted(keyID, pool string, at, admittedAt time.Time, fb *forwardedBody) {
	held := g.now().Sub(admittedAt)
	g.state.usage.Admitted(keyID, at, fb.inputTokens, fb.outputTokens, held)
	g.state.metrics.laneSeconds.WithLabelValues(pool).Add(held.Seconds())
	fb.release()
}

// entitlement checks the request's credential and returns what it may do.
// When it returns nil, the request has been answered (err is the write's).
func (g *Gate) entitlement(w http.ResponseWriter, r *http.Request, ep gateEndpoint, format translate.Format, now time.Time) (*accounts.Entitlement, error) {
	if err := g.state.wait(r.Context()); err != nil {
		if r.Context().Err() != nil {
			return nil, g.clientGone(w, nil)
		}
		return nil, g.reject(w, format, rejectKeyCheckFailed, http.StatusServiceUnavailable, "",
			"the account store is not open, so the API key cannot be checked; retry in a moment", 1, nil)
	}
	guard := g.state.guard
	addr := clientAddr(r)
	if wait := guard.throttle.Check(addr, g.keyFailureLimit(), now); wait > 0 {
		retry := int((wait + time.Second - 1) / time.Second)
		return nil, g.reject(w, format, rejectThrottled, http.StatusTooManyRequests, "rate_limit_exceeded",
			"too many requests with a missing or invalid API key from this address; retry in "+strconv.Itoa(retry)+"s", retry, nil)
	}
	key := credential(r)
	switch {
	case key == "":
		guard.throttle.Fail(addr, now)
		return nil, g.refuseStatic(w, format, rejectMissingKey, &refusalMissingKey)
	case accounts.ConsoleCredential(key):
		guard.throttle.Fail(addr, now)
		return nil, g.refuseStatic(w, format, rejectWrongKeyKind, &refusalWrongKeyKind)
	case !accounts.PlausibleKey(key):
		guard.throttle.Fail(addr, now)
		return nil, g.refuseStatic(w, format, rejectUnknownKey, &refusalInvalidKey)
	}
	ctx := r.Context()
	ent, err := g.state.cache.Lookup(ctx, key, now, g.source)
	switch {
	case err == nil:
	case errors.Is(err, admission.ErrUnknownKey):
		guard.throttle.Fail(addr, now)
		return nil, g.refuseStatic(w, format, rejectUnknownKey, &refusalInvalidKey)
	case ctx.Err() != nil:
		return nil, g.clientGone(w, nil)
	default:
		g.logger.Error("checking an API key", zap.Error(err))
		return nil, g.reject(w, format, rejectKeyCheckFailed, http.StatusServiceUnavailable, "",
			"the API key could not be checked right now; retry in a moment", 1, nil)
	}
	if ent.Denied != "" {
		return nil, g.keyDenied(w, ep, format, ent)
	}
	return ent, nil
}

// publish sets the gate's placeholders. One provider, answering at replace
// time, costs one allocation; five Set calls cost several and grow the
// replacer's map, which reverse_proxy fills too.
// The model is the grant's name for it: the request's own name points into
// a pooled buffer, reused once the gate returns, and placeholders are read
// later (access logs).
func publish(r *http.Request, ent *accounts.Entitlement, adm *accounts.Admission) {
	repl, ok := r.Context().Value(caddy.ReplacerCtxKey).(*caddy.Replacer)
	if !ok {
		return
	}
	pool, model, keyID, boosts, lanes := adm.PoolSlug, adm.Model, ent.KeyID, adm.Boosts, adm.Lanes
	repl.Map(func(key string) (any, bool) {
		switch key {
		case "timeblock.pool":
			return pool, true
		case "timeblock.model":
			return model, true
		case "timeblock.key_id":
			return keyID, true
		case "timeblock.boost":
			return boosts, true
		case "timeblock.lanes":
			return lanes, true
		}
		return nil, false
	})
}

// passCount lets a token count through without a lane: it costs the
// upstream little (the translator forwards it to a messages upstream and
// answers it itself for a chat upstream), so a key may count while its
// lanes are busy. It still needs the key's hours, like inference.
func (g *Gate) passCount(w http.ResponseWriter, r *http.Request, next caddyhttp.Handler, ent *accounts.Entitlement, adm *accounts.Admission, fb *forwardedBody, now time.Time) error {
	g.state.metrics.laneless[lanelessCountTokens].Inc()
	g.state.lastUsed.Record(ent.KeyID, ent.Combined, now)
	publish(r, ent, adm)
	caddyhttp.SetVar(r.Context(), VarBody, fb)
	return next.ServeHTTP(w, r)
}

// modelNotHeld answers 404, naming the models the key holds.
func (g *Gate) modelNotHeld(w http.ResponseWriter, format translate.Format, ent *accounts.Entitlement, model string, now time.Time) error {
	return g.refuse(w, format, rejectModelNotHeld, http.StatusNotFound, "model_not_found",
		"model "+strconv.Quote(model)+" is not available with this key; "+holdsText(ent.Models(now, nil)), ent)
}

const msgInvalidKey = "invalid API key: no consumption key or combined key has this value; " +
	"check that it was copied whole (GET /api/keys lists your keys)"

// reject answers with an error in the client's format. code fills the chat
// body's code (empty: null); retryAfter > 0 sets Retry-After in seconds.
func (g *Gate) reject(w http.ResponseWriter, format translate.Format, reason rejectReason, status int, code, msg string, retryAfter int, ent *accounts.Entitlement) error {
	g.noteRejection(reason, status, ent)
	if retryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(retryAfter))
	}
	e := &translate.Error{Status: status, Kind: translate.KindForStatus(status), Message: msg, Code: code, RetryAfter: retryAfter}
	return e.Write(w, format)
}

// clientGone records a client that left while the request was checked or
// queued. Like reverse_proxy, it writes 499 for the access log; nobody reads it.
func (g *Gate) clientGone(w http.ResponseWriter, ent *accounts.Entitlement) error {
	g.state.metrics.rejections[rejectClientGone].Inc()
	if ent != nil {
		g.state.usage.Refused(ent.KeyID, g.now(), rejectClientGone.String())
		g.logger.Debug("client left before admission", zap.String("key_id", ent.KeyID))
	}
	w.WriteHeader(499)
	return nil
}

// stripCredentials removes the client's credentials once the gate has read
// the key, so that nothing after it (translate, reverse_proxy) passes the
// user's key to the model server. Authorization goes whatever it holds: the
// upstream gets only what the Caddyfile gives it (header_up Authorization
// "Bearer {env.MODEL_SERVER_KEY}" for a server that needs its own key).
// Caddy's access log records the request as it arrived, before any
// handler; the log filter of Caddyfile.example keeps keys out of it.
func stripCredentials(r *http.Request) {
	h := r.Header
	delete(h, "X-Api-Key")
	delete(h, "Authorization")
	delete(h, "X-Goog-Api-Key")
	if q := r.URL.RawQuery; q != "" && strings.Contains(q, geminiKeyParam+"=") {
		v := r.URL.Query()
		v.Del(geminiKeyParam)
		r.URL.RawQuery = v.Encode()
	}
}

// geminiKeyParam is the query parameter the Gemini API takes a key in.
const geminiKeyParam = "key"

// credential returns the key from x-api-key, Authorization: Bearer, or, on
// the Gemini API, x-goog-api-key or ?key=.
func credential(r *http.Request) string {
	if v := r.Header["X-Api-Key"]; len(v) > 0 && v[0] != "" {
		return strings.TrimSpace(v[0])
	}
	if auth := r.Header["Authorization"]; len(auth) > 0 {
		const bearer = "Bearer "
		if len(auth[0]) > len(bearer) && strings.EqualFold(auth[0][:len(bearer)], bearer) {
			return strings.TrimSpace(auth[0][len(bearer):])
		}
		return ""
	}
	if v := r.Header["X-Goog-Api-Key"]; len(v) > 0 && v[0] != "" {
		return strings.TrimSpace(v[0])
	}
	if q := r.URL.RawQuery; q != "" && strings.Contains(q, geminiKeyParam+"=") && geminiStyle(r.URL.Path) {
		return strings.TrimSpace(r.URL.Query().Get(geminiKeyParam))
	}
	return ""
}

// parseGate parses:
//
//	timeblock_gate {
//		lane_wait <duration>
//		max_request_body <size>
//		boost_priority on|off
//		key_failures_per_minute <n>
//	}
func parseGate(h httpcaddyfile.Helper) (caddyhttp.MiddlewareHandler, error) {
	g := new(Gate)
	err := g.UnmarshalCaddyfile(h.Dispenser)
	return g, err
}

// UnmarshalCaddyfile sets up the gate from Caddyfile tokens.
func (g *Gate) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next() // directive name
	if d.NextArg() {
		return d.ArgErr()
	}
	for d.NextBlock(0) {
		switch d.Val() {
		case "lane_wait":
			var v caddy.Duration
			if err := durationArg(d, &v); err != nil {
				return err
			}
			if v == 0 {
				v = -1 // 0 means "reject at once"; the zero value means "default"
			}
			if v < -1 {
				return d.Err("lane_wait must not be negative")
			}
			g.LaneWait = v
		case "max_request_body":
			var s string
			if err := singleArg(d, &s); err != nil {
				return err
			}
			size, err := humanize.ParseBytes(s)
			if err != nil || size == 0 || size > 1<<40 {
				return d.Errf("max_request_body: %q is not a size such as 32MiB or 1MB", s)
			}
			g.MaxRequestBody = int64(size)
		case "boost_priority":
			var v string
			if err := singleArg(d, &v); err != nil {
				return err
			}
			switch v {
			case "on":
				g.NoBoostPriority = false
			case "off":
				g.NoBoostPriority = true
			default:
				return d.Errf("boost_priority: %q is not on or off", v)
			}
		case "key_failures_per_minute":
			n, err := keyFailuresArg(d)
			if err != nil {
				return err
			}
			g.KeyFailuresPerMinute = n
		default:
			return d.Errf("unknown timeblock_gate option %q", d.Val())
		}
	}
	return nil
}

// Interface guards
var (
	_ caddy.Provisioner           = (*Gate)(nil)
	_ caddy.Validator             = (*Gate)(nil)
	_ caddy.CleanerUpper          = (*Gate)(nil)
	_ caddyhttp.MiddlewareHandler = (*Gate)(nil)
	_ caddyfile.Unmarshaler       = (*Gate)(nil)
	_ admission.Source            = (*accounts.Service)(nil)
	// The service vouches for the keys it minted by their tag, so a key made
	// on another node is admitted before this node's filter hears of it.
	_ admission.TagChecker = (*accounts.Service)(nil)
)
