package accounts

// Billing: the payment-processor interface, the built-in test processor, and
// the billing endpoints (save a card, billing status). Saving a card retries
// the user's past-due charges at once.
//
// Charges and transactions. A processor call is never made inside a store
// transaction (Update may re-run its function, and a charge is an outside
// effect). Every charge carries an idempotency key derived from the logical
// operation, so repeating a call after a crash or a race charges at most
// once; a record of it is committed before the call (a charge intent, or the
// renewal's pending Charge), and its outcome is recorded afterwards in a
// transaction that first re-reads the state it depends on (the keys are
// built in chargekeys.go):
//
//   - subscribe: "subscribe:<subscription id>"; the seats are reserved with
//     a charge intent, then the card charged, then the subscription
//     activated (and the intent marked done) (see subscribe.go); settled by
//     any node when the node died in between (intents.go);
//   - renewal: "renew:<subscription id>:<period start>", after the period was
//     claimed by creating its pending Charge record (see lifecycle.go);
//   - past-due retry: "retry:<subscription id>:<charge id>:<payment method
//     id>": the same card is never charged twice for one outstanding charge;
//     a charge intent is written first, as for a subscribe.

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"go.uber.org/zap"
)

// ErrDeclined is what Processor.Charge returns when the card was declined.
var ErrDeclined = errors.New("card declined")

// ActionRequiredError is what Processor.Charge returns for an on-session
// subscribe charge that waits for the customer to authenticate it (SCA /
// 3-D Secure, Stripe's requires_action): nothing is taken yet, and the page
// finishes the payment with the client secret (Stripe.js
// confirmCardPayment). It is not a decline: errors.Is(err, ErrDeclined) is
// false. Processors return it only for "subscribe:" idempotency keys.
type ActionRequiredError struct {
	Ref          string // the processor's reference of the waiting payment
	ClientSecret string // what the page confirms the payment with
}

func (e *ActionRequiredError) Error() string {
	return "the payment " + e.Ref + " waits for the customer to authenticate it"
}

// SetupActionRequiredError is what Processor.SaveMethod and FinishSetup
// return when the bank wants the card holder to authenticate the card before
// it is set up for later off-session charges (3-D Secure on Stripe's
// SetupIntent, status requires_action): nothing is saved yet. The page
// confirms the setup with the client secret (Stripe.js confirmCardSetup) and
// then finishes it with the setup id (Service.FinishSetupIntent).
type SetupActionRequiredError struct {
	SetupIntentID string // the processor's id of the waiting setup
	ClientSecret  string // what the page confirms the setup with
}

func (e *SetupActionRequiredError) Error() string {
	return "the card setup " + e.SetupIntentID + " waits for the customer to authenticate it"
}

// States of a payment that waited for the customer (Processor.PaymentStatus).
const (
	PaymentSucceeded = "succeeded" // the money is taken (or being taken)
	PaymentWaiting   = "waiting"   // still waits for the customer
	PaymentFailed    = "failed"    // canceled, or the authentication failed: nothing taken
)

// ChargeRequest asks a processor to charge a user's saved payment method.
type ChargeRequest struct {
	UserID   string
	MethodID string // PaymentMethod.ID
	Amount   string // exact decimal USD, at most two decimals
	// IdempotencyKey identifies the logical charge: a processor charges at
	// most once per key and answers repeats with the first outcome.
	IdempotencyKey string
	Description    string
}

// Processor is a payment processor. The built-in TestProcessor is the
// default; a real one (Stripe and the like) implements the same methods.
type Processor interface {
	// Name identifies the processor in GET /api/billing/status.
	Name() string
	// SaveMethod validates and saves a payment method for the user; an
	// unusable method is a 400 *Error that says what to send. A processor
	// may set the method up for off-session charges first: a setup that
	// waits for the card holder is *SetupActionRequiredError, a declined
	// one ErrDeclined (a *DeclineError with the reason); nothing is saved
	// then.
	SaveMethod(ctx context.Context, userID, method string) (PaymentMethod, error)
	// FinishSetup saves the method of a setup that waited for the card
	// holder (a *SetupActionRequiredError's SetupIntentID) once it
	// succeeded. Still waiting is *SetupActionRequiredError again, a failed
	// or canceled setup ErrDeclined, an unknown setup or another user's a
	// 404 *Error.
	FinishSetup(ctx context.Context, userID, setupID string) (PaymentMethod, error)
	// Charge charges the amount and returns the processor's reference.
	// A declined card is ErrDeclined (possibly wrapped).
	Charge(ctx context.Context, req ChargeRequest) (ref string, err error)
	// Refund returns a charge in full, at most once per idempotency key;
	// refunding a refunded charge again is not an error.
	Refund(ctx context.Context, ref, idempotencyKey string) error
	// FindCharge reports whether a charge was made under the idempotency
	// key, and its reference; settlement asks it about charges nothing
	// recorded (intents.go). A declined attempt is not found. An error means
	// the processor could not be asked.
	FindCharge(ctx context.Context, idempotencyKey string) (ref string, found bool, err error)
	// PaymentStatus reports the state of a payment that waited for the
	// customer (an *ActionRequiredError's Ref): PaymentSucceeded,
	// PaymentWaiting or PaymentFailed.
	PaymentStatus(ctx context.Context, ref string) (string, error)
	// CancelPayment cancels a payment that waits for the customer and
	// returns its state afterwards: PaymentFailed once canceled, or
	// PaymentSucceeded when the customer completed it first (then nothing
	// is canceled). Canceling a canceled payment is not an error.
	CancelPayment(ctx context.Context, ref, idempotencyKey string) (string, error)
}

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
// NewTestProcessorOn keeps the ledger in a Store, in transactions of its own
// (never inside an account transaction), so that it survives a restart or a
// kill -9 like a real processor's records, settlement can ask it what was
// charged, and a test can check money against subscriptions. NewTestProcessor
// keeps it in memory, for unit tests.
type TestProcessor struct {
	store Store // nil: in memory

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

// NewTestProcessorOn returns a test processor whose ledger lives in st,
// whose transactions must implement TestLedgerTx (both stores' do).
func NewTestProcessorOn(st Store) *TestProcessor {
	return &TestProcessor{store: st}
}

// Name returns "test".
func (p *TestProcessor) Name() string { return "test" }

// SaveMethod accepts the test card names. TestCardSetupAuthentication
// waits for the customer, as a bank asking for 3-D Secure on the setup does.
func (p *TestProcessor) SaveMethod(_ context.Context, userID string, method string) (PaymentMethod, error) {
	pm, ok := testCards[method]
	if !ok {
		return PaymentMethod{}, Invalid("unknown payment method %q: the test processor accepts %s, %s (charges succeed), %s (saved, every charge declined), %s (a subscribe waits for 3-D Secure) and %s (saving it waits for 3-D Secure)",
			method, TestCardVisa, TestCardMastercard, TestCardDeclined, TestCardAuthentication, TestCardSetupAuthentication)
	}
	if method != TestCardSetupAuthentication {
		return pm, nil
	}
	id := "seti_test_" + newID()
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
		return PaymentMethod{}, NotFound("no card setup %s", setupID)
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
		key = "none:" + newID()
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
	if p.store == nil {
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
	err := p.store.View(ctx, func(tx Tx) error {
		var err error
		c, err = ledgerOf(tx).GetTestChargeByRef(ref)
		return err
	})
	if errors.Is(err, ErrNotFound) || err == nil && c.Declined {
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
	if p.store == nil {
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
	err := p.store.Update(ctx, func(tx Tx) error {
		old, err := ledgerOf(tx).GetTestCharge(c.IdempotencyKey)
		if err == nil {
			got = old
			return nil
		}
		if !errors.Is(err, ErrNotFound) {
			return err
		}
		got = c
		return ledgerOf(tx).CreateTestCharge(c)
	})
	if errors.Is(err, ErrConflict) {
		// A concurrent call with the same key won: answer with its outcome.
		err = p.store.View(ctx, func(tx Tx) error {
			got, err = ledgerOf(tx).GetTestCharge(c.IdempotencyKey)
			return err
		})
	}
	return got, err
}

// Refund marks a charge of the ledger refunded; refunding it again is a no-op.
func (p *TestProcessor) Refund(ctx context.Context, ref, _ string) error {
	if p.store == nil {
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
	err := p.store.Update(ctx, func(tx Tx) error {
		c, err := ledgerOf(tx).GetTestChargeByRef(ref)
		if err != nil {
			return err
		}
		if c.Declined {
			return ErrNotFound
		}
		if c.Refunded {
			return nil
		}
		c.Refunded = true
		return ledgerOf(tx).UpdateTestCharge(c)
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
	if p.store == nil {
		p.mu.Lock()
		c = p.byKey[idempotencyKey]
		p.mu.Unlock()
	} else {
		err := p.store.View(ctx, func(tx Tx) error {
			var err error
			c, err = ledgerOf(tx).GetTestCharge(idempotencyKey)
			return err
		})
		if err != nil && !errors.Is(err, ErrNotFound) {
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
	if p.store == nil {
		p.mu.Lock()
		all = p.ledger
		defer p.mu.Unlock()
	} else {
		_ = p.store.View(context.Background(), func(tx Tx) error {
			var err error
			all, err = ledgerOf(tx).ListTestCharges()
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

// PaymentMethodView is a saved card on the wire.
type PaymentMethodView struct {
	ID    string `json:"id"`
	Brand string `json:"brand"`
	Last4 string `json:"last4"`
}

func paymentMethodView(pm *PaymentMethod) *PaymentMethodView {
	if pm == nil {
		return nil
	}
	return &PaymentMethodView{ID: pm.ID, Brand: pm.Brand, Last4: pm.Last4}
}

// SetupIntentResult answers POST /api/billing/setup-intent.
type SetupIntentResult struct {
	PaymentMethod PaymentMethodView `json:"paymentMethod"`
	// Recovered lists past-due subscriptions the new card paid for (now active).
	Recovered []string `json:"recovered"`
	// PastDue lists subscriptions still past due after the retry.
	PastDue []string `json:"pastDue"`
}

// SetupRequiresAction is the status of a card setup waiting for the card
// holder (the data of its 402).
const SetupRequiresAction = "requires_action"

// SetupActionView is the data of the 402 answering a card save that waits
// for the card holder's 3-D Secure.
type SetupActionView struct {
	Status        string `json:"status"` // SetupRequiresAction
	SetupIntentID string `json:"setupIntentId"`
	ClientSecret  string `json:"clientSecret"`
}

// BillingStatus answers GET /api/billing/status.
type BillingStatus struct {
	HasPaymentMethod bool               `json:"hasPaymentMethod"`
	PaymentMethod    *PaymentMethodView `json:"paymentMethod"`
	Processor        string             `json:"processor"`
	PastDue          []string           `json:"pastDue"`
}

// SetupIntent saves a payment method for the user (replacing any previous
// one) and retries the user's past-due charges with it at once. When the
// bank first wants the card holder to authenticate the card, nothing is
// saved: the answer is a 402 whose data (SetupActionView) the page confirms,
// and FinishSetupIntent saves the card afterwards.
func (s *Service) SetupIntent(ctx context.Context, userID, method string) (*SetupIntentResult, error) {
	if method == "" {
		return nil, Invalid("paymentMethod is required, e.g. {\"paymentMethod\": %q}", TestCardVisa)
	}
	if len(method) > maxLabel {
		return nil, Invalid("paymentMethod is longer than %d characters", maxLabel)
	}
	pm, err := s.processor.SaveMethod(ctx, userID, method)
	if err != nil {
		return nil, setupError(err)
	}
	return s.saveMethod(ctx, userID, pm)
}

// FinishSetupIntent saves the card of a setup that waited for the card
// holder (the setupIntentId of SetupIntent's 402) once the bank accepted
// it, and retries past-due charges as SetupIntent does.
func (s *Service) FinishSetupIntent(ctx context.Context, userID, setupID string) (*SetupIntentResult, error) {
	if len(setupID) > maxLabel {
		return nil, Invalid("setupIntent is longer than %d characters", maxLabel)
	}
	pm, err := s.processor.FinishSetup(ctx, userID, setupID)
	if err != nil {
		return nil, setupError(err)
	}
	return s.saveMethod(ctx, userID, pm)
}

// setupError answers a card setup that did not save the card: 402 in both
// cases, since nothing was saved and the user has something to do.
func setupError(err error) error {
	if a, ok := errors.AsType[*SetupActionRequiredError](err); ok {
		return &Error{
			Status: http.StatusPaymentRequired,
			Message: "Your bank asks you to confirm this card (3-D Secure); it is not saved yet. " +
				"Run Stripe.js confirmCardSetup(data.clientSecret), then call POST /api/billing/setup-intent again with {\"setupIntent\": \"" + a.SetupIntentID + "\"}.",
			Data: &SetupActionView{Status: SetupRequiresAction, SetupIntentID: a.SetupIntentID, ClientSecret: a.ClientSecret},
		}
	}
	if errors.Is(err, ErrDeclined) {
		reason := DeclineReason(err)
		if reason == "" {
			reason = "Your card was declined."
		}
		return PaymentDeclined("The card was not saved. The processor says: %s Use another card.", reason)
	}
	return err
}

// saveMethod makes pm the user's payment method and retries the user's
// past-due charges with it.
func (s *Service) saveMethod(ctx context.Context, userID string, pm PaymentMethod) (*SetupIntentResult, error) {
	if _, err := s.storeMethod(ctx, userID, pm); err != nil {
		return nil, err
	}
	res := &SetupIntentResult{PaymentMethod: *paymentMethodView(&pm), Recovered: []string{}, PastDue: []string{}}
	recovered, stillDue, err := s.retryPastDue(ctx, userID, pm)
	if err != nil {
		// The card is saved; the retry failing is logged, not the request.
		s.logger.Error("retrying past-due charges", zap.String("user_id", userID), zap.Error(err))
	}
	res.Recovered = append(res.Recovered, recovered...)
	res.PastDue = append(res.PastDue, stillDue...)
	return res, nil
}

// storeMethod makes pm the user's payment method and reports whether it
// was not already.
func (s *Service) storeMethod(ctx context.Context, userID string, pm PaymentMethod) (changed bool, err error) {
	err = s.store.Update(ctx, func(tx Tx) error {
		u, err := tx.GetUser(userID)
		if err != nil {
			return err
		}
		changed = u.PaymentMethod == nil || u.PaymentMethod.ID != pm.ID
		saved := pm
		u.PaymentMethod = &saved
		return tx.UpdateUser(u)
	})
	if errors.Is(err, ErrNotFound) {
		return false, NotFound("no user %s", userID)
	}
	if err != nil {
		return false, fmt.Errorf("save payment method: %w", err)
	}
	return changed, nil
}

// BillingStatus reports the user's payment method and past-due subscriptions.
func (s *Service) BillingStatus(ctx context.Context, userID string) (*BillingStatus, error) {
	var (
		u    *User
		subs []*Subscription
	)
	err := s.store.View(ctx, func(tx Tx) error {
		var err error
		if u, err = tx.GetUser(userID); err != nil {
			return err
		}
		subs, err = tx.ListSubscriptionsByUser(userID)
		return err
	})
	if errors.Is(err, ErrNotFound) {
		return nil, NotFound("no user %s", userID)
	}
	if err != nil {
		return nil, fmt.Errorf("billing status: %w", err)
	}
	st := &BillingStatus{
		HasPaymentMethod: u.PaymentMethod != nil,
		PaymentMethod:    paymentMethodView(u.PaymentMethod),
		Processor:        s.processor.Name(),
		PastDue:          []string{},
	}
	for _, sub := range subs {
		if sub.Status == SubPastDue {
			st.PastDue = append(st.PastDue, sub.ID)
		}
	}
	return st, nil
}

// outstandingCharge returns the failed charge a past-due subscription owes:
// the renewal of the period starting at CurrentPeriodEnd, or the charge of
// the current period that the operator marked failed.
func outstandingCharge(charges []*Charge, sub *Subscription) *Charge {
	var out *Charge
	for _, c := range charges {
		if c.Status != ChargeFailed {
			continue
		}
		if !c.PeriodStart.Equal(sub.CurrentPeriodEnd) && !c.PeriodStart.Equal(sub.CurrentPeriodStart) {
			continue
		}
		if out == nil || c.PeriodStart.After(out.PeriodStart) {
			out = c
		}
	}
	return out
}

// Charge statuses.
const (
	ChargePending   = "pending"
	ChargeSucceeded = "succeeded"
	ChargeFailed    = "failed"
	// ChargeVoid is a renewal claim left pending by a node that died, for a
	// period its subscription no longer renews: settlement refunded whatever
	// it charged (its charge intent, kind renewal, says what happened).
	ChargeVoid = "void"
)

// retryPastDue charges each past-due subscription's outstanding charge to
// pm. It returns the subscriptions that are active again and those still
// past due.
func (s *Service) retryPastDue(ctx context.Context, userID string, pm PaymentMethod) (recovered, stillDue []string, err error) {
	type due struct {
		sub    *Subscription
		charge *Charge
	}
	var dues []due
	err = s.store.View(ctx, func(tx Tx) error {
		dues = dues[:0]
		subs, err := tx.ListSubscriptionsByUser(userID)
		if err != nil {
			return err
		}
		for _, sub := range subs {
			if sub.Status != SubPastDue {
				continue
			}
			charges, err := tx.ListCharges(sub.ID)
			if err != nil {
				return err
			}
			dues = append(dues, due{sub: sub, charge: outstandingCharge(charges, sub)})
		}
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	var errs []error
	for _, d := range dues {
		if d.charge == nil {
			s.logger.Warn("past-due subscription has no failed charge to retry", zap.String("subscription_id", d.sub.ID))
			stillDue = append(stillDue, d.sub.ID)
			continue
		}
		ok, err := s.retryCharge(ctx, d.sub, d.charge, pm)
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("subscription %s: %w", d.sub.ID, err))
			stillDue = append(stillDue, d.sub.ID)
		case ok:
			recovered = append(recovered, d.sub.ID)
		default:
			stillDue = append(stillDue, d.sub.ID)
		}
	}
	return recovered, stillDue, errors.Join(errs...)
}

// retryCharge charges one outstanding charge and, on success, makes the
// subscription active again (advancing the period when the charge paid for
// the next one). It reports whether the subscription recovered. Like a
// subscribe, it writes a charge intent first (intents.go).
func (s *Service) retryCharge(ctx context.Context, sub *Subscription, c *Charge, pm PaymentMethod) (bool, error) {
	idem := chargeKeyRetry(sub.ID, c.ID, pm.ID)
	in := &ChargeIntent{UserID: sub.UserID, SubscriptionID: sub.ID, ChargeID: c.ID, Kind: IntentRetry, Amount: c.Amount, IdempotencyKey: idem}
	if err := s.writeIntent(ctx, in); errors.Is(err, ErrConflict) {
		// This card was tried for this charge before: the processor would
		// answer with that outcome again.
		s.logger.Info("past-due retry skipped: this card was already tried for this charge", zap.String("subscription_id", sub.ID))
		return false, nil
	} else if err != nil {
		return false, fmt.Errorf("writing the charge intent: %w", err)
	}
	ref, err := s.processor.Charge(ctx, ChargeRequest{
		UserID: sub.UserID, MethodID: pm.ID, Amount: c.Amount, IdempotencyKey: idem,
		Description: fmt.Sprintf("Timeblock subscription %s, past-due period from %s", sub.ID, c.PeriodStart.Format(time.DateOnly)),
	})
	if errors.Is(err, ErrDeclined) {
		s.finishIntent(ctx, in.ID, IntentVoid, "")
		s.logger.Info("past-due retry declined", zap.String("subscription_id", sub.ID))
		return false, nil
	}
	if err != nil {
		// The intent stays pending: settlement refunds a charge made anyway.
		return false, fmt.Errorf("charging: %w", err)
	}
	var stale bool
	err = s.store.Update(ctx, func(tx Tx) error {
		stale = false
		cur, err := tx.GetSubscription(sub.ID)
		if err != nil {
			return err
		}
		charges, err := tx.ListCharges(sub.ID)
		if err != nil {
			return err
		}
		var ch *Charge
		for _, x := range charges {
			if x.ID == c.ID {
				ch = x
			}
		}
		if ch == nil || cur.Status != SubPastDue || ch.Status != ChargeFailed {
			stale = true
			return nil
		}
		if err := markIntentDoneTx(tx, in.ID, ref, s.clock()); err != nil {
			return err
		}
		ch.Status = ChargeSucceeded
		ch.ProcessorRef = ref
		if err := tx.UpdateCharge(ch); err != nil {
			return err
		}
		if ch.PeriodStart.Equal(cur.CurrentPeriodEnd) {
			cur.CurrentPeriodStart = cur.CurrentPeriodEnd
			cur.CurrentPeriodEnd = nextPeriodEnd(cur.CurrentPeriodEnd, cur.BillingCycle)
		}
		cur.Status = SubActive
		cur.PastDueSince = time.Time{}
		cur.UpdatedAt = s.clock()
		return tx.UpdateSubscription(cur)
	})
	if err != nil {
		s.refundIntent(ctx, in.ID, idem, ref, "recording the past-due retry failed")
		return false, fmt.Errorf("recording retry: %w", err)
	}
	if stale {
		// Someone else settled or canceled it meanwhile: this charge is extra.
		s.refundIntent(ctx, in.ID, idem, ref, "the subscription was settled or canceled meanwhile")
		return false, nil
	}
	s.logger.Info("past-due subscription recovered", zap.String("subscription_id", sub.ID), zap.String("charge_ref", ref))
	s.publishKeyChange(ctx, sub.UserID)
	return true, nil
}

// nextPeriodEnd advances a period end by one calendar month or year.
func nextPeriodEnd(t time.Time, cycle string) time.Time {
	if cycle == CycleYear {
		return t.AddDate(1, 0, 0)
	}
	return t.AddDate(0, 1, 0)
}
