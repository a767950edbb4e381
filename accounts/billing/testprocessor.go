package billing

// The built-in test processor and its ledger.

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"time"
)

// Test payment methods of the built-in processor (the usual test names).
const (
	TestCardVisa       = "pm_card_visa"
	TestCardMastercard = "pm_card_mastercard"
	TestCardDeclined   = "pm_card_chargeCustomerFail"
	// TestCardAuthentication is a card whose bank asks for 3-D Secure on
	// every on-session payment (Stripe's name for the same test card): a
	// subscribe waits for the customer (*ActionRequiredError), which a
	// test completes with TestProcessor.Authenticate; any other charge on
	// it is declined.
	TestCardAuthentication = "pm_card_authenticationRequired"
	// TestCardSetupAuthentication is a card whose bank asks for 3-D Secure
	// when it is saved (Stripe's name for the same test card): saving it
	// waits for the customer (*SetupActionRequiredError), which a test
	// completes with TestProcessor.AuthenticateSetup before FinishSetup
	// saves it; charges on it succeed.
	TestCardSetupAuthentication = "pm_card_authenticationRequiredSetupForOffSession"
)

var testCards = map[string]PaymentMethod{
	TestCardVisa:                {ID: TestCardVisa, Brand: "visa", Last4: "4242"},
	TestCardMastercard:          {ID: TestCardMastercard, Brand: "mastercard", Last4: "4444"},
	TestCardDeclined:            {ID: TestCardDeclined, Brand: "visa", Last4: "0341"},
	TestCardAuthentication:      {ID: TestCardAuthentication, Brand: "visa", Last4: "3184"},
	TestCardSetupAuthentication: {ID: TestCardSetupAuthentication, Brand: "visa", Last4: "3155"},
}

// chargeable reports whether the test processor's charges on a method succeed.
func chargeable(method string) bool {
	return method == TestCardVisa || method == TestCardMastercard || method == TestCardSetupAuthentication
}

// TestProcessor is the built-in processor: no money moves. Visa and
// Mastercard test cards are charged successfully; pm_card_chargeCustomerFail
// is saved but every charge on it is declined. It keeps a ledger, answers
// repeated idempotency keys with the first outcome like a real processor,
// and is safe for concurrent use (several Services may share one to act as
// one external processor).
//
// NewTestProcessorOn keeps the ledger in a durable Ledger (a store), in
// transactions of its own (never inside an account transaction), so that it survives a restart or a
// kill -9 like a real processor's records, settlement can ask it what was
// charged, and a test can check money against subscriptions. NewTestProcessor
// keeps it in memory, for unit tests.
type TestProcessor struct {
	durable Ledger // nil: in memory

	mu     sync.Mutex
	byKey  map[string]*TestCharge // in memory: by idempotency key
	ledger []*TestCharge          // in memory: oldest first
	calls  int
	// waiting holds the payments on TestCardAuthentication that wait for
	// the customer, by reference (in memory even with a store: a restart
	// forgets them, and they count as failed).
	waiting map[string]*testWaiting
	// setups holds the card setups on TestCardSetupAuthentication, by id
	// (in memory too: after a restart the card is saved again).
	setups map[string]*testSetup
}

// testSetup is a card setup of the test processor waiting for the customer.
type testSetup struct {
	userID, method string
	authenticated  bool
}

// testWaiting is a payment of the test processor waiting for the customer.
type testWaiting struct {
	charge *TestCharge // recorded in the ledger once authenticated
	state  string      // PaymentWaiting, PaymentSucceeded or PaymentFailed
}

// NewTestProcessor returns an empty test processor whose ledger lives in memory.
func NewTestProcessor() *TestProcessor {
	return &TestProcessor{byKey: make(map[string]*TestCharge)}
}

// NewTestProcessorOn returns a test processor whose ledger lives in l
// (accounts.TestLedger keeps it in an accounts store).
func NewTestProcessorOn(l Ledger) *TestProcessor {
	return &TestProcessor{durable: l}
}

// Name returns "test".
func (p *TestProcessor) Name() string { return "test" }

// SaveMethod accepts the test card names. TestCardSetupAuthentication
// waits for the customer, as a bank asking for 3-D Secure on the setup does.
func (p *TestProcessor) SaveMethod(_ context.Context, userID string, method string) (PaymentMethod, error) {
	pm, ok := testCards[method]
	if !ok {
		return PaymentMethod{}, &MethodError{Message: fmt.Sprintf("unknown payment method %q: the test processor accepts %s, %s (charges succeed), %s (saved, every charge declined), %s (a subscribe waits for 3-D Secure) and %s (saving it waits for 3-D Secure)",
			method, TestCardVisa, TestCardMastercard, TestCardDeclined, TestCardAuthentication, TestCardSetupAuthentication)}
	}
	if method != TestCardSetupAuthentication {
		return pm, nil
	}
	id := "seti_test_" + newRef()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.setups == nil {
		p.setups = make(map[string]*testSetup)
	}
	p.setups[id] = &testSetup{userID: userID, method: method}
	return PaymentMethod{}, &SetupActionRequiredError{SetupIntentID: id, ClientSecret: id + "_secret_test"}
}

// AuthenticateSetup completes a waiting card setup as the customer's 3-D
// Secure would; FinishSetup then saves the card. It fails for an unknown
// setup.
func (p *TestProcessor) AuthenticateSetup(_ context.Context, setupID string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	st, ok := p.setups[setupID]
	if !ok {
		return fmt.Errorf("test processor: no card setup %s waits for authentication", setupID)
	}
	st.authenticated = true
	return nil
}

// FinishSetup saves the card of an authenticated setup of the user.
func (p *TestProcessor) FinishSetup(_ context.Context, userID, setupID string) (PaymentMethod, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	st, ok := p.setups[setupID]
	if !ok || st.userID != userID {
		return PaymentMethod{}, &SetupNotFoundError{SetupID: setupID}
	}
	if !st.authenticated {
		return PaymentMethod{}, &SetupActionRequiredError{SetupIntentID: setupID, ClientSecret: setupID + "_secret_test"}
	}
	return testCards[st.method], nil
}

// Charge succeeds for the Visa, Mastercard and set-up test cards and is
// declined for every other method. A repeated idempotency key gets the first outcome.
func (p *TestProcessor) Charge(ctx context.Context, req ChargeRequest) (string, error) {
	p.mu.Lock()
	p.calls++
	p.mu.Unlock()
	key := req.IdempotencyKey
	if key == "" {
		key = "none:" + newRef()
	}
	sum := sha256.Sum256([]byte(key + "\x00" + req.UserID + "\x00" + req.Amount))
	c := &TestCharge{
		Ref: "ch_test_" + hex.EncodeToString(sum[:12]), UserID: req.UserID, MethodID: req.MethodID,
		Amount: req.Amount, IdempotencyKey: key, Description: req.Description,
		Declined:  !chargeable(req.MethodID),
		CreatedAt: time.Now().UTC().Truncate(time.Microsecond),
	}
	if req.MethodID == TestCardAuthentication && ChargeKind(key) == ChargeSubscribe {
		c.Declined = false
		return p.waitForCustomer(ctx, c)
	}
	got, err := p.record(ctx, c)
	if err != nil {
		return "", fmt.Errorf("test processor: %w", err)
	}
	if got.Declined {
		return "", fmt.Errorf("test processor: %s: %w", got.MethodID, ErrDeclined)
	}
	return got.Ref, nil
}

// waitForCustomer answers a subscribe on TestCardAuthentication: the first
// call makes a waiting payment, a repeat gets the same one (or its charge
// once authenticated).
func (p *TestProcessor) waitForCustomer(ctx context.Context, c *TestCharge) (string, error) {
	if ref, found, err := p.FindCharge(ctx, c.IdempotencyKey); err != nil || found {
		return ref, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.waiting == nil {
		p.waiting = make(map[string]*testWaiting)
	}
	if _, ok := p.waiting[c.Ref]; !ok {
		p.waiting[c.Ref] = &testWaiting{charge: c, state: PaymentWaiting}
	}
	return "", &ActionRequiredError{Ref: c.Ref, ClientSecret: c.Ref + "_secret_test"}
}

// Authenticate completes a waiting payment as the customer's 3-D Secure
// would: the charge is made (recorded in the ledger). It fails for an
// unknown or canceled payment.
func (p *TestProcessor) Authenticate(ctx context.Context, ref string) error {
	p.mu.Lock()
	w, ok := p.waiting[ref]
	if !ok || w.state == PaymentFailed {
		p.mu.Unlock()
		return fmt.Errorf("test processor: no payment %s waits for authentication", ref)
	}
	w.state = PaymentSucceeded
	c := *w.charge
	p.mu.Unlock()
	if _, err := p.record(ctx, &c); err != nil {
		return fmt.Errorf("test processor: %w", err)
	}
	return nil
}

// PaymentStatus reports a waiting payment's state; a charge of the ledger
// has succeeded, anything else is failed.
func (p *TestProcessor) PaymentStatus(ctx context.Context, ref string) (string, error) {
	p.mu.Lock()
	w, ok := p.waiting[ref]
	state := ""
	if ok {
		state = w.state
	}
	p.mu.Unlock()
	if state == PaymentWaiting || state == PaymentFailed {
		return state, nil
	}
	return p.ledgerState(ctx, ref)
}

// CancelPayment cancels a waiting payment unless it was authenticated.
func (p *TestProcessor) CancelPayment(ctx context.Context, ref, _ string) (string, error) {
	p.mu.Lock()
	w, ok := p.waiting[ref]
	if ok && w.state == PaymentWaiting {
		w.state = PaymentFailed
	}
	p.mu.Unlock()
	return p.PaymentStatus(ctx, ref)
}

// ledgerState is PaymentSucceeded for a successful charge of the ledger,
// PaymentFailed otherwise.
func (p *TestProcessor) ledgerState(ctx context.Context, ref string) (string, error) {
	if p.durable == nil {
		p.mu.Lock()
		defer p.mu.Unlock()
		for _, c := range p.ledger {
			if c.Ref == ref && !c.Declined {
				return PaymentSucceeded, nil
			}
		}
		return PaymentFailed, nil
	}
	var c *TestCharge
	err := p.durable.View(ctx, func(tx LedgerTx) error {
		var err error
		c, err = tx.GetTestChargeByRef(ref)
		return err
	})
	if errors.Is(err, ErrLedgerNotFound) || err == nil && c.Declined {
		return PaymentFailed, nil
	}
	if err != nil {
		return "", fmt.Errorf("test processor: %w", err)
	}
	return PaymentSucceeded, nil
}

// record stores c unless its idempotency key is known, and returns what is
// stored under the key.
func (p *TestProcessor) record(ctx context.Context, c *TestCharge) (*TestCharge, error) {
	if p.durable == nil {
		p.mu.Lock()
		defer p.mu.Unlock()
		if old, ok := p.byKey[c.IdempotencyKey]; ok {
			return old, nil
		}
		p.byKey[c.IdempotencyKey] = c
		p.ledger = append(p.ledger, c)
		return c, nil
	}
	var got *TestCharge
	err := p.durable.Update(ctx, func(tx LedgerTx) error {
		old, err := tx.GetTestCharge(c.IdempotencyKey)
		if err == nil {
			got = old
			return nil
		}
		if !errors.Is(err, ErrLedgerNotFound) {
			return err
		}
		got = c
		return tx.CreateTestCharge(c)
	})
	if errors.Is(err, ErrLedgerConflict) {
		// A concurrent call with the same key won: answer with its outcome.
		err = p.durable.View(ctx, func(tx LedgerTx) error {
			got, err = tx.GetTestCharge(c.IdempotencyKey)
			return err
		})
	}
	return got, err
}

// Refund marks a charge of the ledger refunded; refunding it again is a no-op.
func (p *TestProcessor) Refund(ctx context.Context, ref, _ string) error {
	if p.durable == nil {
		p.mu.Lock()
		defer p.mu.Unlock()
		for _, c := range p.ledger {
			if c.Ref == ref && !c.Declined {
				c.Refunded = true
				return nil
			}
		}
		return fmt.Errorf("test processor: no charge %s to refund", ref)
	}
	err := p.durable.Update(ctx, func(tx LedgerTx) error {
		c, err := tx.GetTestChargeByRef(ref)
		if err != nil {
			return err
		}
		if c.Declined {
			return ErrLedgerNotFound
		}
		if c.Refunded {
			return nil
		}
		c.Refunded = true
		return tx.UpdateTestCharge(c)
	})
	if err != nil {
		return fmt.Errorf("test processor: refund %s: %w", ref, err)
	}
	return nil
}

// FindCharge reports the successful charge made under an idempotency key
// (refunded or not).
func (p *TestProcessor) FindCharge(ctx context.Context, idempotencyKey string) (string, bool, error) {
	var c *TestCharge
	if p.durable == nil {
		p.mu.Lock()
		c = p.byKey[idempotencyKey]
		p.mu.Unlock()
	} else {
		err := p.durable.View(ctx, func(tx LedgerTx) error {
			var err error
			c, err = tx.GetTestCharge(idempotencyKey)
			return err
		})
		if err != nil && !errors.Is(err, ErrLedgerNotFound) {
			return "", false, fmt.Errorf("test processor: %w", err)
		}
	}
	if c == nil || c.Declined {
		return "", false, nil
	}
	return c.Ref, true, nil
}

// Ledger returns the successful charges so far, oldest first; refunded ones
// are marked. With a store, an unreadable ledger is empty.
func (p *TestProcessor) Ledger() []TestCharge {
	var all []*TestCharge
	if p.durable == nil {
		p.mu.Lock()
		all = p.ledger
		defer p.mu.Unlock()
	} else {
		_ = p.durable.View(context.Background(), func(tx LedgerTx) error {
			var err error
			all, err = tx.ListTestCharges()
			return err
		})
	}
	var out []TestCharge
	for _, c := range all {
		if !c.Declined {
			out = append(out, *c)
		}
	}
	return out
}

// Calls returns how many times Charge was called, repeats included.
func (p *TestProcessor) Calls() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.calls
}

// TestCharge is one charge attempt in the built-in test processor's ledger,
// keyed by its idempotency key; declined attempts are kept too, so that a
// repeated key is answered with the first outcome even after a restart.
type TestCharge struct {
	Ref            string
	UserID         string
	MethodID       string
	Amount         string
	IdempotencyKey string
	Description    string
	Declined       bool
	Refunded       bool
	CreatedAt      time.Time
}

// Errors of a Ledger's transactions.
var (
	// ErrLedgerNotFound: no charge under that idempotency key or reference.
	ErrLedgerNotFound = errors.New("not found")
	// ErrLedgerConflict: a charge with that idempotency key or reference
	// exists already.
	ErrLedgerConflict = errors.New("conflict")
)

// LedgerTx is the test processor's ledger inside a transaction of the
// durable Ledger. IdempotencyKey and Ref are unique; GetTestCharge finds by
// idempotency key. Its errors match ErrLedgerNotFound and ErrLedgerConflict
// (errors.Is).
type LedgerTx interface {
	CreateTestCharge(c *TestCharge) error
	GetTestCharge(idempotencyKey string) (*TestCharge, error)
	GetTestChargeByRef(ref string) (*TestCharge, error)
	UpdateTestCharge(c *TestCharge) error
	ListTestCharges() ([]*TestCharge, error)
}

// Ledger keeps the test processor's ledger durable and shared between
// nodes, as an outside processor keeps its records: it runs transactions of
// its own, never inside an account transaction. Update may run fn again (a
// serialization retry) and returns an error matching ErrLedgerConflict when
// a unique key was taken concurrently. The accounts package implements it
// over either store (accounts.TestLedger).
type Ledger interface {
	Update(ctx context.Context, fn func(tx LedgerTx) error) error
	View(ctx context.Context, fn func(tx LedgerTx) error) error
}

// newRef returns a random (version 4) UUID.
func newRef() string {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(fmt.Sprintf("crypto/rand: %v", err))
	}
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}
