package storetest

import (
	"bytes"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/timeblock/timeblock/accounts"
)

// testBillingRecords covers accounts.BillingTx: processor customers, webhook
// events and idempotent requests.
func testBillingRecords(t *testing.T, s accounts.Store) {
	f := newFixtures(t, s)
	u, other := f.user(), f.user()
	f.create(u, other)

	// Customers: one per (processor, user), remembered.
	expectErr(t, s, "GetProcessorCustomer before any", accounts.ErrNotFound, func(tx accounts.Tx) error {
		_, err := tx.GetProcessorCustomer("stripe", u.ID)
		return err
	})
	update(t, s, func(tx accounts.Tx) error { return tx.CreateProcessorCustomer("stripe", u.ID, "cus_1") })
	expect(t, s, "GetProcessorCustomer", "cus_1", func(tx accounts.Tx) (string, error) {
		return tx.GetProcessorCustomer("stripe", u.ID)
	})
	expectErr(t, s, "a second customer of the user", accounts.ErrConflict, func(tx accounts.Tx) error {
		return tx.CreateProcessorCustomer("stripe", u.ID, "cus_2")
	})
	expectErr(t, s, "a customer of a missing user", accounts.ErrNotFound, func(tx accounts.Tx) error {
		return tx.CreateProcessorCustomer("stripe", "no-such-user", "cus_3")
	})
	update(t, s, func(tx accounts.Tx) error {
		if err := tx.CreateProcessorCustomer("other", u.ID, "x_1"); err != nil {
			return err
		}
		return tx.CreateProcessorCustomer("stripe", other.ID, "cus_4")
	})
	expect(t, s, "customer with another processor", "x_1", func(tx accounts.Tx) (string, error) {
		return tx.GetProcessorCustomer("other", u.ID)
	})
	expect(t, s, "customer of the other user", "cus_4", func(tx accounts.Tx) (string, error) {
		return tx.GetProcessorCustomer("stripe", other.ID)
	})

	// Webhook events: each id once, and a refused duplicate leaves the
	// transaction usable (the webhook goes on to answer).
	_, received := f.next()
	update(t, s, func(tx accounts.Tx) error {
		return tx.RecordWebhookEvent(&accounts.WebhookEvent{ID: "evt_1", Type: "payment_intent.succeeded", ReceivedAt: received})
	})
	update(t, s, func(tx accounts.Tx) error {
		err := tx.RecordWebhookEvent(&accounts.WebhookEvent{ID: "evt_1", Type: "payment_intent.succeeded", ReceivedAt: received})
		if !errors.Is(err, accounts.ErrConflict) {
			t.Errorf("recording evt_1 again: got %v, want ErrConflict", err)
		}
		return tx.RecordWebhookEvent(&accounts.WebhookEvent{ID: "evt_2", Type: "charge.refunded", ReceivedAt: received})
	})
	expectErr(t, s, "evt_2 after the transaction that went on", accounts.ErrConflict, func(tx accounts.Tx) error {
		return tx.RecordWebhookEvent(&accounts.WebhookEvent{ID: "evt_2", Type: "charge.refunded", ReceivedAt: received})
	})

	// Idempotent requests: per user and key, replaced in place, deleted.
	expectErr(t, s, "GetIdempotentRequest before any", accounts.ErrNotFound, func(tx accounts.Tx) error {
		_, err := tx.GetIdempotentRequest(u.ID, "k1")
		return err
	})
	running := &accounts.IdempotentRequest{UserID: u.ID, Key: "k1", Fingerprint: "fp", ResourceID: "sub-1", CreatedAt: received}
	update(t, s, func(tx accounts.Tx) error { return tx.PutIdempotentRequest(running) })
	got := read(t, s, func(tx accounts.Tx) (*accounts.IdempotentRequest, error) { return tx.GetIdempotentRequest(u.ID, "k1") })
	if got.Fingerprint != "fp" || got.ResourceID != "sub-1" || got.Status != 0 || len(got.Body) != 0 || !got.CreatedAt.Equal(received) || got.CreatedAt.Location().String() != "UTC" {
		t.Errorf("running request: got %+v", got)
	}
	done := *running
	done.Status, done.Body = 201, []byte(`{"id":"sub-1"}`)
	update(t, s, func(tx accounts.Tx) error { return tx.PutIdempotentRequest(&done) })
	got = read(t, s, func(tx accounts.Tx) (*accounts.IdempotentRequest, error) { return tx.GetIdempotentRequest(u.ID, "k1") })
	if got.Status != 201 || !bytes.Equal(got.Body, done.Body) || got.UserID != u.ID || got.Key != "k1" {
		t.Errorf("answered request: got %+v, want status 201 and body %s", got, done.Body)
	}
	expectErr(t, s, "the same key of another user", accounts.ErrNotFound, func(tx accounts.Tx) error {
		_, err := tx.GetIdempotentRequest(other.ID, "k1")
		return err
	})
	expectErr(t, s, "a request of a missing user", accounts.ErrNotFound, func(tx accounts.Tx) error {
		return tx.PutIdempotentRequest(&accounts.IdempotentRequest{UserID: "no-such-user", Key: "k", CreatedAt: received})
	})
	update(t, s, func(tx accounts.Tx) error {
		if err := tx.DeleteIdempotentRequest(u.ID, "k1"); err != nil {
			return err
		}
		return tx.DeleteIdempotentRequest(u.ID, "never-used")
	})
	expectErr(t, s, "GetIdempotentRequest after delete", accounts.ErrNotFound, func(tx accounts.Tx) error {
		_, err := tx.GetIdempotentRequest(u.ID, "k1")
		return err
	})

	// Pruning: what is older than the limits goes, the rest stays.
	cut := received.Add(time.Hour)
	update(t, s, func(tx accounts.Tx) error {
		for i, at := range []time.Time{received, cut, cut.Add(time.Second)} {
			key := fmt.Sprintf("p%d", i)
			if err := tx.PutIdempotentRequest(&accounts.IdempotentRequest{UserID: u.ID, Key: key, Status: 201, CreatedAt: at}); err != nil {
				return err
			}
			if err := tx.RecordWebhookEvent(&accounts.WebhookEvent{ID: "evt_" + key, Type: "t", ReceivedAt: at}); err != nil {
				return err
			}
		}
		return nil
	})
	var pruned int
	update(t, s, func(tx accounts.Tx) (err error) {
		pruned, err = tx.PruneBillingRecords(cut, cut)
		return err
	})
	// evt_1 and evt_2 were received at `received` too.
	if pruned != 4 {
		t.Errorf("pruned %d records, want 4 (p0 and evt_p0, evt_1, evt_2)", pruned)
	}
	expectErr(t, s, "pruned request", accounts.ErrNotFound, func(tx accounts.Tx) error {
		_, err := tx.GetIdempotentRequest(u.ID, "p0")
		return err
	})
	update(t, s, func(tx accounts.Tx) error {
		for _, key := range []string{"p1", "p2"} {
			if _, err := tx.GetIdempotentRequest(u.ID, key); err != nil {
				t.Errorf("request %s at or after the limit: %v", key, err)
			}
		}
		if err := tx.RecordWebhookEvent(&accounts.WebhookEvent{ID: "evt_p0", Type: "t", ReceivedAt: cut}); err != nil {
			t.Errorf("a pruned event id is new again: %v", err)
		}
		for _, id := range []string{"evt_p1", "evt_p2"} {
			if err := tx.RecordWebhookEvent(&accounts.WebhookEvent{ID: id, Type: "t", ReceivedAt: cut}); !errors.Is(err, accounts.ErrConflict) {
				t.Errorf("event %s at or after the limit: %v, want kept", id, err)
			}
		}
		return nil
	})
}
