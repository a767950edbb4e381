package api

// A key's usage per hour for its owner (accounts.KeyUsage): the counts the
// gates of every node have written, up to their last flush (30 s).

import (
	"net/http"
	"time"

	"github.com/timeblock/timeblock/accounts"
)

// GET /api/keys/{id}/{view}: usage or lanes (keylanes.go); GET on a
// management key's path keeps the 405 it had before this route.
func (h *Handler) keyView(w http.ResponseWriter, r *http.Request, p *accounts.Principal) error {
	if r.PathValue("id") == "management" && h.routes.wrongMethod(w, r, h.logger) {
		return nil
	}
	switch r.PathValue("view") {
	case "usage":
		return h.keyUsage(w, r, p)
	case "lanes":
		return h.keyLanes(w, r, p)
	}
	return accounts.NotFound("no such endpoint: %s %s (a key's views: /api/keys/{id}/usage and /api/keys/{id}/lanes)", r.Method, r.URL.Path)
}

// GET /api/keys/{id}/usage?from=&to= → the consumption key's hours.
func (h *Handler) keyUsage(w http.ResponseWriter, r *http.Request, p *accounts.Principal) error {
	from, to, err := usageQuery(r)
	if err != nil {
		return err
	}
	rows, err := h.svc.KeyUsage(r.Context(), p.UserID, r.PathValue("id"), from, to)
	if err != nil {
		return err
	}
	writeData(w, http.StatusOK, rows)
	return nil
}

// GET /api/meta-keys/{id}/usage?from=&to= → the combined key's hours.
func (h *Handler) combinedKeyUsage(w http.ResponseWriter, r *http.Request, p *accounts.Principal) error {
	from, to, err := usageQuery(r)
	if err != nil {
		return err
	}
	rows, err := h.svc.CombinedKeyUsage(r.Context(), p.UserID, r.PathValue("id"), from, to)
	if err != nil {
		return err
	}
	writeData(w, http.StatusOK, rows)
	return nil
}

// usageQuery reads from and to (RFC 3339; absent: zero, which the service
// fills in).
func usageQuery(r *http.Request) (from, to time.Time, err error) {
	q := r.URL.Query()
	for _, f := range []struct {
		name string
		dst  *time.Time
	}{{"from", &from}, {"to", &to}} {
		v := q.Get(f.name)
		if v == "" {
			continue
		}
		t, perr := time.Parse(time.RFC3339, v)
		if perr != nil {
			return from, to, accounts.Invalid("%s=%q is not an RFC 3339 time such as 2026-11-27T08:00:00Z", f.name, v)
		}
		*f.dst = t
	}
	return from, to, nil
}
