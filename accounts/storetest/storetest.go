// Package storetest is the conformance suite of accounts.Store: every backend
// runs it, so that the embedded and PostgreSQL stores behave the same way.
//
// Beyond what store.go states, the suite pins down what the service relies on:
// a write that fails leaves the transaction usable; a reference to a missing
// user, pool or subscription is ErrNotFound; times come back in UTC with
// microsecond precision; pools list in first-upsert order.
package storetest

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/timeblock/timeblock/accounts"
)

// Run runs the suite. open must return a new store over empty storage; it is
// called once per subtest, and the suite closes the store when the subtest ends.
func Run(t *testing.T, open func(t *testing.T) accounts.Store) {
	tests := []struct {
		name string
		fn   func(t *testing.T, s accounts.Store)
	}{
		{"Users", testUsers},
		{"Sessions", testSessions},
		{"ManagementKeys", testManagementKeys},
		{"Pools", testPools},
		{"Subscriptions", testSubscriptions},
		{"TakenSeats", testTakenSeats},
		{"DeleteSubscription", testDeleteSubscription},
		{"SubscriptionsDue", testSubscriptionsDue},
		{"Keys", testKeys},
		{"CombinedKeys", testCombinedKeys},
		{"CredentialHashes", testCredentialHashes},
		{"Charges", testCharges},
		{"BillingRecords", testBillingRecords},
		{"NotFound", testNotFound},
		{"Conflicts", testConflicts},
		{"MissingReferences", testMissingReferences},
		{"Rollback", testRollback},
		{"FailedWriteKeepsTransaction", testFailedWriteKeepsTransaction},
		{"View", testView},
		{"Times", testTimes},
		{"TouchLastUsed", testTouchLastUsed},
		{"Invalidation", testInvalidation},
		{"ConcurrentSeats", testConcurrentSeats},
		{"ConcurrentChargeClaims", testConcurrentChargeClaims},
		{"ChargeIntents", testChargeIntents},
		{"ConcurrentIntentClaims", testConcurrentIntentClaims},
		{"TestCharges", testTestCharges},
		{"PendingCharges", testPendingCharges},
		{"OperatorEvents", testOperatorEvents},
		{"ConcurrentOperatorEventClaims", testConcurrentOperatorEventClaims},
		{"Ledger", testLedger},
		{"ConcurrentLedgerNumbers", testConcurrentLedgerNumbers},
		{"AuditRecords", testAuditRecords},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := open(t)
			t.Cleanup(func() {
				if err := s.Close(); err != nil {
					t.Errorf("close: %v", err)
				}
			})
			tt.fn(t, s)
		})
	}
}

// update runs fn in an Update and fails the test on error.
func update(t *testing.T, s accounts.Store, fn func(tx accounts.Tx) error) {
	t.Helper()
	if err := s.Update(t.Context(), fn); err != nil {
		t.Fatalf("update: %v", err)
	}
}

// read returns what get reads in a View, failing the test on error.
func read[T any](t *testing.T, s accounts.Store, get func(tx accounts.Tx) (T, error)) T {
	t.Helper()
	var v T
	err := s.View(t.Context(), func(tx accounts.Tx) (err error) {
		v, err = get(tx)
		return err
	})
	if err != nil {
		t.Fatalf("view: %v", err)
	}
	return v
}

// expect reads with get in a View and compares the result with want.
func expect[T any](t *testing.T, s accounts.Store, what string, want T, get func(tx accounts.Tx) (T, error)) {
	t.Helper()
	var got T
	err := s.View(t.Context(), func(tx accounts.Tx) (err error) {
		got, err = get(tx)
		return err
	})
	if err != nil {
		t.Errorf("%s: %v", what, err)
		return
	}
	equal(t, what, got, want)
}

// expectErr runs fn in an Update (rolled back, since fn returns the error)
// and checks that it fails with target.
func expectErr(t *testing.T, s accounts.Store, what string, target error, fn func(tx accounts.Tx) error) {
	t.Helper()
	err := s.Update(t.Context(), fn)
	if !errors.Is(err, target) {
		t.Errorf("%s: got error %v, want %v", what, err, target)
	}
}

// equal compares two values of the domain types after canonicalizing both:
// an empty slice or map equals nil, times compare by instant, and the seats
// of a subscription compare as a set. Lists are reported by id first.
func equal(t *testing.T, what string, got, want any) {
	t.Helper()
	g, w := canonical(got), canonical(want)
	if reflect.DeepEqual(g, w) {
		return
	}
	gv, wv := reflect.ValueOf(g), reflect.ValueOf(w)
	if gv.Kind() == reflect.Slice && wv.Kind() == reflect.Slice {
		if gi, wi := ids(gv), ids(wv); !slices.Equal(gi, wi) {
			t.Errorf("%s: got ids %q, want %q", what, gi, wi)
			return
		}
		for i := range gv.Len() {
			equal(t, fmt.Sprintf("%s[%d]", what, i), gv.Index(i).Interface(), wv.Index(i).Interface())
		}
		return
	}
	t.Errorf("%s:\n got  %s\n want %s", what, show(g), show(w))
}

// ids lists the ID field of each element of a slice of records.
func ids(list reflect.Value) []string {
	out := make([]string, list.Len())
	for i := range out {
		e := reflect.Indirect(list.Index(i))
		if e.Kind() == reflect.Struct {
			if id := e.FieldByName("ID"); id.IsValid() {
				out[i] = id.String()
			}
		}
	}
	return out
}

func show(v any) string {
	if b, err := json.Marshal(v); err == nil {
		return string(b)
	}
	return fmt.Sprintf("%v", v)
}

func canonical(v any) any {
	if v == nil {
		return nil
	}
	src := reflect.ValueOf(v)
	dst := reflect.New(src.Type()).Elem()
	canon(dst, src)
	return dst.Interface()
}

func canon(dst, src reflect.Value) {
	switch src.Kind() {
	case reflect.Pointer:
		if src.IsNil() {
			return
		}
		p := reflect.New(src.Type().Elem())
		canon(p.Elem(), src.Elem())
		dst.Set(p)
	case reflect.Struct:
		if src.Type() == reflect.TypeFor[time.Time]() {
			dst.Set(reflect.ValueOf(src.Interface().(time.Time).UTC()))
			return
		}
		for i := range src.NumField() {
			canon(dst.Field(i), src.Field(i))
		}
	case reflect.Slice:
		if src.Len() == 0 {
			return
		}
		s := reflect.MakeSlice(src.Type(), src.Len(), src.Len())
		for i := range src.Len() {
			canon(s.Index(i), src.Index(i))
		}
		if src.Type() == reflect.TypeFor[[]accounts.Seat]() {
			slices.SortFunc(s.Interface().([]accounts.Seat), compareSeats)
		}
		dst.Set(s)
	case reflect.Map:
		if src.Len() == 0 {
			return
		}
		m := reflect.MakeMapWithSize(src.Type(), src.Len())
		for it := src.MapRange(); it.Next(); {
			val := reflect.New(src.Type().Elem()).Elem()
			canon(val, it.Value())
			m.SetMapIndex(it.Key(), val)
		}
		dst.Set(m)
	default:
		dst.Set(src)
	}
}

func compareSeats(a, b accounts.Seat) int {
	return cmp.Or(cmp.Compare(a.Hour, b.Hour), cmp.Compare(a.SlotIndex, b.SlotIndex))
}

// waitFor waits for want on ch, for a few seconds: PostgreSQL delivers
// notifications asynchronously.
func waitFor(t *testing.T, ch <-chan string, want string) {
	t.Helper()
	timeout := time.After(5 * time.Second)
	for {
		select {
		case got := <-ch:
			if got == want {
				return
			}
		case <-timeout:
			t.Fatalf("invalidation %q not delivered within 5s", want)
		}
	}
}
