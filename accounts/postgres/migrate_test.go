package postgres_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/timeblock/timeblock/accounts"
	"github.com/timeblock/timeblock/accounts/postgres/pgtest"
)

// A database written by a build without period_amount (schema version 3)
// is brought up to date at Open: its subscriptions read with PeriodAmount
// "", which renewals answer from their first charge (accounts.periodAmountTx),
// and take a value once written.
func TestUpgradeKeepsSubscriptionsWithoutPeriodAmount(t *testing.T) {
	dsn := pgtest.DSN(t)
	conn, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	files, err := filepath.Glob("migrations/*.sql")
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(files)
	if _, err := conn.Exec(t.Context(), `CREATE TABLE schema_migrations (version integer PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())`); err != nil {
		t.Fatal(err)
	}
	for i, f := range files[:3] {
		sql, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := conn.Exec(t.Context(), string(sql)); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if _, err := conn.Exec(t.Context(), `INSERT INTO schema_migrations (version) VALUES ($1)`, i+1); err != nil {
			t.Fatal(err)
		}
	}
	for _, q := range []string{
		`INSERT INTO users (id, email, name, payment_method_brand, payment_method_last4, created_at)
			VALUES ('u1', 'old@example.com', 'Old', '', '', now())`,
		`INSERT INTO pools (id, slug, model_id, model_name, description, status, slots, block_prices,
			annual_discount, manual_provisioning, max_output_tokens, updated_at)
			VALUES ('p1', 'old', 'm', 'm', '', 'active', 1, '{"asia": "40"}', '0.15', false, 0, now())`,
		`INSERT INTO subscriptions (id, user_id, pool_id, status, blocks, quantity, billing_cycle, monthly_price,
			cancel_at_period_end, current_period_start, current_period_end, terms_version, ack_via, created_at, updated_at)
			VALUES ('s1', 'u1', 'p1', 'active', '{asia}', 1, 'year', '40', false, now(), now() + interval '1 year',
			'', 'api', now(), now())`,
	} {
		if _, err := conn.Exec(t.Context(), q); err != nil {
			t.Fatal(err)
		}
	}

	s := open(t, dsn)
	var sub *accounts.Subscription
	read := func() {
		t.Helper()
		err := s.View(t.Context(), func(tx accounts.Tx) (err error) {
			sub, err = tx.GetSubscription("s1")
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	read()
	if sub.PeriodAmount != "" || sub.MonthlyPrice != "40" || sub.BillingCycle != accounts.CycleYear {
		t.Fatalf("upgraded subscription: %+v, want PeriodAmount \"\", the rest as stored", sub)
	}
	sub.PeriodAmount = "408"
	if err := s.Update(t.Context(), func(tx accounts.Tx) error { return tx.UpdateSubscription(sub) }); err != nil {
		t.Fatal(err)
	}
	read()
	if sub.PeriodAmount != "408" {
		t.Fatalf("PeriodAmount after update = %q, want 408", sub.PeriodAmount)
	}
}
