package billing

// The built-in test processor and its ledger.

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
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
	// subscribe waits for the customer (*ActionRequiredError), which the
	// buyer's page (its test bank, accounts/testbank.go) or a test
	// completes with TestProcessor.Authenticate or fails with Fail; any
	// other charge on it is declined.
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
//
// It keeps Stripe's idempotency rules, so that the suite catches what Stripe
// would: a repeat of a key with another card, amount or customer is refused
// (*IdempotencyError) and charges nothing, and a key is remembered for
// KeyLifetime only (SetKeyLifetime): a repeat after that is a new charge.
// FindCharge finds a key's charges however old, as Stripe's search by
// metadata does. The ledger keeps such a later charge under the key with a
// "#n" suffix (the n-th request under the key; ledgerKey).
type TestProcessor struct {
	durable Ledger // nil: in memory
	// now is the processor's clock (SetClock); keyLifetime how long a key
	// is remembered (SetKeyLifetime). Set before first use.
	now         func() time.Time
	keyLifetime time.Duration

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
	return &TestProcessor{byKey: make(map[string]*TestCharge), now: time.Now, keyLifetime: KeyLifetime}
}

// NewTestProcessorOn returns a test processor whose ledger lives in l
// (accounts.TestLedger keeps it in an accounts store).
func NewTestProcessorOn(l Ledger) *TestProcessor {
	return &TestProcessor{durable: l, now: time.Now, keyLifetime: KeyLifetime}
}

// SetClock gives the processor a clock (a test's, which it moves past the
// key lifetime). Call it before the processor is used.
func (p *TestProcessor) SetClock(now func() time.Time) { p.now = now }

// SetKeyLifetime sets how long an idempotency key is remembered (default
// KeyLifetime, as Stripe). Call it before the processor is used.
func (p *TestProcessor) SetKeyLifetime(d time.Duration) { p.keyLifetime = d }

// clock returns the processor's time, as the stores keep it.
func (p *TestProcessor) clock() time.Time { return p.now().UTC().Truncate(time.Microsecond) }

// ledgerKey is the ledger's key of the n-th request (from 1) under an
// idempotency key: the key itself, then key#2, key#3... for requests made
// after the key was forgotten.
func ledgerKey(key string, n int) string {
	if n == 1 {
		return key
	}
	return key + "#" + strconv.Itoa(n)
}

// MetadataKey returns the idempotency key a ledger key was made under (the
// key without its "#n" suffix): what a charge's metadata would carry.
func MetadataKey(ledgerKey string) string {
	if i := strings.LastIndexByte(ledgerKey, '#'); i >= 0 {
		if _, err := strconv.Atoi(ledgerKey[i+1:]); err == nil {
			return ledgerKey[:i]
		}
	}
	return ledgerKey
}

// expired reports whether the processor no longer remembers the key of c.
func (p *TestProcessor) expired(c *TestCharge) bool {
	return p.keyLifetime > 0 && !p.clock().Before(c.CreatedAt.Add(p.keyLifetime))
}

// sameRequest reports whether a repeat carries the first request's
// parameters (what Stripe compares, for the fields a charge has).
func sameRequest(first, again *TestCharge) bool {
	return first.UserID == again.UserID && first.MethodID == again.MethodID && first.Amount == again.Amount
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
	c := &TestCharge{
		UserID: req.UserID, MethodID: req.MethodID,
		Amount: req.Amount, IdempotencyKey: key, Description: req.Description,
		Declined:  !chargeable(req.MethodID),
		CreatedAt: p.clock(),
	}
	c.Ref = testRef(c)
	if req.MethodID == TestCardAuthentication && ChargeKind(key) == ChargeSubscribe {
		c.Declined = false
		return p.waitForCustomer(ctx, c)
	}
	got, err := p.record(ctx, c)
	if err != nil {
		return "", fmt.Errorf("test processor: %w", err)
	}
	if got != c && !sameRequest(got, c) {
		return "", &IdempotencyError{Key: key, Detail: fmt.Sprintf("test processor: first used for %s on %s, now %s on %s",
			got.Amount, got.MethodID, c.Amount, c.MethodID)}
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

// Fail fails a waiting payment as a customer failing 3-D Secure would:
// nothing is taken, and it can no longer be authenticated. Failing a failed
// payment again is not an error; it fails for an unknown payment or one
// already authenticated.
func (p *TestProcessor) Fail(_ context.Context, ref string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	w, ok := p.waiting[ref]
	if !ok || w.state == PaymentSucceeded {
		return fmt.Errorf("test processor: no payment %s waits for authentication", ref)
	}
	w.state = PaymentFailed
	return nil
}

// PaymentUser returns the user whose payment ref waits (or waited) for the
// customer; false for a reference the processor does not keep waiting.
func (p *TestProcessor) PaymentUser(ref string) (string, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	w, ok := p.waiting[ref]
	if !ok {
		return "", false
	}
	return w.charge.UserID, true
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

// testRef is a charge's reference: derived from its ledger key, so that a
// repeat computes the same one.
func testRef(c *TestCharge) string {
	sum := sha256.Sum256([]byte(c.IdempotencyKey + "\x00" + c.UserID + "\x00" + c.Amount))
	return "ch_test_" + hex.EncodeToString(sum[:12])
}

// record stores c unless a request under its idempotency key is still
// remembered, and returns what is stored for the key: c, or the remembered
// request. A key forgotten (older than the key lifetime) is a new request,
// stored under the next ledger key.
func (p *TestProcessor) record(ctx context.Context, c *TestCharge) (*TestCharge, error) {
	key := c.IdempotencyKey
	// place stores c as the n-th request under its key.
	place := func(n int) {
		c.IdempotencyKey = ledgerKey(key, n)
		c.Ref = testRef(c)
	}
	if p.durable == nil {
		p.mu.Lock()
		defer p.mu.Unlock()
		for n := 1; ; n++ {
			old, ok := p.byKey[ledgerKey(key, n)]
			if !ok {
				place(n)
				p.byKey[c.IdempotencyKey] = c
				p.ledger = append(p.ledger, c)
				return c, nil
			}
			if !p.expired(old) {
				return old, nil
			}
		}
	}
	var got *TestCharge
	for attempt := 1; ; attempt++ {
		err := p.durable.Update(ctx, func(tx LedgerTx) error {
			for n := 1; ; n++ {
				old, err := tx.GetTestCharge(ledgerKey(key, n))
				if errors.Is(err, ErrLedgerNotFound) {
					place(n)
					got = c
					return tx.CreateTestCharge(c)
				}
				if err != nil {
					return err
				}
				if !p.expired(old) {
					got = old
					return nil
				}
			}
		})
		// A concurrent call with the same key won: the next look answers
		// with its outcome.
		if !errors.Is(err, ErrLedgerConflict) || attempt == 3 {
			return got, err
		}
	}
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

// RefundAmount refunds part of a charge of the ledger under Stripe's rules
// (Processor.RefundAmount).
func (p *TestProcessor) RefundAmount(ctx context.Context, ref, amount, key string) (string, error) {
	if key == "" {
		return "", fmt.Errorf("test processor: a refund of %s needs an idempotency key", ref)
	}
	if p.durable == nil {
		p.mu.Lock()
		defer p.mu.Unlock()
		for _, c := range p.ledger {
			if c.Ref == ref && !c.Declined {
				_, total, err := c.refundPart(amount, key)
				return total, err
			}
		}
		return "", fmt.Errorf("test processor: no charge %s to refund", ref)
	}
	var total string
	err := p.durable.Update(ctx, func(tx LedgerTx) error {
		c, err := tx.GetTestChargeByRef(ref)
		if err != nil {
			return err
		}
		if c.Declined {
			return ErrLedgerNotFound
		}
		changed, t, err := c.refundPart(amount, key)
		if err != nil || !changed {
			total = t
			return err
		}
		total = t
		return tx.UpdateTestCharge(c)
	})
	if err != nil {
		var ie *IdempotencyError
		if errors.As(err, &ie) || errors.Is(err, ErrRefundTooLarge) {
			return "", err
		}
		return "", fmt.Errorf("test processor: refund %s: %w", ref, err)
	}
	return total, nil
}

// FindCharge reports a successful charge made under an idempotency key
// (refunded or not), however long ago: the first, when the key was charged
// again after it was forgotten.
func (p *TestProcessor) FindCharge(ctx context.Context, idempotencyKey string) (string, bool, error) {
	if p.durable == nil {
		p.mu.Lock()
		defer p.mu.Unlock()
		for n := 1; ; n++ {
			c, ok := p.byKey[ledgerKey(idempotencyKey, n)]
			if !ok {
				return "", false, nil
			}
			if !c.Declined {
				return c.Ref, true, nil
			}
		}
	}
	var ref string
	err := p.durable.View(ctx, func(tx LedgerTx) error {
		ref = ""
		for n := 1; ; n++ {
			c, err := tx.GetTestCharge(ledgerKey(idempotencyKey, n))
			if errors.Is(err, ErrLedgerNotFound) {
				return nil
			}
			if err != nil {
				return err
			}
			if !c.Declined {
				ref = c.Ref
				return nil
			}
		}
	})
	if err != nil {
		return "", false, fmt.Errorf("test processor: %w", err)
	}
	return ref, ref != "", nil
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
	Refunded       bool // refunded in full (Refund, or partial refunds that reached Amount)
	// Refunds are the partial refunds (RefundAmount) by idempotency key:
	// the amount each returned.
	Refunds   map[string]string
	CreatedAt time.Time
}

// RefundedAmount is what is refunded of c in all, as a decimal amount.
func (c *TestCharge) RefundedAmount() string {
	n, err := c.refundedCents()
	if err != nil {
		return "?"
	}
	return formatCents(n)
}

// refundedCents is what is refunded of c in all, in cents.
func (c *TestCharge) refundedCents() (int64, error) {
	amount, err := cents(c.Amount)
	if err != nil || c.Refunded {
		return amount, err
	}
	var sum int64
	for _, r := range c.Refunds {
		n, err := cents(r)
		if err != nil {
			return 0, err
		}
		sum += n
	}
	return sum, nil
}

// refundPart refunds amount of c under key (Stripe's rules: a repeat
// answers again, another amount under the key is *IdempotencyError, more
// than remains is ErrRefundTooLarge) and reports whether c changed and the
// total refunded afterwards.
func (c *TestCharge) refundPart(amount, key string) (changed bool, refunded string, err error) {
	want, err := cents(amount)
	if err != nil || want <= 0 {
		return false, "", fmt.Errorf("test processor: refund amount %q is not a positive amount with at most two decimals", amount)
	}
	total, err := c.refundedCents()
	if err != nil {
		return false, "", fmt.Errorf("test processor: charge %s: %w", c.Ref, err)
	}
	if prev, ok := c.Refunds[key]; ok {
		if n, _ := cents(prev); n != want {
			return false, "", &IdempotencyError{Key: key, Detail: "refunded " + prev + " under it, not " + amount}
		}
		return false, formatCents(total), nil
	}
	full, _ := cents(c.Amount)
	if total+want > full {
		return false, "", fmt.Errorf("test processor: refunding %s of %s (%s refunded): %w", amount, c.Ref, formatCents(total), ErrRefundTooLarge)
	}
	if c.Refunds == nil {
		c.Refunds = map[string]string{}
	}
	c.Refunds[key] = formatCents(want)
	total += want
	c.Refunded = total == full
	return true, formatCents(total), nil
}

// cents parses an exact decimal amount of dollars with at most two
// decimals ("40", "12.5", "12.50") to cents.
func cents(amount string) (int64, error) {
	whole, frac, hasPoint := strings.Cut(amount, ".")
	if whole == "" || len(frac) > 2 || (hasPoint && frac == "") {
		return 0, fmt.Errorf("%q is not an amount with at most two decimals", amount)
	}
	frac += "00"[len(frac):]
	n, err := strconv.ParseInt(whole+frac, 10, 64)
	if err != nil || n < 0 || strings.ContainsAny(whole+frac, "+-") {
		return 0, fmt.Errorf("%q is not an amount with at most two decimals", amount)
	}
	return n, nil
}

// formatCents renders cents as a canonical decimal amount: 1250 → "12.5".
func formatCents(n int64) string {
	s := fmt.Sprintf("%d.%02d", n/100, n%100)
	s = strings.TrimRight(s, "0")
	return strings.TrimSuffix(s, ".")
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
