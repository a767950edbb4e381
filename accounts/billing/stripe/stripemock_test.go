package stripe_test

// Request shapes against stripe-mock, which checks every request against
// Stripe's OpenAPI specification (unknown or malformed parameters are a
// 400) and answers with fixtures. Install it with
//
//	go install github.com/stripe/stripe-mock@v0.203.0
//
// The tests find it on PATH or in GOBIN (GOPATH/bin); without it they skip,
// unless TIMEBLOCK_REQUIRE_STRIPE_MOCK=1 (as .ci/run sets), where they fail.

import (
	"bufio"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/timeblock/timeblock/accounts"
	"github.com/timeblock/timeblock/accounts/billing"
	"github.com/timeblock/timeblock/accounts/billing/stripe"
)

// stripeMock starts stripe-mock on a free port and returns its base URL.
func stripeMock(t *testing.T) string {
	t.Helper()
	bin := findStripeMock()
	if bin == "" {
		msg := "stripe-mock is not installed: go install github.com/stripe/stripe-mock@v0.203.0 (it lands in GOBIN or GOPATH/bin)"
		if os.Getenv("TIMEBLOCK_REQUIRE_STRIPE_MOCK") == "1" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	cmd := exec.Command(bin, "-http-addr", "127.0.0.1:", "-https-addr", "127.0.0.1:")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", bin, err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		if addr, ok := strings.CutPrefix(sc.Text(), "Listening for HTTP at address: "); ok {
			go func() { // keep draining so stripe-mock never blocks on its output
				for sc.Scan() {
				}
			}()
			return "http://" + strings.TrimSpace(addr)
		}
	}
	t.Fatalf("stripe-mock exited before listening: %v", sc.Err())
	return ""
}

func findStripeMock() string {
	if p, err := exec.LookPath("stripe-mock"); err == nil {
		return p
	}
	var dirs []string
	if d := os.Getenv("GOBIN"); d != "" {
		dirs = append(dirs, d)
	}
	if out, err := exec.Command("go", "env", "GOBIN", "GOPATH").Output(); err == nil {
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		if len(lines) > 0 && lines[0] != "" {
			dirs = append(dirs, lines[0])
		}
		if len(lines) > 1 {
			for _, gp := range filepath.SplitList(lines[1]) {
				dirs = append(dirs, filepath.Join(gp, "bin"))
			}
		}
	}
	for _, d := range dirs {
		p := filepath.Join(d, "stripe-mock")
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() {
			return p
		}
	}
	return ""
}

// TestStripeMock runs every call the processor makes against stripe-mock:
// a request stripe-mock refuses (a parameter Stripe does not know, a wrong
// type) fails here.
func TestStripeMock(t *testing.T) {
	base := stripeMock(t)
	st := newStore(t)
	p, err := stripe.New(stripe.Config{SecretKey: testKey, APIBase: base, Store: st, MaxNetworkRetries: -1,
		StatementDescriptorSuffix: "TIMEBLOCK", WebhookSecret: "whsec_abcdefgh12345678"})
	if err != nil {
		t.Fatal(err)
	}

	// stripe-mock's fixture SetupIntent is requires_payment_method, which
	// is a declined setup; either outcome shows the SetupIntent request
	// was accepted, a refusal does not.
	pm, err := p.SaveMethod(t.Context(), "user-1", "pm_card_visa")
	t.Logf("SaveMethod: %+v, %v", pm, err)
	switch {
	case errors.Is(err, billing.ErrDeclined):
		pm = billing.PaymentMethod{ID: "pm_card_visa"}
	case err != nil:
		t.Fatalf("SaveMethod: %v", err)
	case pm.ID == "" || pm.Brand == "" || pm.Last4 == "":
		t.Errorf("saved method = %+v, want an id, brand and last4", pm)
	}
	// The fixture SetupIntent belongs to no customer: a 404, not a refusal.
	_, err = p.FinishSetup(t.Context(), "user-1", "seti_123")
	if ae, ok := errors.AsType[*accounts.Error](err); err != nil && !ok {
		t.Fatalf("FinishSetup: %v", err)
	} else {
		t.Logf("FinishSetup: %v", ae)
	}
	var cust string
	st.View(t.Context(), func(tx accounts.Tx) (err error) {
		cust, err = tx.GetProcessorCustomer("stripe", "user-1")
		return err
	})
	if !strings.HasPrefix(cust, "cus_") {
		t.Errorf("stored customer = %q", cust)
	}

	for _, key := range []string{"subscribe:sub-1", "renew:sub-1:2026-01-01T00:00:00Z"} {
		ref, err := p.Charge(t.Context(), billing.ChargeRequest{
			UserID: "user-1", MethodID: pm.ID, Amount: "40.85", IdempotencyKey: key, Description: "Timeblock test",
		})
		// stripe-mock's fixture PaymentIntent has a fixed status; either
		// outcome shows the request was accepted, a refusal does not.
		t.Logf("Charge %s: %q, %v", key, ref, err)
		if err != nil && !errors.Is(err, billing.ErrDeclined) {
			t.Fatalf("Charge %s: %v", key, err)
		}
		if err == nil && !strings.HasPrefix(ref, "pi_") {
			t.Errorf("Charge %s ref = %q", key, ref)
		}
	}
	if err := p.Refund(t.Context(), "pi_123", "refund:subscribe:sub-1"); err != nil {
		t.Errorf("Refund: %v", err)
	}
	if _, _, err := p.FindCharge(t.Context(), "subscribe:sub-1"); err != nil {
		t.Errorf("FindCharge: %v", err)
	}
}
