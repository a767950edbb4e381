package accounts

import "time"

// HeldModel is a model an inference credential may name, as the model
// lists of the inference endpoints show it.
type HeldModel struct {
	ID   string // the model id requests name
	Name string // display name (the pool's name; the id when it has none)
	// Since is when the earliest subscription granting the model began.
	Since time.Time
	// MaxOutputTokens is the pool's output ceiling (0: none).
	MaxOutputTokens int
}

// Models appends to dst the models the entitlement holds at t, each once,
// in member order: the models of its lane grants that still serve — whose
// paid period has not ended, or will renew — whether their hours are open at
// t or not. A boost grant alone holds no model, as for At. A denied
// entitlement holds none.
func (e *Entitlement) Models(t time.Time, dst []HeldModel) []HeldModel {
	if e == nil || e.Denied != "" {
		return dst
	}
	first := len(dst)
	for i := range e.Grants {
		g := &e.Grants[i]
		if g.Boost || !g.serves(t) {
			continue
		}
		seen := false
		for j := first; j < len(dst); j++ {
			if dst[j].ID == g.Model {
				seen = true
				if !g.Since.IsZero() && (dst[j].Since.IsZero() || g.Since.Before(dst[j].Since)) {
					dst[j].Since = g.Since
				}
				break
			}
		}
		if seen {
			continue
		}
		name := g.ModelName
		if name == "" {
			name = g.Model
		}
		dst = append(dst, HeldModel{ID: g.Model, Name: name, Since: g.Since, MaxOutputTokens: g.MaxOutputTokens})
	}
	return dst
}

// serves reports whether the grant still admits requests at t or after:
// its paid period has not ended, or the subscription renews.
func (g *Grant) serves(t time.Time) bool {
	return g.Renews || g.Until.IsZero() || t.Before(g.Until)
}
