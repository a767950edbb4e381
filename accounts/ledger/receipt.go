package ledger

import (
	"bytes"
	"context"
	"embed"
	"fmt"
	"html/template"
	"math/big"
	"strings"

	"github.com/timeblock/timeblock/accounts"
)

//go:embed receipt.html
var receiptFS embed.FS

var receiptTemplate = template.Must(template.New("receipt.html").Funcs(template.FuncMap{
	"money": money,
	"lines": func(s string) []string { return strings.Split(s, "\n") },
}).ParseFS(receiptFS, "receipt.html"))

// receiptData is what receipt.html prints; html/template escapes every field.
type receiptData struct {
	Seller      Seller
	Number      string
	Date        string
	Buyer       string
	Kind        string
	Description string
	Amount      string
	Refunded    string // "" when nothing was refunded
	Net         string
	Status      string
	Currency    string
	Reference   string
	Printed     string
}

// kindLabels words a charge's kind for people.
var kindLabels = map[string]string{
	accounts.LedgerPurchase: "Purchase",
	accounts.LedgerRenewal:  "Renewal",
	accounts.LedgerPledge:   "Pledge (charged when the pool opened)",
	accounts.LedgerRecovery: "Past-due payment",
}

var statusLabels = map[string]string{
	accounts.LedgerSucceeded:         "Paid",
	accounts.LedgerRefunded:          "Refunded",
	accounts.LedgerPartiallyRefunded: "Partially refunded",
}

// Receipt renders the printable receipt of the user's charge id: a
// self-contained HTML page (inline CSS, no scripts). Another user's charge
// is not found.
func (s *Service) Receipt(ctx context.Context, userID, id string) ([]byte, error) {
	c, user, err := s.get(ctx, userID, id)
	if err != nil {
		return nil, err
	}
	d := receiptData{
		Seller: s.seller, Number: c.ReceiptNumber(), Date: c.CreatedAt.UTC().Format("2006-01-02 15:04 UTC"),
		Buyer: user.Email, Kind: kindLabels[c.Kind], Description: c.Description,
		Amount: money(c.Amount), Status: statusLabels[c.Status()], Currency: strings.ToUpper(c.Currency),
		Reference: c.ProcessorRef, Printed: s.now().UTC().Format("2006-01-02"),
	}
	if d.Kind == "" {
		d.Kind = c.Kind
	}
	d.Net = d.Amount
	if c.Status() != accounts.LedgerSucceeded {
		d.Refunded = money(c.RefundedAmount)
		if a, ok := new(big.Rat).SetString(c.Amount); ok {
			if r, ok := new(big.Rat).SetString(c.RefundedAmount); ok {
				d.Net = "$" + new(big.Rat).Sub(a, r).FloatString(2)
			}
		}
	}
	var buf bytes.Buffer
	if err := receiptTemplate.Execute(&buf, d); err != nil {
		return nil, fmt.Errorf("receipt %s: %w", id, err)
	}
	return buf.Bytes(), nil
}

// money renders a decimal USD amount as $270.00; anything unparsable as is.
func money(amount string) string {
	r, ok := new(big.Rat).SetString(amount)
	if !ok {
		return amount
	}
	return "$" + r.FloatString(2)
}
