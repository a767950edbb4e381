package stripe

// Saving a card: the payment method is attached to the user's Customer and
// set up for off-session charges by a SetupIntent (usage off_session,
// confirmed at once), so that the bank can exempt the renewals and
// past-due retries Timeblock makes later without the card holder. A bank
// that wants 3-D Secure first leaves the SetupIntent in requires_action:
// nothing is saved, the page confirms it with Stripe.js, and the card is
// saved once Stripe says it succeeded — when the page calls back
// (FinishSetup) or, should it never, by the setup_intent.succeeded webhook
// (webhook.go). The state of a waiting setup stays at Stripe.

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	stripeapi "github.com/stripe/stripe-go/v85"

	"github.com/timeblock/timeblock/accounts"
	"github.com/timeblock/timeblock/accounts/billing"
)

// MetaWaited marks a SetupIntent that waited for the card holder.
const MetaWaited = "timeblock_waited_for_customer"

// SaveMethod attaches the payment method the browser made with Stripe.js
// (pm_...; Stripe's test tokens such as pm_card_visa work in test mode) to
// the user's Customer, sets it up for off-session charges with a
// SetupIntent confirmed at once (so that banks can exempt renewals and
// past-due retries from 3-D Secure), and once set up makes it the
// Customer's default. A bank that wants the card holder to authenticate the
// setup first is *billing.SetupActionRequiredError (FinishSetup ends it),
// a declined setup *billing.DeclineError; the card is not the default then.
func (p *Processor) SaveMethod(ctx context.Context, userID, method string) (billing.PaymentMethod, error) {
	if !strings.HasPrefix(method, "pm_") {
		return billing.PaymentMethod{}, accounts.Invalid("paymentMethod %q is not a Stripe payment method: send the pm_... id that Stripe.js created (in test mode pm_card_visa and the other test tokens work)", method)
	}
	cust, err := p.customer(ctx, userID)
	if err != nil {
		return billing.PaymentMethod{}, err
	}
	ap := &stripeapi.PaymentMethodAttachParams{Customer: stripeapi.String(cust)}
	pm, err := p.client.V1PaymentMethods.Attach(ctx, method, ap)
	if err != nil {
		return billing.PaymentMethod{}, methodError(method, err)
	}
	params := &stripeapi.SetupIntentCreateParams{
		Customer:           stripeapi.String(cust),
		PaymentMethod:      stripeapi.String(pm.ID),
		PaymentMethodTypes: []*string{stripeapi.String("card")},
		Usage:              stripeapi.String(string(stripeapi.SetupIntentUsageOffSession)),
		Confirm:            stripeapi.Bool(true),
		Metadata:           map[string]string{MetaUserID: userID},
	}
	si, err := p.client.V1SetupIntents.Create(ctx, params)
	if err != nil {
		return billing.PaymentMethod{}, setupError(err)
	}
	if si.Status == stripeapi.SetupIntentStatusRequiresAction {
		// Mark it for the webhook, which saves only setups that waited:
		// one that succeeded at once is this request's to save. Best
		// effort: unmarked, the page's call back still saves the card.
		up := &stripeapi.SetupIntentUpdateParams{Metadata: map[string]string{MetaWaited: "true"}}
		_, _ = p.client.V1SetupIntents.Update(ctx, si.ID, up)
	}
	return p.setupOutcome(ctx, cust, si, pm)
}

// FinishSetup reads a SetupIntent that waited for the card holder and, once
// it succeeded, makes its card the Customer's default. A SetupIntent of
// another Customer is answered as a missing one.
func (p *Processor) FinishSetup(ctx context.Context, userID, setupID string) (billing.PaymentMethod, error) {
	if !strings.HasPrefix(setupID, "seti_") {
		return billing.PaymentMethod{}, accounts.Invalid("setupIntent %q is not a Stripe SetupIntent: send the seti_... id of the setup-intent answer's data.setupIntentId", setupID)
	}
	var cust string
	err := p.store.View(ctx, func(tx accounts.Tx) error {
		var err error
		cust, err = tx.GetProcessorCustomer(Name, userID)
		return err
	})
	if errors.Is(err, accounts.ErrNotFound) {
		return billing.PaymentMethod{}, accounts.NotFound("no card setup %s", setupID)
	}
	if err != nil {
		return billing.PaymentMethod{}, fmt.Errorf("stripe: reading the customer of %s: %w", userID, err)
	}
	params := &stripeapi.SetupIntentRetrieveParams{}
	params.AddExpand("payment_method")
	si, err := p.client.V1SetupIntents.Retrieve(ctx, setupID, params)
	if missing(err) || err == nil && (si.Customer == nil || si.Customer.ID != cust) {
		return billing.PaymentMethod{}, accounts.NotFound("no card setup %s", setupID)
	}
	if err != nil {
		return billing.PaymentMethod{}, fmt.Errorf("stripe: reading SetupIntent %s: %w", setupID, err)
	}
	return p.setupOutcome(ctx, cust, si, si.PaymentMethod)
}

// setupOutcome answers a SetupIntent after its confirmation: succeeded,
// its card (pm, with brand and last 4) becomes the Customer's default.
func (p *Processor) setupOutcome(ctx context.Context, cust string, si *stripeapi.SetupIntent, pm *stripeapi.PaymentMethod) (billing.PaymentMethod, error) {
	switch si.Status {
	case stripeapi.SetupIntentStatusSucceeded:
		if pm == nil {
			return billing.PaymentMethod{}, fmt.Errorf("stripe: SetupIntent %s succeeded without a payment method", si.ID)
		}
		return p.makeDefault(ctx, cust, pm)
	case stripeapi.SetupIntentStatusRequiresAction, stripeapi.SetupIntentStatusRequiresConfirmation, stripeapi.SetupIntentStatusProcessing:
		return billing.PaymentMethod{}, &billing.SetupActionRequiredError{SetupIntentID: si.ID, ClientSecret: si.ClientSecret}
	case stripeapi.SetupIntentStatusRequiresPaymentMethod:
		// The bank declined the setup, or the authentication failed.
		reason := "Your card was declined."
		if si.LastSetupError != nil && si.LastSetupError.Msg != "" {
			reason = si.LastSetupError.Msg
		}
		return billing.PaymentMethod{}, &billing.DeclineError{Reason: reason, Code: "requires_payment_method"}
	case stripeapi.SetupIntentStatusCanceled:
		return billing.PaymentMethod{}, &billing.DeclineError{Reason: "The card setup was canceled.", Code: "canceled"}
	}
	return billing.PaymentMethod{}, fmt.Errorf("stripe: SetupIntent %s is %s", si.ID, si.Status)
}

// setupError maps a failed SetupIntent confirmation: card errors are
// declines with Stripe's message for the card holder.
func setupError(err error) error {
	var se *stripeapi.Error
	if errors.As(err, &se) && se.Type == stripeapi.ErrorTypeCard {
		return cardDecline(se, se.Msg)
	}
	return fmt.Errorf("stripe: creating the SetupIntent: %w", err)
}

// makeDefault makes a set-up card the Customer's default.
func (p *Processor) makeDefault(ctx context.Context, cust string, pm *stripeapi.PaymentMethod) (billing.PaymentMethod, error) {
	up := &stripeapi.CustomerUpdateParams{
		InvoiceSettings: &stripeapi.CustomerUpdateInvoiceSettingsParams{DefaultPaymentMethod: stripeapi.String(pm.ID)},
	}
	if _, err := p.client.V1Customers.Update(ctx, cust, up); err != nil {
		return billing.PaymentMethod{}, fmt.Errorf("stripe: making %s the default of %s: %w", pm.ID, cust, err)
	}
	saved := billing.PaymentMethod{ID: pm.ID, Brand: string(pm.Type)}
	if pm.Card != nil {
		saved.Brand, saved.Last4 = string(pm.Card.Brand), pm.Card.Last4
	}
	return saved, nil
}

// methodError turns Stripe's refusal of a payment method into a 400 that
// says why; other failures stay errors.
func methodError(method string, err error) error {
	var se *stripeapi.Error
	if !errors.As(err, &se) {
		return fmt.Errorf("stripe: attaching %s: %w", method, err)
	}
	switch {
	case se.Type == stripeapi.ErrorTypeCard:
		return accounts.Invalid("Stripe refused this card: %s Use another card.", se.Msg)
	case se.Code == stripeapi.ErrorCodeResourceMissing:
		return accounts.Invalid("Stripe has no payment method %q: send the pm_... id that Stripe.js created for this site's Stripe account", method)
	case se.Type == stripeapi.ErrorTypeInvalidRequest && se.HTTPStatusCode == http.StatusBadRequest:
		return accounts.Invalid("Stripe refused payment method %q: %s", method, se.Msg)
	}
	return fmt.Errorf("stripe: attaching %s: %w", method, err)
}

// setupEvent reads a setup_intent.succeeded event about the SetupIntent id:
// one that waited for the card holder (MetaWaited) and is its Customer's
// newest is accounts.EventSetupSucceeded, for the user in its metadata;
// anything else is ignored. The newest only: a delivery delayed past the
// save of another card must not bring the older card back.
func (p *Processor) setupEvent(ctx context.Context, out accounts.ProcessorEvent, id string) (accounts.ProcessorEvent, error) {
	si, err := p.client.V1SetupIntents.Retrieve(ctx, id, nil)
	if missing(err) {
		return out, nil
	}
	if err != nil {
		return accounts.ProcessorEvent{}, fmt.Errorf("stripe: reading SetupIntent %s of event %s: %w", id, out.ID, err)
	}
	userID := si.Metadata[MetaUserID]
	if si.Status != stripeapi.SetupIntentStatusSucceeded || si.Metadata[MetaWaited] != "true" || userID == "" || si.Customer == nil {
		return out, nil
	}
	params := &stripeapi.SetupIntentListParams{Customer: stripeapi.String(si.Customer.ID)}
	params.Limit = stripeapi.Int64(1)
	for newest, err := range p.client.V1SetupIntents.List(ctx, params).All(ctx) {
		if err != nil {
			return accounts.ProcessorEvent{}, fmt.Errorf("stripe: listing the SetupIntents of %s: %w", si.Customer.ID, err)
		}
		if newest.ID != si.ID {
			return out, nil
		}
		break
	}
	out.Kind, out.Ref, out.UserID = accounts.EventSetupSucceeded, si.ID, userID
	return out, nil
}
