package caddymodule

// GET /v1/key: where the key stands — its models, the hours it holds,
// whether its window is open and until when, its lanes and the lanes in use
// — answered by the gate from the cached entitlement and the lane registry.
// It takes no lane and works at any hour: a closed window is an answer
// here, not a refusal. On store postgres the lanes in use are counted on
// every node (admission.Registry.InUseAcross), which asks the cluster; the
// inference path never does.

import (
	"context"
	"encoding/json"
	"net/http"
	"time"

	"go.uber.org/zap"

	"github.com/timeblock/timeblock/accounts"
	"github.com/timeblock/timeblock/accounts/admission"
	"github.com/timeblock/timeblock/translate"
)

// lanesInUseTimeout bounds the count of a key's lanes in use across nodes.
const lanesInUseTimeout = 2 * time.Second

// serveKeyStatus answers GET /v1/key: {"data": accounts.KeyStatus}.
func (g *Gate) serveKeyStatus(w http.ResponseWriter, r *http.Request, format translate.Format, ent *accounts.Entitlement, now time.Time) error {
	g.state.metrics.laneless[lanelessKeyStatus].Inc()
	g.state.lastUsed.Record(ent.KeyID, ent.Combined, now)
	st := ent.Status(now)
	n, err := g.state.lanesInUse(r.Context(), ent.KeyID, lanePools(ent))
	switch {
	case err != nil && r.Context().Err() != nil:
		return g.clientGone(w, ent)
	case err != nil:
		g.logger.Error("counting the lanes in use of a key", zap.String("key_id", ent.KeyID), zap.Error(err))
		return g.reject(w, format, rejectClusterDown, http.StatusServiceUnavailable, "",
			"the lanes in use of this key could not be counted right now; retry in a moment", 1, ent)
	}
	st.LanesInUse = n
	body, err := json.Marshal(struct {
		Data accounts.KeyStatus `json:"data"`
	}{st})
	if err != nil {
		return err
	}
	return writeJSONBody(w, http.StatusOK, body)
}

// lanePools are the pools whose lanes the key's requests take: those of its
// lane grants (a boost takes none).
func lanePools(ent *accounts.Entitlement) []string {
	pools := make([]string, 0, len(ent.Grants))
	for i := range ent.Grants {
		g := &ent.Grants[i]
		if g.Boost {
			continue
		}
		seen := false
		for _, p := range pools {
			if p == g.PoolID {
				seen = true
				break
			}
		}
		if !seen {
			pools = append(pools, g.PoolID)
		}
	}
	return pools
}

// lanesInUse counts the requests of the key in flight in pools: on this
// node, and on the others when the lanes are shared (store postgres). The
// account API's key status uses it too (api.Options.LanesInUse).
func (s *gateState) lanesInUse(ctx context.Context, keyID string, pools []string) (int, error) {
	if err := s.wait(ctx); err != nil {
		return 0, err
	}
	keys := make([]admission.LaneKey, len(pools))
	for i, p := range pools {
		keys[i] = admission.LaneKey{KeyID: keyID, PoolID: p}
	}
	ctx, cancel := context.WithTimeout(ctx, lanesInUseTimeout)
	defer cancel()
	return s.lanes.InUseAcross(ctx, keys)
}
