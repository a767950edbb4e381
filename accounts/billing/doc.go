// Package billing holds what a payment processor is and says: the Processor
// interface and its requests and answers (ChargeRequest, PaymentMethod,
// ErrDeclined and DeclineError, ActionRequiredError and
// SetupActionRequiredError, MethodError, the payment states), the charge
// keys every processor call carries (chargekeys.go), and the built-in
// TestProcessor with its test cards (testprocessor.go). The Stripe adapter
// is in the subpackage stripe.
//
// It imports no other package of this module: package accounts imports it.
// The test processor reaches its durable ledger through Ledger, which
// accounts implements over either store (accounts.TestLedger).
//
// The charge intents and their settlement, subscribe, renewals and the
// past-due retries stay in package accounts: writing an intent, reserving
// seats, marking a charge done or a subscription active are transitions of
// account state made inside the store's transactions, around processor
// calls made outside them.
package billing
