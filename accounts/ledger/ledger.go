// Package ledger serves the buyers' side of the ledger (SPEC.md §8): the
// charges a buyer paid, newest first and paged, and a printable receipt per
// charge. The records are written by accounts (ledger_records.go) in the
// transactions that record what they paid for; this package only reads them.
package ledger

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/timeblock/timeblock/accounts"
)

// Paging of List.
const (
	DefaultLimit = 50
	MaxLimit     = 200
)

// Seller is who sells the seats, printed at the top of every receipt (the
// `seller` block of the timeblock global options). Every field may be empty.
type Seller struct {
	Name    string `json:"name,omitempty"`
	Address string `json:"address,omitempty"`
	Email   string `json:"email,omitempty"`
	TaxID   string `json:"tax_id,omitempty"`
}

// Empty reports whether the operator has filled in nothing.
func (s Seller) Empty() bool { return s == Seller{} }

// Service reads the ledger of one store.
type Service struct {
	store  accounts.Store
	seller Seller
	now    func() time.Time
}

// New builds the service; now is the clock (nil: time.Now).
func New(store accounts.Store, seller Seller, now func() time.Time) *Service {
	if now == nil {
		now = time.Now
	}
	return &Service{store: store, seller: seller, now: now}
}

// Charge is a ledger charge as the API shows it (SPEC.md §8).
type Charge struct {
	ID             string    `json:"id"`
	Number         string    `json:"number"` // the receipt number, TB-000123
	Kind           string    `json:"kind"`
	Amount         string    `json:"amount"`
	Currency       string    `json:"currency"`
	Status         string    `json:"status"`
	RefundedAmount string    `json:"refundedAmount"`
	SubscriptionID string    `json:"subscriptionId"`
	PoolID         string    `json:"poolId"`
	Description    string    `json:"description"`
	CreatedAt      time.Time `json:"createdAt"`
}

// View is c as the API shows it.
func View(c *accounts.LedgerCharge) Charge {
	return Charge{ID: c.ID, Number: c.ReceiptNumber(), Kind: c.Kind, Amount: c.Amount, Currency: c.Currency,
		Status: c.Status(), RefundedAmount: c.RefundedAmount, SubscriptionID: c.SubscriptionID, PoolID: c.PoolID,
		Description: c.Description, CreatedAt: c.CreatedAt}
}

// Page is one page of a buyer's charges; NextCursor is "" on the last one.
type Page struct {
	Charges    []Charge
	NextCursor string
}

// List returns the user's charges newest first: at most limit (0: the
// default), those after the cursor a previous page answered ("" for the
// first page).
func (s *Service) List(ctx context.Context, userID string, limit int, cursor string) (*Page, error) {
	switch {
	case limit == 0:
		limit = DefaultLimit
	case limit < 0 || limit > MaxLimit:
		return nil, accounts.Invalid("limit must be between 1 and %d", MaxLimit)
	}
	before, err := parseCursor(cursor)
	if err != nil {
		return nil, err
	}
	var rows []*accounts.LedgerCharge
	err = s.store.View(ctx, func(tx accounts.Tx) error {
		var err error
		rows, err = tx.ListLedgerCharges(userID, before, limit+1) // one more says whether a next page exists
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("list charges of %s: %w", userID, err)
	}
	page := &Page{Charges: make([]Charge, 0, min(len(rows), limit))}
	if len(rows) > limit {
		rows = rows[:limit]
		page.NextCursor = formatCursor(rows[limit-1].Number)
	}
	for _, c := range rows {
		page.Charges = append(page.Charges, View(c))
	}
	return page, nil
}

// A cursor is opaque to clients: the receipt number the next page starts
// below, encoded so that nobody builds one by hand.
func formatCursor(number int64) string {
	return base64.RawURLEncoding.EncodeToString([]byte("n" + strconv.FormatInt(number, 10)))
}

func parseCursor(cursor string) (int64, error) {
	if cursor == "" {
		return 0, nil
	}
	b, err := base64.RawURLEncoding.DecodeString(cursor)
	if err == nil && len(b) > 1 && b[0] == 'n' {
		if n, err := strconv.ParseInt(string(b[1:]), 10, 64); err == nil && n > 0 {
			return n, nil
		}
	}
	return 0, accounts.Invalid("before is not a cursor this API answered; pass the nextCursor of the previous page as is")
}

// get returns the user's charge id; another user's is not found, as a
// missing one is.
func (s *Service) get(ctx context.Context, userID, id string) (*accounts.LedgerCharge, *accounts.User, error) {
	var (
		c    *accounts.LedgerCharge
		user *accounts.User
	)
	err := s.store.View(ctx, func(tx accounts.Tx) error {
		var err error
		if c, err = tx.GetLedgerCharge(id); err != nil {
			return err
		}
		if c.UserID != userID {
			return accounts.ErrNotFound
		}
		user, err = tx.GetUser(userID)
		return err
	})
	if errors.Is(err, accounts.ErrNotFound) {
		return nil, nil, accounts.NotFound("no charge %q among yours (GET /api/billing/charges lists them)", id)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("charge %s: %w", id, err)
	}
	return c, user, nil
}
