package accounts_test

import (
	"errors"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/timeblock/timeblock/accounts"
	"github.com/timeblock/timeblock/accounts/billing"
)

// Usage rows add up per key and hour, across batches and concurrent
// writers (nodes), and the service answers a key's hours to its owner only.
func TestKeyUsage(t *testing.T) {
	forEachStoreNodes(t, 2, func(t *testing.T, nodes []accounts.Store) {
		e := newEnv(t, nodes[0])
		e.pool("use", accounts.PoolActive, 5, false)
		u, _ := e.user("use@example.test", billing.TestCardVisa)
		other, _ := e.user("other@example.test", billing.TestCardVisa)
		res := e.subscribe(u, "use", 1, "europe")
		key, err := e.svc.CreateKey(e.ctx, u.ID, res.ID, "")
		e.must(err)
		keyID := key.ID

		now := e.clock.Now() // 09:15
		h := now.Truncate(time.Hour)
		add := func(st accounts.Store, rows ...accounts.KeyUsage) {
			t.Helper()
			if err := accounts.AddKeyUsage(e.ctx, st, rows); err != nil {
				t.Fatal(err)
			}
		}
		add(nodes[0],
			accounts.KeyUsage{KeyID: keyID, Hour: h.Add(5 * time.Minute), Admitted: 2, InputTokens: 10, OutputTokens: 4, Seconds: 1.5,
				Refused: map[string]int64{"window_closed": 1}},
			// Same key and hour in one batch: merged.
			accounts.KeyUsage{KeyID: keyID, Hour: h, Admitted: 1, Refused: map[string]int64{"lanes_full": 2}},
			accounts.KeyUsage{KeyID: keyID, Hour: h.Add(-2 * time.Hour), Admitted: 7},
			accounts.KeyUsage{KeyID: "another-key", Hour: h, Admitted: 100},
		)
		// Both nodes at once, ten batches each.
		var wg sync.WaitGroup
		for _, st := range nodes {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range 10 {
					if err := accounts.AddKeyUsage(e.ctx, st, []accounts.KeyUsage{{KeyID: keyID, Hour: h, Admitted: 1,
						InputTokens: 1, Seconds: 0.25, Refused: map[string]int64{"window_closed": 1}}}); err != nil {
						t.Error(err)
					}
				}
			}()
		}
		wg.Wait()

		rows, err := e.svc.KeyUsage(e.ctx, u.ID, keyID, time.Time{}, time.Time{})
		e.must(err)
		want := []accounts.KeyUsage{
			{KeyID: keyID, Hour: h.Add(-2 * time.Hour), Admitted: 7, Refused: map[string]int64{}},
			{KeyID: keyID, Hour: h, Admitted: 23, InputTokens: 30, OutputTokens: 4, Seconds: 6.5,
				Refused: map[string]int64{"window_closed": 21, "lanes_full": 2}},
		}
		if !equalUsage(rows, want) {
			t.Fatalf("usage = %+v\nwant %+v", rows, want)
		}

		// A range that leaves out the current hour.
		rows, err = e.svc.KeyUsage(e.ctx, u.ID, keyID, h.Add(-3*time.Hour), h)
		e.must(err)
		if len(rows) != 1 || rows[0].Admitted != 7 {
			t.Errorf("earlier hours = %+v", rows)
		}
		// Another user's key, an unknown key: 404; a range too long or reversed: 400.
		for _, c := range []struct {
			user, key string
			from, to  time.Time
			status    int
		}{
			{other.ID, keyID, time.Time{}, time.Time{}, http.StatusNotFound},
			{u.ID, "no-such-key", time.Time{}, time.Time{}, http.StatusNotFound},
			{u.ID, keyID, now.Add(-94 * 24 * time.Hour), now, http.StatusBadRequest},
			{u.ID, keyID, now, now.Add(-time.Hour), http.StatusBadRequest},
		} {
			_, err := e.svc.KeyUsage(e.ctx, c.user, c.key, c.from, c.to)
			var ae *accounts.Error
			if !errors.As(err, &ae) || ae.Status != c.status {
				t.Errorf("KeyUsage(%s, %s, %v, %v) = %v, want %d", c.user, c.key, c.from, c.to, err, c.status)
			}
		}
		if rows, err := e.svc.KeyUsage(e.ctx, u.ID, keyID, now.Add(-93*24*time.Hour), now); err != nil || len(rows) != 2 {
			t.Errorf("93 days: %v, %v", rows, err)
		}

		// Retention: 90 days.
		add(nodes[0], accounts.KeyUsage{KeyID: keyID, Hour: now.Add(-accounts.UsageRetention - time.Hour), Admitted: 1})
		n, err := e.svc.PruneKeyUsage(e.ctx)
		e.must(err)
		if n != 1 {
			t.Errorf("pruned %d hours, want 1", n)
		}
		if rows, _ := e.svc.KeyUsage(e.ctx, u.ID, keyID, now.Add(-93*24*time.Hour), now); len(rows) != 2 {
			t.Errorf("after pruning: %+v", rows)
		}
	})
}

// A combined key's usage is its owner's only.
func TestCombinedKeyUsage(t *testing.T) {
	forEachStore(t, func(t *testing.T, st accounts.Store) {
		e := newEnv(t, st)
		u, _ := e.user("ck@example.com", "")
		other, _ := e.user("other@example.com", "")
		p := e.pool("alpha", accounts.PoolActive, 10, false)
		sub := e.sub(u, p, accounts.SubActive, 1, accounts.BlockEurope)
		sub2 := e.sub(u, p, accounts.SubActive, 1, accounts.BlockAsia)
		ck, err := e.svc.CreateCombinedKey(e.ctx, u.ID, []string{sub.ID, sub2.ID}, "team", nil)
		e.must(err)
		h := e.clock.Now().Truncate(time.Hour)
		e.must(accounts.AddKeyUsage(e.ctx, st, []accounts.KeyUsage{{KeyID: ck.ID, Hour: h, Admitted: 3, OutputTokens: 9}}))
		rows, err := e.svc.CombinedKeyUsage(e.ctx, u.ID, ck.ID, time.Time{}, time.Time{})
		e.must(err)
		if len(rows) != 1 || rows[0].Admitted != 3 || rows[0].OutputTokens != 9 || !rows[0].Hour.Equal(h) {
			t.Errorf("usage = %+v", rows)
		}
		var ae *accounts.Error
		if _, err := e.svc.CombinedKeyUsage(e.ctx, other.ID, ck.ID, time.Time{}, time.Time{}); !errors.As(err, &ae) || ae.Status != http.StatusNotFound {
			t.Errorf("another user's combined key: %v", err)
		}
	})
}

func equalUsage(got, want []accounts.KeyUsage) bool {
	if len(got) != len(want) {
		return false
	}
	for i := range got {
		g, w := got[i], want[i]
		if g.KeyID != w.KeyID || !g.Hour.Equal(w.Hour) || g.Admitted != w.Admitted || g.InputTokens != w.InputTokens ||
			g.OutputTokens != w.OutputTokens || g.Seconds != w.Seconds || len(g.Refused) != len(w.Refused) {
			return false
		}
		for r, n := range w.Refused {
			if g.Refused[r] != n {
				return false
			}
		}
	}
	return true
}
