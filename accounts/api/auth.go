package api

// Sign-in for people: e-mail links exchanged for a session cookie, or an
// identity provider's header on a forward_auth route. Scripts keep sending
// session tokens and management keys as bearer credentials.

import (
	"errors"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/timeblock/timeblock/accounts"
)

// SessionCookie carries the page's session token.
const SessionCookie = "tb_session"

// Sign-in link requests allowed per client address in each window, on each
// node: enough for a family behind one NAT, too few to mail-bomb many. The
// per-e-mail limit is the domain's (accounts.SignInLinksPerEmail), counted
// in the store so that it holds across nodes.
const (
	signInPerAddress = 30
	signInMaxKeys    = 100_000
)

// authConfig is GET /api/auth/config: what the page needs before anyone
// signs in.
type authConfig struct {
	SignIn               string  `json:"signIn"` // "email" or "identity_provider"
	SignUp               string  `json:"signUp"` // "open" or "invite"
	Processor            string  `json:"processor"`
	StripePublishableKey *string `json:"stripePublishableKey"`
}

func (h *Handler) authConfig(w http.ResponseWriter, r *http.Request) {
	c := authConfig{SignIn: "email", SignUp: h.svc.SignUp(), Processor: h.svc.ProcessorName()}
	if h.emailSignInOff() {
		c.SignIn = "identity_provider"
	}
	if k := h.opts.StripePublishableKey; k != "" {
		c.StripePublishableKey = &k
	}
	writeData(w, http.StatusOK, c)
}

// errEmailSignInOff answers e-mail sign-in on a site with an identity provider.
var errEmailSignInOff = accounts.NotFound("this site signs people in through its identity provider, not by e-mail link")

// emailSignInOff reports whether e-mail sign-in is off: on this handler
// (it trusts an identity header) or anywhere on the site (another handler
// of the site does). A site's bearer-credential route has no identity
// header of its own, and must not become a way around the provider.
func (h *Handler) emailSignInOff() bool {
	return h.opts.IdentityHeader != "" || (h.opts.IdentityProviderOnSite != nil && h.opts.IdentityProviderOnSite())
}

// POST /api/auth/email {email} → {sent: true}, whether or not the address
// has an account.
func (h *Handler) signInEmail(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Email string `json:"email"`
	}
	if err := decodeBody(w, r, h.opts.MaxBody, &body, false); err != nil {
		writeError(w, h.logger, err)
		return
	}
	if h.emailSignInOff() {
		writeError(w, h.logger, errEmailSignInOff)
		return
	}
	site, err := h.siteAddress(r)
	if err != nil {
		writeError(w, h.logger, err)
		return
	}
	if wait := h.signInByAddr.allow(h.clientAddr(r).String(), time.Now()); wait > 0 {
		tooManySignIns(w, wait, "from this address")
		return
	}
	if err := h.svc.RequestSignIn(r.Context(), body.Email, func(token string) string { return SignInLink(site, token) }); err != nil {
		var ae *accounts.Error
		if errors.As(err, &ae) {
			if tm, ok := ae.Data.(accounts.TooManySignInLinks); ok {
				w.Header().Set("Retry-After", strconv.Itoa(tm.RetryAfter))
			}
		}
		writeError(w, h.logger, err)
		return
	}
	writeData(w, http.StatusOK, map[string]bool{"sent": true})
}

// SignInLink is the link a sign-in notice carries. The token is in the
// fragment, which browsers never send to a server, so no access log, proxy
// or mail scanner's request writes it down; the page reads it from there.
func SignInLink(site, token string) string {
	return site + "/account/sign-in#token=" + url.QueryEscape(token)
}

func tooManySignIns(w http.ResponseWriter, wait time.Duration, scope string) {
	secs := int((wait + time.Second - 1) / time.Second)
	w.Header().Set("Retry-After", strconv.Itoa(secs))
	writeError(w, nil, &accounts.Error{Status: http.StatusTooManyRequests,
		Message: "too many sign-in links asked " + scope + "; use the last link sent, or try again in " + (time.Duration(secs) * time.Second).String()})
}

// siteAddress is where sign-in links point: the configured address, or on a
// loopback host (the quick start) the request's own. Anything else would let
// a request's Host header aim a victim's link at another site.
func (h *Handler) siteAddress(r *http.Request) (string, error) {
	if h.opts.SiteAddress != "" {
		return h.opts.SiteAddress, nil
	}
	host := r.Host
	name := host
	if hp, err := netip.ParseAddrPort(host); err == nil {
		name = hp.Addr().String()
	} else if i := strings.LastIndexByte(host, ':'); i > 0 && !strings.Contains(host[i:], "]") {
		name = host[:i]
	}
	name = strings.Trim(name, "[]")
	loopback := name == "localhost" || strings.HasSuffix(name, ".localhost")
	if a, err := netip.ParseAddr(name); err == nil && a.IsLoopback() {
		loopback = true
	}
	if !loopback {
		return "", &accounts.Error{Status: http.StatusServiceUnavailable,
			Message: "e-mail sign-in is not set up on this site: the operator must set site_address in timeblock_accounts (the https:// address sign-in links point to)"}
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + host, nil
}

// POST /api/auth/verify {token, replace?} → {sessionToken, user: {id,
// email}} and the session cookie. A browser whose cookie is a live session
// of another user gets 409 {signedInAs, email} and keeps its session (the
// link stays usable) unless it sends replace: true.
func (h *Handler) signInVerify(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Token   string `json:"token"`
		Replace bool   `json:"replace"`
	}
	if err := decodeBody(w, r, h.opts.MaxBody, &body, false); err != nil {
		writeError(w, h.logger, err)
		return
	}
	if h.emailSignInOff() {
		writeError(w, h.logger, errEmailSignInOff)
		return
	}
	if body.Token == "" {
		writeError(w, h.logger, accounts.Invalid("token is required: send the token= value of the sign-in link"))
		return
	}
	a := accounts.SignInAttempt{Token: body.Token, Replace: body.Replace}
	if c, err := r.Cookie(SessionCookie); err == nil {
		a.Session = c.Value
	}
	in, err := h.svc.UseSignInLink(r.Context(), a)
	if err != nil {
		writeError(w, h.logger, err)
		return
	}
	http.SetCookie(w, sessionCookie(r, in.SessionToken, in.ExpiresAt))
	writeData(w, http.StatusOK, map[string]any{
		"sessionToken": in.SessionToken,
		"user":         map[string]string{"id": in.User.ID, "email": in.User.Email},
	})
}

// sessionCookie is the page's session: never readable by scripts, sent on
// same-site navigations only, and only over TLS when the site has it.
func sessionCookie(r *http.Request, token string, expires time.Time) *http.Cookie {
	c := &http.Cookie{Name: SessionCookie, Value: token, Path: "/", HttpOnly: true,
		Secure: r.TLS != nil, SameSite: http.SameSiteLaxMode}
	if expires.IsZero() {
		c.MaxAge = -1
	} else {
		c.Expires = expires
		c.MaxAge = int(time.Until(expires) / time.Second)
	}
	return c
}

// GET /api/auth/session → {user: {id, email, name}, via, expiresAt, operator}; with
// no credential at all, {user: null}: the page asking whether anyone is
// signed in gets an answer, not an error (nor a failed-credential count).
func (h *Handler) session(w http.ResponseWriter, r *http.Request) {
	if !hasCredential(r, h.opts.IdentityHeader) {
		writeData(w, http.StatusOK, map[string]any{"user": nil, "via": nil, "expiresAt": nil})
		return
	}
	p, err := h.authenticate(r)
	if err != nil {
		writeError(w, h.logger, err)
		return
	}
	user, expires, err := h.svc.SessionUser(r.Context(), p, sessionToken(r))
	if err != nil {
		writeError(w, h.logger, err)
		return
	}
	var exp *time.Time
	if !expires.IsZero() {
		exp = &expires
	}
	writeData(w, http.StatusOK, map[string]any{
		"user":      map[string]string{"id": user.ID, "email": user.Email, "name": user.Name},
		"via":       p.Via,
		"expiresAt": exp,
		// operator: the page shows its Operator tab (issue 39); only a session
		// or identity-provider sign-in reaches /api/operator/*, never a key.
		"operator": (p.Via == accounts.ViaSession || p.Via == accounts.ViaIdentityProvider) && h.opts.Operator.IsOperator(user.Email),
	})
}

// hasCredential reports whether the request carries any credential: a
// bearer token, the session cookie, or the identity provider's header on a
// route that trusts it.
func hasCredential(r *http.Request, identityHeader string) bool {
	if r.Header.Get("Authorization") != "" || (identityHeader != "" && r.Header.Get(identityHeader) != "") {
		return true
	}
	c, err := r.Cookie(SessionCookie)
	return err == nil && c.Value != ""
}

// POST /api/auth/sign-out ends the request's session and clears the cookie.
// Management keys and identity-provider sign-ins have no session to end.
func (h *Handler) signOut(w http.ResponseWriter, r *http.Request, p *accounts.Principal) error {
	if p.Via == accounts.ViaSession {
		if err := h.svc.SignOut(r.Context(), sessionToken(r)); err != nil {
			return err
		}
	}
	http.SetCookie(w, sessionCookie(r, "", time.Time{}))
	writeData(w, http.StatusOK, map[string]bool{"signedOut": true})
	return nil
}

// sessionToken is the request's session credential: the bearer token, else
// the page's cookie.
func sessionToken(r *http.Request) string {
	if t := bearerToken(r); t != "" {
		return t
	}
	if c, err := r.Cookie(SessionCookie); err == nil {
		return c.Value
	}
	return ""
}

// authenticate resolves the request's principal: a bearer credential, else
// the identity provider's header on a route configured to trust it, else
// the session cookie.
func (h *Handler) authenticate(r *http.Request) (*accounts.Principal, error) {
	if t := bearerToken(r); t != "" {
		return h.svc.Authenticate(r.Context(), t)
	}
	if h.opts.IdentityHeader != "" {
		email := r.Header.Get(h.opts.IdentityHeader)
		if email == "" {
			return nil, accounts.Unauthorized("the identity provider did not say who you are (no %s header); sign in through it again", h.opts.IdentityHeader)
		}
		return h.svc.AuthenticateIdentity(r.Context(), email)
	}
	if c, err := r.Cookie(SessionCookie); err == nil && c.Value != "" {
		return h.svc.Authenticate(r.Context(), c.Value)
	}
	return h.svc.Authenticate(r.Context(), "")
}

// clientAddr is the client's address, from the hook or the connection.
func (h *Handler) clientAddr(r *http.Request) netip.Addr {
	if h.opts.ClientAddr != nil {
		return h.opts.ClientAddr(r)
	}
	if ap, err := netip.ParseAddrPort(r.RemoteAddr); err == nil {
		return ap.Addr()
	}
	return netip.Addr{}
}
