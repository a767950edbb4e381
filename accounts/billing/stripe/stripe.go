// Package stripe is the Stripe payment processor (billing.Processor) on
// the official stripe-go client: a Stripe Customer per user, created once and
// remembered in the store; saved cards attached to it and made its default;
// every charge a PaymentIntent confirmed at once with the caller's
// idempotency key; refunds with idempotency keys too. It imports no Caddy
// package.
//
// Outcomes of a charge:
//
//   - succeeded (or processing, which Stripe settles later and reports by
//     webhook): the PaymentIntent id is the charge's reference;
//   - declined: *billing.DeclineError (errors.Is ErrDeclined) with Stripe's
//     own message for the card holder ("Your card has insufficient funds.");
//   - the bank asks the customer to authenticate (SCA / 3-D Secure): a
//     subscribe's PaymentIntent is left in requires_action and answered
//     *billing.ActionRequiredError with its client secret, which the page
//     confirms with Stripe.js (the subscription is incomplete meanwhile,
//     accounts/incomplete.go; PaymentStatus and CancelPayment end it); off
//     session (renewals and past-due retries, which the card's off-session
//     SetupIntent lets the bank exempt) Stripe answers
//     authentication_required, a decline that says so, and the subscription
//     goes past_due until the user saves a card again (Stripe.js runs the
//     authentication when the card is set up). Other than a subscribe's, a
//     PaymentIntent left in requires_action anyway is canceled, so no
//     payment can complete later without Timeblock knowing;
//   - anything else (Stripe unreachable, a bad key): a plain error, which the
//     caller answers 502 and settles later through FindCharge.
package stripe

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	stripeapi "github.com/stripe/stripe-go/v85"

	"github.com/timeblock/timeblock/accounts"
	"github.com/timeblock/timeblock/accounts/billing"
)

// Name is the processor's name in GET /api/billing/status and in the store's
// customer records.
const Name = "stripe"

// Metadata keys set on every PaymentIntent and Customer Timeblock creates.
const (
	MetaIdempotencyKey = "timeblock_idempotency_key"
	MetaUserID         = "timeblock_user_id"
)

// Config configures the processor.
type Config struct {
	// SecretKey is the account's secret (sk_test_/sk_live_) or restricted
	// (rk_test_/rk_live_) key.
	SecretKey string
	// APIBase replaces https://api.stripe.com (stripe-mock, a test server).
	APIBase string
	// Store remembers each user's Customer id.
	Store accounts.Store
	// WebhookSecret is the signing secret (whsec_...) of the webhook
	// endpoint; WebhookEvent needs it.
	WebhookSecret string
	// StatementDescriptorSuffix is appended to the account's statement
	// descriptor on card statements (optional, at most 22 characters).
	StatementDescriptorSuffix string
	// HTTPClient defaults to one with a 60 s timeout.
	HTTPClient *http.Client
	// MaxNetworkRetries is how often stripe-go retries a request that failed
	// on the network or with a 409/5xx, with the same idempotency key
	// (default 2; negative: none).
	MaxNetworkRetries int
}

// Processor is the Stripe processor. It is safe for concurrent use.
type Processor struct {
	client        *stripeapi.Client
	store         accounts.Store
	descriptor    string
	webhookSecret string
}

// New checks cfg and returns the processor.
func New(cfg Config) (*Processor, error) {
	if err := ValidateSecretKey(cfg.SecretKey); err != nil {
		return nil, err
	}
	if cfg.WebhookSecret != "" {
		if err := ValidateWebhookSecret(cfg.WebhookSecret); err != nil {
			return nil, err
		}
	}
	if cfg.Store == nil {
		return nil, errors.New("stripe: a store is required to remember customers")
	}
	if len(cfg.StatementDescriptorSuffix) > 22 {
		return nil, fmt.Errorf("stripe: statement descriptor suffix %q is longer than 22 characters", cfg.StatementDescriptorSuffix)
	}
	httpClient := cfg.HTTPClient
	if httpClient == nil {
		httpClient = &http.Client{Timeout: 60 * time.Second}
	}
	retries := int64(2)
	if cfg.MaxNetworkRetries != 0 {
		retries = int64(max(cfg.MaxNetworkRetries, 0))
	}
	bc := &stripeapi.BackendConfig{
		HTTPClient:        httpClient,
		MaxNetworkRetries: stripeapi.Int64(retries),
		LeveledLogger:     &stripeapi.LeveledLogger{Level: stripeapi.LevelNull},
	}
	if cfg.APIBase != "" {
		bc.URL = stripeapi.String(strings.TrimRight(cfg.APIBase, "/"))
	}
	return &Processor{
		client:        stripeapi.NewClient(cfg.SecretKey, stripeapi.WithBackends(stripeapi.NewBackendsWithConfig(bc))),
		store:         cfg.Store,
		descriptor:    cfg.StatementDescriptorSuffix,
		webhookSecret: cfg.WebhookSecret,
	}, nil
}

// ValidateSecretKey checks the form of a Stripe API key: sk_test_, sk_live_,
// rk_test_ or rk_live_ followed by the key's characters. It never echoes the
// key.
func ValidateSecretKey(key string) error {
	if key == "" {
		return errors.New("stripe: secret_key is missing: set it to the account's secret key (sk_live_... or sk_test_...) or a restricted key (rk_...)")
	}
	for _, prefix := range []string{"sk_test_", "sk_live_", "rk_test_", "rk_live_"} {
		if rest, ok := strings.CutPrefix(key, prefix); ok {
			if len(rest) < 8 || !alnum(rest) {
				return fmt.Errorf("stripe: secret_key %s... is malformed: after %s it must have at least 8 letters and digits", prefix, prefix)
			}
			return nil
		}
	}
	if strings.HasPrefix(key, "pk_") {
		return errors.New("stripe: secret_key is a publishable key (pk_...): use the secret key (sk_...) from the dashboard's API keys page")
	}
	if strings.HasPrefix(key, "whsec_") {
		return errors.New("stripe: secret_key is a webhook signing secret (whsec_...): that one goes in webhook_secret; secret_key takes sk_... or rk_...")
	}
	return errors.New("stripe: secret_key is malformed: a Stripe secret key starts with sk_live_, sk_test_, rk_live_ or rk_test_")
}

// ValidateWebhookSecret checks the form of a webhook signing secret (whsec_...).
func ValidateWebhookSecret(secret string) error {
	if secret == "" {
		return errors.New("stripe: webhook_secret is missing: set it to the endpoint's signing secret (whsec_...) from the dashboard's webhook page")
	}
	rest, ok := strings.CutPrefix(secret, "whsec_")
	if !ok {
		return errors.New("stripe: webhook_secret is malformed: a webhook signing secret starts with whsec_")
	}
	if len(rest) < 8 || !alnum(rest) {
		return errors.New("stripe: webhook_secret whsec_... is malformed: after whsec_ it must have at least 8 letters and digits")
	}
	return nil
}

func alnum(s string) bool {
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

// Name returns "stripe".
func (p *Processor) Name() string { return Name }

// customer returns the user's Customer id, creating the Customer the first
// time. Creation carries an idempotency key derived from the user, so two
// requests racing within Stripe's 24 hours get one Customer; the store
// keeps the first one recorded.
func (p *Processor) customer(ctx context.Context, userID string) (string, error) {
	var id, email string
	err := p.store.View(ctx, func(tx accounts.Tx) error {
		var err error
		id, err = tx.GetProcessorCustomer(Name, userID)
		if !errors.Is(err, accounts.ErrNotFound) {
			return err
		}
		u, err := tx.GetUser(userID)
		if err != nil {
			return err
		}
		email = u.Email
		return nil
	})
	if errors.Is(err, accounts.ErrNotFound) {
		return "", accounts.NotFound("no user %s", userID)
	}
	if err != nil {
		return "", fmt.Errorf("stripe: reading the customer of %s: %w", userID, err)
	}
	if id != "" {
		return id, nil
	}
	params := &stripeapi.CustomerCreateParams{
		Email:    stripeapi.String(email),
		Metadata: map[string]string{MetaUserID: userID},
	}
	params.SetIdempotencyKey("timeblock-customer:" + userID)
	c, err := p.client.V1Customers.Create(ctx, params)
	if err != nil {
		return "", fmt.Errorf("stripe: creating the customer of %s: %w", userID, err)
	}
	err = p.store.Update(ctx, func(tx accounts.Tx) error {
		existing, err := tx.GetProcessorCustomer(Name, userID)
		if err == nil {
			id = existing
			return nil
		}
		if !errors.Is(err, accounts.ErrNotFound) {
			return err
		}
		id = c.ID
		return tx.CreateProcessorCustomer(Name, userID, c.ID)
	})
	if err != nil {
		return "", fmt.Errorf("stripe: recording the customer of %s: %w", userID, err)
	}
	return id, nil
}

// offSession reports whether a charge is made without the user able to
// authenticate it: renewals ("renew:..." idempotency keys, lifecycle.go),
// past-due retries ("retry:...", made while a card is saved, with no page to
// run 3-D Secure on) and pledges charged when their pool goes live
// ("pledge:...", accounts/funding.go). Off session the bank may exempt the charge under the
// card's off-session SetupIntent (SaveMethod).
func offSession(req billing.ChargeRequest) bool {
	kind := billing.ChargeKind(req.IdempotencyKey)
	return kind == billing.ChargeRenewal || kind == billing.ChargeRetry || kind == billing.ChargePledge
}

// waitsForCustomer reports whether a charge may wait for the customer's
// authentication: a subscribe's ("subscribe:..." idempotency keys).
func waitsForCustomer(req billing.ChargeRequest) bool {
	return billing.ChargeKind(req.IdempotencyKey) == billing.ChargeSubscribe
}

// Charge confirms a PaymentIntent for the amount on the saved method.
func (p *Processor) Charge(ctx context.Context, req billing.ChargeRequest) (string, error) {
	cents, err := Cents(req.Amount)
	if err != nil {
		return "", fmt.Errorf("stripe: %w", err)
	}
	if req.IdempotencyKey == "" {
		return "", errors.New("stripe: a charge needs an idempotency key")
	}
	cust, err := p.customer(ctx, req.UserID)
	if err != nil {
		return "", err
	}
	params := &stripeapi.PaymentIntentCreateParams{
		Amount:        stripeapi.Int64(cents),
		Currency:      stripeapi.String(string(stripeapi.CurrencyUSD)),
		Customer:      stripeapi.String(cust),
		PaymentMethod: stripeapi.String(req.MethodID),
		Confirm:       stripeapi.Bool(true),
		Description:   stripeapi.String(req.Description),
		Metadata:      map[string]string{MetaIdempotencyKey: req.IdempotencyKey, MetaUserID: req.UserID},
		AutomaticPaymentMethods: &stripeapi.PaymentIntentCreateAutomaticPaymentMethodsParams{
			Enabled:        stripeapi.Bool(true),
			AllowRedirects: stripeapi.String("never"),
		},
	}
	switch {
	case offSession(req):
		params.OffSession = stripeapi.Bool(true)
	case !waitsForCustomer(req):
		params.ErrorOnRequiresAction = stripeapi.Bool(true)
	}
	if p.descriptor != "" {
		params.StatementDescriptorSuffix = stripeapi.String(p.descriptor)
	}
	params.SetIdempotencyKey(req.IdempotencyKey)
	pi, err := p.client.V1PaymentIntents.Create(ctx, params)
	if err != nil {
		return "", chargeError(req.IdempotencyKey, err)
	}
	switch pi.Status {
	case stripeapi.PaymentIntentStatusSucceeded, stripeapi.PaymentIntentStatusProcessing:
		return pi.ID, nil
	case stripeapi.PaymentIntentStatusRequiresAction:
		if waitsForCustomer(req) && pi.ClientSecret != "" {
			return "", &billing.ActionRequiredError{Ref: pi.ID, ClientSecret: pi.ClientSecret}
		}
		p.cancel(ctx, pi.ID, req.IdempotencyKey)
		return "", &billing.DeclineError{Reason: msgAuthentication, Code: string(stripeapi.ErrorCodeAuthenticationRequired)}
	case stripeapi.PaymentIntentStatusRequiresPaymentMethod:
		reason := "Your card was declined."
		if pi.LastPaymentError != nil && pi.LastPaymentError.Msg != "" {
			reason = pi.LastPaymentError.Msg
		}
		return "", &billing.DeclineError{Reason: reason, Code: "requires_payment_method"}
	}
	return "", fmt.Errorf("stripe: PaymentIntent %s is %s after confirmation", pi.ID, pi.Status)
}

// msgAuthentication is the decline reason when the bank wants the card
// holder to authenticate a payment Timeblock makes from the server.
const msgAuthentication = "Your bank asks you to confirm this payment (3-D Secure), which cannot be done for a payment made from the server. Save the card again on the billing page (your bank may ask you to confirm it there) or use another card."

// chargeError maps a failed PaymentIntent creation: card errors are
// declines with Stripe's message for the card holder, and a key reused
// with other parameters is a *billing.IdempotencyError.
func chargeError(key string, err error) error {
	var se *stripeapi.Error
	if errors.As(err, &se) && se.Type == stripeapi.ErrorTypeIdempotency {
		return &billing.IdempotencyError{Key: key, Detail: se.Msg}
	}
	if errors.As(err, &se) && se.Type == stripeapi.ErrorTypeCard {
		reason := se.Msg
		if se.Code == stripeapi.ErrorCodeAuthenticationRequired {
			reason = msgAuthentication
		}
		return cardDecline(se, reason)
	}
	return fmt.Errorf("stripe: creating the PaymentIntent: %w", err)
}

// cardDecline is the decline of a card error, with reason (Stripe's words
// for the card holder, or a generic one) and Stripe's codes.
func cardDecline(se *stripeapi.Error, reason string) *billing.DeclineError {
	if reason == "" {
		reason = "Your card was declined."
	}
	code := string(se.Code)
	if se.DeclineCode != "" {
		code += "/" + string(se.DeclineCode)
	}
	return &billing.DeclineError{Reason: reason, Code: code}
}

// cancel cancels a PaymentIntent that waits for the customer; a failure is
// left to the webhook (payment_intent.succeeded of an unknown charge is
// refunded) and to FindCharge.
func (p *Processor) cancel(ctx context.Context, id, idem string) {
	params := &stripeapi.PaymentIntentCancelParams{}
	params.SetIdempotencyKey(billing.CancelKey(idem))
	_, _ = p.client.V1PaymentIntents.Cancel(context.WithoutCancel(ctx), id, params)
}

// paymentState maps a PaymentIntent's status to a waiting payment's state.
func paymentState(st stripeapi.PaymentIntentStatus) string {
	switch st {
	case stripeapi.PaymentIntentStatusSucceeded, stripeapi.PaymentIntentStatusProcessing, stripeapi.PaymentIntentStatusRequiresCapture:
		return billing.PaymentSucceeded
	case stripeapi.PaymentIntentStatusRequiresAction, stripeapi.PaymentIntentStatusRequiresConfirmation:
		return billing.PaymentWaiting
	}
	// requires_payment_method (the authentication failed) or canceled.
	return billing.PaymentFailed
}

// PaymentStatus reads a PaymentIntent that waited for the customer.
func (p *Processor) PaymentStatus(ctx context.Context, ref string) (string, error) {
	pi, err := p.client.V1PaymentIntents.Retrieve(ctx, ref, nil)
	if missing(err) {
		return billing.PaymentFailed, nil
	}
	if err != nil {
		return "", fmt.Errorf("stripe: reading PaymentIntent %s: %w", ref, err)
	}
	return paymentState(pi.Status), nil
}

// CancelPayment cancels a PaymentIntent that waits for the customer; one
// that succeeded meanwhile is left alone and reported succeeded.
func (p *Processor) CancelPayment(ctx context.Context, ref, idempotencyKey string) (string, error) {
	st, err := p.PaymentStatus(ctx, ref)
	if err != nil || st == billing.PaymentSucceeded {
		return st, err
	}
	// Waiting, or failed: requires_payment_method can still be confirmed
	// with another card, so it is canceled for good too.
	params := &stripeapi.PaymentIntentCancelParams{}
	if idempotencyKey != "" {
		params.SetIdempotencyKey(idempotencyKey)
	}
	pi, err := p.client.V1PaymentIntents.Cancel(ctx, ref, params)
	if err != nil {
		// Canceled already, or the customer completed it in between: read
		// it again.
		return p.PaymentStatus(ctx, ref)
	}
	return paymentState(pi.Status), nil
}

// Refund refunds a PaymentIntent (pi_...) or a Charge (ch_...) in full. A
// charge refunded before is not an error.
func (p *Processor) Refund(ctx context.Context, ref, idempotencyKey string) error {
	params := &stripeapi.RefundCreateParams{}
	if strings.HasPrefix(ref, "ch_") {
		params.Charge = stripeapi.String(ref)
	} else {
		params.PaymentIntent = stripeapi.String(ref)
	}
	if idempotencyKey != "" {
		params.SetIdempotencyKey(idempotencyKey)
	}
	_, err := p.client.V1Refunds.Create(ctx, params)
	var se *stripeapi.Error
	if errors.As(err, &se) && se.Code == stripeapi.ErrorCodeChargeAlreadyRefunded {
		return nil
	}
	if err != nil {
		return fmt.Errorf("stripe: refunding %s: %w", ref, err)
	}
	return nil
}

// RefundAmount refunds part of a PaymentIntent (pi_...) or a Charge
// (ch_...) and answers the charge's refunded total, read from the refund's
// charge (expanded). Stripe's "amount exceeds the charge" refusals are
// billing.ErrRefundTooLarge; a key re-used with another amount is a
// *billing.IdempotencyError.
func (p *Processor) RefundAmount(ctx context.Context, ref, amount, idempotencyKey string) (string, error) {
	cents, err := Cents(amount)
	if err != nil || cents <= 0 {
		return "", fmt.Errorf("stripe: refunding %s: the amount %q is not a positive amount with at most two decimals", ref, amount)
	}
	params := &stripeapi.RefundCreateParams{Amount: stripeapi.Int64(cents)}
	if strings.HasPrefix(ref, "ch_") {
		params.Charge = stripeapi.String(ref)
	} else {
		params.PaymentIntent = stripeapi.String(ref)
	}
	params.AddExpand("charge")
	if idempotencyKey != "" {
		params.SetIdempotencyKey(idempotencyKey)
	}
	re, err := p.client.V1Refunds.Create(ctx, params)
	var se *stripeapi.Error
	if errors.As(err, &se) {
		switch {
		case se.Type == stripeapi.ErrorTypeIdempotency:
			return "", &billing.IdempotencyError{Key: idempotencyKey, Detail: se.Msg}
		case se.Code == stripeapi.ErrorCodeChargeAlreadyRefunded || se.Code == stripeapi.ErrorCodeAmountTooLarge ||
			(se.Type == stripeapi.ErrorTypeInvalidRequest && se.Param == "amount"):
			return "", fmt.Errorf("stripe: refunding %s of %s: %s: %w", amount, ref, se.Msg, billing.ErrRefundTooLarge)
		}
	}
	if err != nil {
		return "", fmt.Errorf("stripe: refunding %s of %s: %w", amount, ref, err)
	}
	if re.Charge == nil || re.Charge.Amount == 0 {
		return "", fmt.Errorf("stripe: refunding %s of %s: the answer has no charge to read the refunded total from", amount, ref)
	}
	return dollars(re.Charge.AmountRefunded), nil
}

// dollars renders cents as a canonical decimal amount: 1250 → "12.5".
func dollars(cents int64) string {
	s := fmt.Sprintf("%d.%02d", cents/100, cents%100)
	s = strings.TrimRight(s, "0")
	return strings.TrimSuffix(s, ".")
}

// FindCharge looks for a PaymentIntent made under the idempotency key (the
// metadata every charge carries) that took or is taking money. It uses
// Stripe's search, whose index lags writes by up to about a minute in
// normal operation; settlement asks only about intents older than its grace
// period (15 minutes), well past that.
func (p *Processor) FindCharge(ctx context.Context, idempotencyKey string) (string, bool, error) {
	params := &stripeapi.PaymentIntentSearchParams{}
	params.Query = fmt.Sprintf("metadata['%s']:'%s'", MetaIdempotencyKey, searchEscape(idempotencyKey))
	for pi, err := range p.client.V1PaymentIntents.Search(ctx, params).All(ctx) {
		if err != nil {
			return "", false, fmt.Errorf("stripe: searching the charge of %s: %w", idempotencyKey, err)
		}
		if pi.Metadata[MetaIdempotencyKey] != idempotencyKey {
			continue
		}
		switch pi.Status {
		case stripeapi.PaymentIntentStatusSucceeded, stripeapi.PaymentIntentStatusProcessing, stripeapi.PaymentIntentStatusRequiresCapture:
			return pi.ID, true, nil
		}
	}
	return "", false, nil
}

// searchEscape escapes a value for a quoted string in Stripe's search
// query language.
func searchEscape(s string) string {
	return strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(s)
}

// Cents converts an exact decimal amount in dollars with at most two
// decimals ("40", "40.8", "40.85") to cents.
func Cents(amount string) (int64, error) {
	whole, frac, hasPoint := strings.Cut(amount, ".")
	if whole == "" || len(whole) > 12 || len(frac) > 2 || (hasPoint && frac == "") || !digits(whole) || !digits(frac) {
		return 0, fmt.Errorf("amount %q is not a decimal number of dollars with at most two decimals", amount)
	}
	var cents int64
	for _, c := range whole {
		cents = cents*10 + int64(c-'0')
	}
	frac += "00"[len(frac):]
	cents = cents*100 + int64(frac[0]-'0')*10 + int64(frac[1]-'0')
	return cents, nil
}

func digits(s string) bool {
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

var _ billing.Processor = (*Processor)(nil)
