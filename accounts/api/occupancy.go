package api

import (
	"net/http"
)

// GET /timeblock/pools/{slug}/occupancy?from=&to= → the pool's seats and
// lanes in use per UTC hour of the day (accounts.PoolOccupancy); the range
// defaults to the last 7 days.
func (o *Operator) occupancy(w http.ResponseWriter, r *http.Request) error {
	from, to, err := usageQuery(r)
	if err != nil {
		return err
	}
	occ, err := o.svc.PoolOccupancy(r.Context(), r.PathValue("slug"), from, to)
	if err != nil {
		return err
	}
	writeData(w, http.StatusOK, occ)
	return nil
}
