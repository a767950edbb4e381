package accounts

// Usage per key per hour: what a key's requests did in each UTC hour
// (admitted, refused by reason, tokens the upstream reported, seconds a lane
// was held). The gate counts in memory and adds its counts to the store in
// batches (admission.UsageMeter); the store adds them to what other nodes
// and earlier batches wrote, so the figures are cluster-wide.

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"
)

// UsageRetention is how long hourly usage is kept; the lifecycle worker
// deletes older hours once an hour.
const UsageRetention = 90 * 24 * time.Hour

// MaxUsageRange is the longest range one usage query may ask for.
const MaxUsageRange = 93 * 24 * time.Hour

// defaultUsageRange is the range of a query that names no start.
const defaultUsageRange = 24 * time.Hour

// KeyUsage is what one key's requests did in one UTC hour.
type KeyUsage struct {
	KeyID string `json:"-"`
	// Hour is the start of the UTC hour the requests were admitted or
	// refused in; a request counts in full (its seconds and tokens too) in
	// the hour it was admitted.
	Hour     time.Time `json:"hour"`
	Admitted int64     `json:"admitted"`
	// Refused counts refusals by the gate's reason (window_closed,
	// lanes_full, model_not_held, key_denied...).
	Refused      map[string]int64 `json:"refused"`
	InputTokens  int64            `json:"inputTokens"`
	OutputTokens int64            `json:"outputTokens"`
	// Seconds is the time the requests held their lane.
	Seconds float64 `json:"seconds"`
}

// Add adds o's counters to u.
func (u *KeyUsage) Add(o *KeyUsage) {
	u.Admitted += o.Admitted
	u.InputTokens += o.InputTokens
	u.OutputTokens += o.OutputTokens
	u.Seconds += o.Seconds
	if len(o.Refused) > 0 && u.Refused == nil {
		u.Refused = make(map[string]int64, len(o.Refused))
	}
	for r, n := range o.Refused {
		u.Refused[r] += n
	}
}

// AddKeyUsage adds rows to the stored counters in one transaction. Rows of
// one key and hour add up; the store keeps no link to the key, so the usage
// of a deleted key stays until it ages out.
func AddKeyUsage(ctx context.Context, st Store, rows []KeyUsage) error {
	if len(rows) == 0 {
		return nil
	}
	for i := range rows {
		rows[i].Hour = rows[i].Hour.UTC().Truncate(time.Hour)
	}
	if err := st.Update(ctx, func(tx Tx) error { return tx.AddKeyUsage(rows) }); err != nil {
		return fmt.Errorf("adding key usage: %w", err)
	}
	return nil
}

// usageRange checks a query's range and fills its defaults: to is now,
// from 24 hours before to. Both are rounded to whole hours, from down and to
// up, so that the hour now under way is included.
func usageRange(from, to, now time.Time) (time.Time, time.Time, error) {
	if to.IsZero() {
		to = now
	}
	if from.IsZero() {
		from = to.Add(-defaultUsageRange)
	}
	if !from.Before(to) {
		return from, to, Invalid("from (%s) must be before to (%s)", from.UTC().Format(time.RFC3339), to.UTC().Format(time.RFC3339))
	}
	if to.Sub(from) > MaxUsageRange {
		return from, to, Invalid("the range from %s to %s is longer than %d days; ask for a shorter one",
			from.UTC().Format(time.RFC3339), to.UTC().Format(time.RFC3339), int(MaxUsageRange/(24*time.Hour)))
	}
	from = from.UTC().Truncate(time.Hour)
	if t := to.UTC().Truncate(time.Hour); t.Before(to) {
		to = t.Add(time.Hour)
	} else {
		to = t
	}
	return from, to, nil
}

// KeyUsage returns the hourly usage of the user's consumption key id in
// [from, to) (zero times: the last 24 hours), hours with no use left out,
// oldest first. An unknown id and another user's key are both 404.
func (s *Service) KeyUsage(ctx context.Context, userID, id string, from, to time.Time) ([]KeyUsage, error) {
	return s.keyUsage(ctx, "key usage", userID, id, from, to, func(tx Tx) error {
		_, err := ownedKey(tx, userID, id)
		return err
	})
}

// CombinedKeyUsage is KeyUsage for the user's combined key id.
func (s *Service) CombinedKeyUsage(ctx context.Context, userID, id string, from, to time.Time) ([]KeyUsage, error) {
	return s.keyUsage(ctx, "combined key usage", userID, id, from, to, func(tx Tx) error {
		_, err := ownedCombinedKey(tx, userID, id)
		return err
	})
}

func (s *Service) keyUsage(ctx context.Context, what, userID, id string, from, to time.Time, owned func(Tx) error) ([]KeyUsage, error) {
	from, to, err := usageRange(from, to, s.clock())
	if err != nil {
		return nil, err
	}
	var rows []KeyUsage
	err = s.store.View(ctx, func(tx Tx) error {
		if err := owned(tx); err != nil {
			return err
		}
		rows, err = tx.ListKeyUsage(id, from, to)
		return err
	})
	if err != nil {
		return nil, passClientError(what, err)
	}
	for i := range rows {
		if rows[i].Refused == nil {
			rows[i].Refused = map[string]int64{}
		}
	}
	if rows == nil {
		rows = []KeyUsage{}
	}
	return rows, nil
}

// PruneKeyUsage deletes the hours older than UsageRetention. The worker
// runs it hourly.
func (s *Service) PruneKeyUsage(ctx context.Context) (int, error) {
	before := s.clock().Add(-UsageRetention).UTC().Truncate(time.Hour)
	var n int
	err := s.store.Update(ctx, func(tx Tx) (err error) {
		n, err = tx.DeleteKeyUsageBefore(before)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("pruning key usage: %w", err)
	}
	return n, nil
}

// MergeKeyUsage adds up the rows of the same key and hour, and orders the
// result by key and hour (stores write rows in one order, so that batches
// from several nodes lock them in the same order).
func MergeKeyUsage(rows []KeyUsage) []KeyUsage {
	type id struct {
		key  string
		hour int64
	}
	at := make(map[id]int, len(rows))
	out := make([]KeyUsage, 0, len(rows))
	for i := range rows {
		r := &rows[i]
		k := id{r.KeyID, r.Hour.UTC().Truncate(time.Hour).Unix()}
		if j, ok := at[k]; ok {
			out[j].Add(r)
			continue
		}
		at[k] = len(out)
		m := KeyUsage{KeyID: r.KeyID, Hour: r.Hour.UTC().Truncate(time.Hour)}
		m.Add(r)
		out = append(out, m)
	}
	slices.SortFunc(out, func(a, b KeyUsage) int {
		if c := strings.Compare(a.KeyID, b.KeyID); c != 0 {
			return c
		}
		return a.Hour.Compare(b.Hour)
	})
	return out
}
