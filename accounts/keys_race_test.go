package accounts_test

import (
	"errors"
	"net/http"
	"sync"
	"testing"

	"github.com/timeblock/timeblock/accounts"
)

// TestKeyCreationRaces: concurrent requests never give a subscription two
// keys, nor a key and a combined key, nor two combined keys.
func TestKeyCreationRaces(t *testing.T) {
	forEachStore(t, func(t *testing.T, st accounts.Store) {
		e := newEnv(t, st)
		u, _ := e.user("ada@example.com", "")
		alpha := e.pool("alpha", accounts.PoolActive, 10, false)
		const n = 8

		race := func(fns ...func() error) (ok int, errs []error) {
			var (
				wg sync.WaitGroup
				mu sync.Mutex
			)
			for _, fn := range fns {
				wg.Add(1)
				go func() {
					defer wg.Done()
					err := fn()
					mu.Lock()
					defer mu.Unlock()
					if err == nil {
						ok++
					} else {
						errs = append(errs, err)
					}
				}()
			}
			wg.Wait()
			return ok, errs
		}
		wantClientErrors := func(errs []error) {
			t.Helper()
			for _, err := range errs {
				var ae *accounts.Error
				if !errors.As(err, &ae) || ae.Status != http.StatusConflict && ae.Status != http.StatusBadRequest {
					t.Errorf("loser got %v, want a 409 or 400", err)
				}
			}
		}

		// n requests for one subscription's key.
		sub := e.sub(u, alpha, accounts.SubActive, 1, accounts.BlockEurope)
		var fns []func() error
		for range n {
			fns = append(fns, func() error { _, err := e.svc.CreateKey(e.ctx, u.ID, sub.ID, ""); return err })
		}
		ok, errs := race(fns...)
		if ok != 1 {
			t.Errorf("%d keys created for one subscription", ok)
		}
		wantClientErrors(errs)

		// A standalone key against combined keys, all claiming the same subscriptions.
		a := e.sub(u, alpha, accounts.SubActive, 1, accounts.BlockAsia)
		b := e.sub(u, alpha, accounts.SubActive, 1, accounts.BlockAsia)
		fns = []func() error{func() error { _, err := e.svc.CreateKey(e.ctx, u.ID, a.ID, ""); return err }}
		for range n - 1 {
			fns = append(fns, func() error {
				_, err := e.svc.CreateCombinedKey(e.ctx, u.ID, []string{a.ID, b.ID}, "", nil)
				return err
			})
		}
		ok, errs = race(fns...)
		if ok != 1 {
			t.Errorf("%d of a key and combined keys over one subscription succeeded", ok)
		}
		wantClientErrors(errs)
		e.view(func(tx accounts.Tx) error {
			_, kerr := tx.GetKeyBySubscription(a.ID)
			cks, err := tx.ListCombinedKeys(u.ID)
			if err != nil {
				return err
			}
			if (kerr == nil) == (len(cks) == 1) || len(cks) > 1 {
				t.Errorf("subscription keyed: %v, combined keys: %d", kerr == nil, len(cks))
			}
			return nil
		})
	})
}
