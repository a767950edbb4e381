package billing

import (
	"context"
	"errors"
	"testing"
)

// The in-memory test processor answers with billing's own errors: an
// unknown card is a *MethodError, an unknown setup a *SetupNotFoundError, a
// declined card ErrDeclined, and a repeated key the first outcome.
func TestTestProcessorErrors(t *testing.T) {
	ctx := context.Background()
	p := NewTestProcessor()
	if _, err := p.SaveMethod(ctx, "u1", "pm_card_bogus"); !errors.As(err, new(*MethodError)) {
		t.Errorf("SaveMethod(unknown) = %v, want a *MethodError", err)
	}
	if _, err := p.FinishSetup(ctx, "u1", "seti_test_unknown"); !errors.As(err, new(*SetupNotFoundError)) {
		t.Errorf("FinishSetup(unknown) = %v, want a *SetupNotFoundError", err)
	}
	if _, err := p.Charge(ctx, ChargeRequest{UserID: "u1", MethodID: TestCardDeclined, Amount: "1.00", IdempotencyKey: SubscribeKey("s1")}); !errors.Is(err, ErrDeclined) {
		t.Errorf("Charge(declined) = %v, want ErrDeclined", err)
	}
	req := ChargeRequest{UserID: "u1", MethodID: TestCardVisa, Amount: "1.00", IdempotencyKey: SubscribeKey("s2")}
	ref, err := p.Charge(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if again, err := p.Charge(ctx, req); err != nil || again != ref {
		t.Errorf("repeated charge = %q, %v, want %q", again, err, ref)
	}
	if l := p.Ledger(); len(l) != 1 || l[0].Ref != ref {
		t.Errorf("ledger = %+v, want the one charge %s", l, ref)
	}
}
