package storetest

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/timeblock/timeblock/accounts"
	"github.com/timeblock/timeblock/accounts/billing"
)

// fixtures builds fully populated records with unique ids, hashes and
// strictly increasing creation times, so that list order is predictable.
type fixtures struct {
	t *testing.T
	s accounts.Store
	n atomic.Int64
}

func newFixtures(t *testing.T, s accounts.Store) *fixtures { return &fixtures{t: t, s: s} }

// at returns a fixed instant plus d. It has microsecond precision, which both
// backends keep, so records round-trip exactly.
func at(d time.Duration) time.Time {
	return time.Date(2025, 6, 1, 9, 30, 0, 123456000, time.UTC).Add(d)
}

// next returns a fresh sequence number and creation time.
func (f *fixtures) next() (int64, time.Time) {
	n := f.n.Add(1)
	return n, at(time.Duration(n) * time.Second)
}

func (f *fixtures) user() *accounts.User {
	n, created := f.next()
	return &accounts.User{
		ID:            fmt.Sprintf("user-%d", n),
		Email:         fmt.Sprintf("user-%d@example.com", n),
		Name:          fmt.Sprintf("User %d", n),
		PaymentMethod: &billing.PaymentMethod{ID: fmt.Sprintf("pm_%d", n), Brand: "visa", Last4: "4242"},
		CreatedAt:     created,
	}
}

func (f *fixtures) session(u *accounts.User) *accounts.Session {
	n, created := f.next()
	return &accounts.Session{
		TokenHash: fmt.Sprintf("session-hash-%d", n),
		UserID:    u.ID,
		CreatedAt: created,
		ExpiresAt: created.Add(30 * 24 * time.Hour),
	}
}

func (f *fixtures) managementKey(u *accounts.User) *accounts.ManagementKey {
	n, created := f.next()
	return &accounts.ManagementKey{
		ID:         fmt.Sprintf("mk-%d", n),
		UserID:     u.ID,
		Name:       fmt.Sprintf("script %d", n),
		Prefix:     fmt.Sprintf("mk_%08d", n),
		Hash:       fmt.Sprintf("mk-hash-%d", n),
		Active:     true,
		CreatedAt:  created,
		LastUsedAt: created.Add(time.Minute),
	}
}

func (f *fixtures) pool(slots int) *accounts.Pool {
	n, updated := f.next()
	return &accounts.Pool{
		ID:          fmt.Sprintf("pool-%d", n),
		Slug:        fmt.Sprintf("model-%d", n),
		ModelID:     fmt.Sprintf("org/model-%d", n),
		ModelName:   fmt.Sprintf("Model %d", n),
		Description: "A model for tests",
		Status:      accounts.PoolActive,
		Slots:       slots,
		BlockPrices: map[accounts.Block]string{
			accounts.BlockAsia:   "40.00",
			accounts.BlockEurope: "55.50",
		},
		AnnualDiscount:     "0.15",
		ManualProvisioning: true,
		MaxOutputTokens:    8192,
		UpdatedAt:          updated,
	}
}

// seats returns quantity seats in every hour of block b, from slot first on.
func seats(b accounts.Block, first, quantity int) []accounts.Seat {
	var out []accounts.Seat
	for h := b.FirstHour(); h < b.FirstHour()+accounts.HoursPerBlock; h++ {
		for i := range quantity {
			out = append(out, accounts.Seat{Hour: h, SlotIndex: first + i})
		}
	}
	return out
}

func (f *fixtures) subscription(u *accounts.User, p *accounts.Pool, held []accounts.Seat) *accounts.Subscription {
	n, created := f.next()
	return &accounts.Subscription{
		ID:                 fmt.Sprintf("sub-%d", n),
		UserID:             u.ID,
		PoolID:             p.ID,
		Status:             accounts.SubActive,
		Blocks:             []accounts.Block{accounts.BlockEurope, accounts.BlockAsia},
		Quantity:           1,
		BillingCycle:       accounts.CycleMonth,
		MonthlyPrice:       "95.50",
		PeriodAmount:       "974.10",
		CancelAtPeriodEnd:  true,
		CurrentPeriodStart: created,
		CurrentPeriodEnd:   created.AddDate(0, 1, 0),
		PastDueSince:       created.Add(time.Hour),
		TermsVersion:       "2025-05",
		AckVia:             "terms",
		Seats:              held,
		CreatedAt:          created,
		UpdatedAt:          created.Add(time.Minute),
	}
}

func (f *fixtures) key(sub *accounts.Subscription) *accounts.Key {
	n, created := f.next()
	return &accounts.Key{
		ID:             fmt.Sprintf("key-%d", n),
		UserID:         sub.UserID,
		SubscriptionID: sub.ID,
		Name:           fmt.Sprintf("key %d", n),
		Hash:           fmt.Sprintf("key-hash-%d", n),
		Ciphertext:     []byte{0, 1, 2, 0xfe, 0xff, byte(n)},
		Active:         true,
		CreatedAt:      created,
		LastUsedAt:     created.Add(time.Minute),
	}
}

func (f *fixtures) combinedKey(u *accounts.User, members ...*accounts.Subscription) *accounts.CombinedKey {
	n, created := f.next()
	k := &accounts.CombinedKey{
		ID:         fmt.Sprintf("ck-%d", n),
		UserID:     u.ID,
		Label:      fmt.Sprintf("combined %d", n),
		Hash:       fmt.Sprintf("ck-hash-%d", n),
		Ciphertext: []byte{9, 8, 7, byte(n)},
		Active:     true,
		CreatedAt:  created,
		LastUsedAt: created.Add(time.Minute),
	}
	for i, sub := range members {
		role := accounts.RoleLane
		if i%2 == 1 {
			role = accounts.RoleBoost
		}
		k.Members = append(k.Members, accounts.Member{SubscriptionID: sub.ID, Role: role})
	}
	return k
}

func (f *fixtures) charge(sub *accounts.Subscription, periodStart time.Time) *accounts.Charge {
	n, created := f.next()
	return &accounts.Charge{
		ID:             fmt.Sprintf("charge-%d", n),
		UserID:         sub.UserID,
		SubscriptionID: sub.ID,
		PeriodStart:    periodStart,
		Amount:         "95.50",
		Status:         "pending",
		ProcessorRef:   fmt.Sprintf("ch_%d", n),
		MethodID:       fmt.Sprintf("pm_%d", n),
		CreatedAt:      created,
	}
}

// create stores records in one transaction, in the order given.
func (f *fixtures) create(records ...any) {
	f.t.Helper()
	update(f.t, f.s, func(tx accounts.Tx) error {
		for _, r := range records {
			if err := createRecord(tx, r); err != nil {
				return err
			}
		}
		return nil
	})
}

func createRecord(tx accounts.Tx, r any) error {
	switch r := r.(type) {
	case *accounts.User:
		return tx.CreateUser(r)
	case *accounts.Session:
		return tx.CreateSession(r)
	case *accounts.ManagementKey:
		return tx.CreateManagementKey(r)
	case *accounts.Pool:
		return tx.UpsertPool(r)
	case *accounts.Subscription:
		return tx.CreateSubscription(r)
	case *accounts.Key:
		return tx.CreateKey(r)
	case *accounts.CombinedKey:
		return tx.CreateCombinedKey(r)
	case *accounts.Charge:
		return tx.CreateCharge(r)
	case *accounts.ChargeIntent:
		return tx.CreateChargeIntent(r)
	case *billing.TestCharge:
		return tx.(accounts.TestLedgerTx).CreateTestCharge(r)
	}
	return fmt.Errorf("storetest: no create for %T", r)
}

// basics creates a user, a pool with the given slots and a subscription of
// that user holding slot 0 of the asia block.
func (f *fixtures) basics(slots int) (*accounts.User, *accounts.Pool, *accounts.Subscription) {
	f.t.Helper()
	u, p := f.user(), f.pool(slots)
	sub := f.subscription(u, p, seats(accounts.BlockAsia, 0, 1))
	f.create(u, p, sub)
	return u, p, sub
}
