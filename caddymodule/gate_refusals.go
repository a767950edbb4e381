package caddymodule

// Refusals that end a client's turn with the answer. What makes each pinned
// client stop at once and show the gate's message (found by running Claude
// Code 2.1.328 and Codex CLI 0.169.0 against canned answers; README, "What a
// refusal looks like to a client", has the table):
//
//   - x-should-retry: false stops Claude Code and both SDK families on any
//     status; without it Claude Code retries 401, 429 and 5xx up to 10 times.
//   - Codex retries every status it does not know five times (about 7 s),
//     sleeping on Retry-After, however long: the closed window's Retry-After
//     of hours kept it silent for hours. It stops at once on a 429 whose
//     error type is usage_limit_reached (printing x-codex-promo-message and
//     the reset time from resets_at), on a model_not_found code, and on 400.
//     A 401 it always retries five times.
//
// So a closed window and a past-due key answer 429 in the usage-limit shape
// (the shape of a coding plan's spent window, which is what they are to a
// client), with no Retry-After; wrong keys, unknown models and the rest keep
// their status and gain x-should-retry: false. Full lanes stay a plain 429
// with Retry-After: 1, which both clients retry.

import (
	"net/http"
	"strconv"
	"time"

	"go.uber.org/zap"

	"github.com/timeblock/timeblock/accounts"
	"github.com/timeblock/timeblock/translate"
)

const (
	hdrShouldRetry = "X-Should-Retry"
	// hdrCodexPromo is the text Codex prints after "You've hit your usage
	// limit." on a usage_limit_reached refusal.
	hdrCodexPromo = "X-Codex-Promo-Message"
	// kindUsageLimit is the error type of the usage-limit shape in the
	// OpenAI format; the messages format says rate_limit_error.
	kindUsageLimit translate.ErrorKind = "usage_limit_reached"
)

// The refusals of a credential are the same text every time: their bodies
// are encoded once. A guesser's requests end here.
var (
	refusalMissingKey = newStaticRefusal(http.StatusUnauthorized, "missing_api_key",
		"no API key: send a consumption key (sk_pool_...) or a combined key (sk-compat-meta-...) "+
			"in the x-api-key header or as Authorization: Bearer <key> (x-goog-api-key on the Gemini API)")
	refusalWrongKeyKind = newStaticRefusal(http.StatusUnauthorized, "invalid_api_key",
		"management keys/session tokens are for the account API; use a consumption key (sk_pool_...) or a combined key")
	refusalInvalidKey = newStaticRefusal(http.StatusUnauthorized, "invalid_api_key", msgInvalidKey)
)

// staticRefusal is a refusal whose body, in each format, never changes.
type staticRefusal struct {
	status int
	bodies [translate.Gemini + 1][]byte // by format; Unknown has chat's
}

func newStaticRefusal(status int, code, msg string) staticRefusal {
	e := &translate.Error{Status: status, Kind: translate.KindForStatus(status), Message: msg, Code: code}
	ref := staticRefusal{status: status}
	for f := range ref.bodies {
		ref.bodies[f] = e.Body(translate.Format(f))
	}
	return ref
}

// noteRejection counts a refusal and logs it at debug level.
func (g *Gate) noteRejection(reason rejectReason, status int, ent *accounts.Entitlement) {
	g.state.metrics.rejections[reason].Inc()
	if ent != nil {
		g.state.usage.Refused(ent.KeyID, g.now(), reason.String())
	}
	if ce := g.logger.Check(zap.DebugLevel, "rejected"); ce != nil {
		keyID := ""
		if ent != nil {
			keyID = ent.KeyID
		}
		ce.Write(zap.String("reason", reason.String()), zap.Int("status", status), zap.String("key_id", keyID))
	}
}

// refuseStatic answers a pre-encoded refusal that retrying cannot fix.
func (g *Gate) refuseStatic(w http.ResponseWriter, format translate.Format, reason rejectReason, ref *staticRefusal) error {
	g.noteRejection(reason, ref.status, nil)
	body := ref.bodies[translate.Chat]
	if int(format) < len(ref.bodies) {
		body = ref.bodies[format]
	}
	h := w.Header()
	h[hdrShouldRetry] = []string{"false"}
	h["Content-Type"] = []string{"application/json"}
	delete(h, "Content-Length")
	w.WriteHeader(ref.status)
	_, err := w.Write(body)
	return err
}

// refuse answers a refusal that retrying cannot fix (a wrong or revoked
// key, a model the key does not hold) with its status and x-should-retry:
// false.
func (g *Gate) refuse(w http.ResponseWriter, format translate.Format, reason rejectReason, status int, code, msg string, ent *accounts.Entitlement) error {
	w.Header()[hdrShouldRetry] = []string{"false"}
	return g.reject(w, format, reason, status, code, msg, 0, ent)
}

// noReopenRetryAfter is the delay a Gemini client is told when its key's
// window will not open by itself (a past-due key): a day.
const noReopenRetryAfter = 24 * 60 * 60

// usageLimit answers 429 in the shape clients know for a spent usage
// window: on /v1 {"error":{"message","type":"usage_limit_reached","param",
// "code","resets_at"}} (resets_at in Unix seconds, left out when it will
// not reset), on /compat a rate_limit_error; x-should-retry: false; when
// it resets, X-Timeblock-Window-Opens. No Retry-After: a client that honours
// it would sleep until the window opens, hours, instead of telling its user.
func (g *Gate) usageLimit(w http.ResponseWriter, format translate.Format, reason rejectReason, code, msg string, resets time.Time, ent *accounts.Entitlement) error {
	g.noteRejection(reason, http.StatusTooManyRequests, ent)
	h := w.Header()
	h[hdrShouldRetry] = []string{"false"}
	if !resets.IsZero() {
		h[hdrWindowOpens] = []string{resets.UTC().Format(time.RFC3339)}
	}
	e := &translate.Error{Status: http.StatusTooManyRequests, Kind: translate.RateLimit, Message: msg, Code: code}
	body := make([]byte, 0, 192+len(msg))
	switch format {
	case translate.Gemini:
		// Gemini CLI reads only the body's delay: the time until the
		// window opens (a day when it will not), past five minutes, stops
		// it at once instead of retrying for minutes.
		e.RetryAfter = noReopenRetryAfter
		if !resets.IsZero() {
			e.RetryAfter = max(int((resets.Sub(g.now())+time.Second-1)/time.Second), 1)
		}
		body = e.AppendBody(body, format)
	case translate.Messages:
		body = e.AppendBody(body, format)
	default:
		if promo, ok := codexPromo(msg); ok {
			h[hdrCodexPromo] = []string{promo}
		}
		e.Kind = kindUsageLimit
		body = e.AppendBody(body, format)
		if !resets.IsZero() {
			// The body ends with the error object's and the document's "}}".
			body = append(body[:len(body)-2], `,"resets_at":`...)
			body = strconv.AppendInt(body, resets.Unix(), 10)
			body = append(body, `}}`...)
		}
	}
	h["Content-Type"] = []string{"application/json"}
	delete(h, "Content-Length")
	w.WriteHeader(http.StatusTooManyRequests)
	_, err := w.Write(body)
	return err
}

// codexPromo is msg as Codex prints it after "You've hit your usage limit.":
// a sentence, capitalised, without its final period (Codex adds ", or try
// again at <time>."). Codex drops a header that is not visible ASCII, so
// such a message is not sent.
func codexPromo(msg string) (string, bool) {
	for i := 0; i < len(msg); i++ {
		if c := msg[i]; c < ' ' || c > '~' {
			return "", false
		}
	}
	for len(msg) > 0 && msg[len(msg)-1] == '.' {
		msg = msg[:len(msg)-1]
	}
	if msg == "" {
		return "", false
	}
	if c := msg[0]; 'a' <= c && c <= 'z' {
		msg = string(c-'a'+'A') + msg[1:]
	}
	return msg, true
}

// windowClosed answers a request outside the key's hours: the key holds the
// model, but none of its lanes is open now. The message says when the
// window opens, in UTC, and how long that is from now.
func (g *Gate) windowClosed(w http.ResponseWriter, format translate.Format, ent *accounts.Entitlement, model string, next, now time.Time) error {
	if next.IsZero() {
		return g.usageLimit(w, format, rejectWindowClosed, "window_closed",
			"this key's time window for model "+strconv.Quote(model)+" is closed and does not open again in its paid period; "+
				"subscribe again (POST /api/pools/{pool}/subscribe) to use it", time.Time{}, ent)
	}
	return g.usageLimit(w, format, rejectWindowClosed, "window_closed",
		"this key's time window for model "+strconv.Quote(model)+" is closed now; it opens next at "+
			next.UTC().Format(time.RFC3339)+" (UTC), in "+untilText(next.Sub(now)), next, ent)
}

// untilText is a wait as people say it: "6h30m", "45m", "30s".
func untilText(d time.Duration) string {
	switch {
	case d < time.Minute:
		return strconv.Itoa(max(int(d/time.Second), 1)) + "s"
	case d < time.Hour:
		return strconv.Itoa(int((d+time.Minute-1)/time.Minute)) + "m"
	}
	m := int((d + time.Minute - 1) / time.Minute)
	if m%60 == 0 {
		return strconv.Itoa(m/60) + "h"
	}
	return strconv.Itoa(m/60) + "h" + strconv.Itoa(m%60) + "m"
}

// keyDenied answers a key that exists but may not be used: revoked, deleted,
// canceled (401), or past due (403). To an inference request past due is a
// usage limit — the key works again once paid — so it takes that shape, as
// OpenAI's API answers an account out of credit with 429
// insufficient_quota; the endpoints that only report (models, key status)
// keep 403.
func (g *Gate) keyDenied(w http.ResponseWriter, ep gateEndpoint, format translate.Format, ent *accounts.Entitlement) error {
	if ent.DeniedStatus == http.StatusForbidden && ep != epModels && ep != epModel && ep != epKey && ep != epKeyLanes {
		return g.usageLimit(w, format, rejectKeyDenied, "payment_past_due", ent.Denied, time.Time{}, ent)
	}
	status := ent.DeniedStatus
	if status == 0 {
		status = http.StatusUnauthorized
	}
	return g.refuse(w, format, rejectKeyDenied, status, "", ent.Denied, ent)
}
