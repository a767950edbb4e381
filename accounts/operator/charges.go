package operator

import (
	"cmp"
	"context"
	"encoding/csv"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/timeblock/timeblock/accounts"
	"github.com/timeblock/timeblock/accounts/ledger"
)

// Charge is a ledger charge as the operator sees it: the buyer's fields
// (SPEC.md §8) with the receipt number, the buyer and the processor's
// reference, to reconcile with the processor's records.
type Charge struct {
	ledger.Charge
	UserID       string `json:"userId"`
	Email        string `json:"email"`
	ProcessorRef string `json:"processorRef"`
}

// ChargeRange selects ledger charges made in [From, To) (a zero bound is
// open), a page at a time.
type ChargeRange struct {
	From, To time.Time
	Limit    int    // 0: DefaultLimit
	Before   string // a previous page's NextCursor
}

// ChargePage is one page of charges, newest (highest receipt number)
// first; NextCursor is "" on the last one.
type ChargePage struct {
	Charges    []Charge
	NextCursor string
}

// Charges lists the site's ledger charges in the range, newest first. The
// ledger is kept per buyer, so a page reads each buyer's charges down to the
// page's size and merges them by receipt number: one query per buyer.
func (s *Service) Charges(ctx context.Context, rg ChargeRange) (*ChargePage, error) {
	limit, err := pageLimit(rg.Limit)
	if err != nil {
		return nil, err
	}
	var before int64
	if rg.Before != "" {
		if before, err = strconv.ParseInt(rg.Before, 10, 64); err != nil || before <= 0 {
			return nil, accounts.Invalid("before must be the nextCursor of a previous page")
		}
	}
	if !rg.From.IsZero() && !rg.To.IsZero() && !rg.From.Before(rg.To) {
		return nil, accounts.Invalid("from must be before to")
	}
	page := &ChargePage{}
	err = s.store.View(ctx, func(tx accounts.Tx) error {
		page.Charges, page.NextCursor = nil, ""
		users, err := tx.ListUsers()
		if err != nil {
			return err
		}
		type found struct {
			c    *accounts.LedgerCharge
			user *accounts.User
		}
		var all []found
		for _, u := range users {
			cs, err := userChargesTx(tx, u.ID, rg, before, limit+1)
			if err != nil {
				return err
			}
			for _, c := range cs {
				all = append(all, found{c, u})
			}
		}
		slices.SortFunc(all, func(a, b found) int { return cmp.Compare(b.c.Number, a.c.Number) })
		if len(all) > limit {
			all = all[:limit]
			page.NextCursor = strconv.FormatInt(all[limit-1].c.Number, 10)
		}
		for _, f := range all {
			c := f.c
			page.Charges = append(page.Charges, Charge{Charge: ledger.View(c), UserID: f.user.ID,
				Email: f.user.Email, ProcessorRef: c.ProcessorRef})
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("operator charges: %w", err)
	}
	return page, nil
}

// userChargesTx reads up to limit of the user's charges numbered below
// before (when > 0) and made in the range, newest first.
func userChargesTx(tx accounts.Tx, userID string, rg ChargeRange, before int64, limit int) ([]*accounts.LedgerCharge, error) {
	const batch = 100
	var out []*accounts.LedgerCharge
	for len(out) < limit {
		cs, err := tx.ListLedgerCharges(userID, before, batch)
		if err != nil {
			return nil, err
		}
		for _, c := range cs {
			before = c.Number
			if !rg.From.IsZero() && c.CreatedAt.Before(rg.From) {
				return out, nil
			}
			if (rg.To.IsZero() || c.CreatedAt.Before(rg.To)) && len(out) < limit {
				out = append(out, c)
			}
		}
		if len(cs) < batch {
			break
		}
	}
	return out, nil
}

// WriteChargesCSV writes every charge in the range (all pages) as CSV, with
// a header row, newest first.
func (s *Service) WriteChargesCSV(ctx context.Context, w io.Writer, rg ChargeRange) error {
	out := csv.NewWriter(w)
	_ = out.Write([]string{"number", "id", "createdAt", "email", "kind", "description", "amount", "refundedAmount",
		"currency", "status", "subscriptionId", "poolId", "processorRef"})
	rg.Limit, rg.Before = MaxLimit, ""
	for {
		page, err := s.Charges(ctx, rg)
		if err != nil {
			return err
		}
		for _, c := range page.Charges {
			_ = out.Write([]string{c.Number, c.ID, c.CreatedAt.UTC().Format(time.RFC3339), cell(c.Email), c.Kind,
				cell(c.Description), c.Amount, c.RefundedAmount, c.Currency, c.Status, c.SubscriptionID, c.PoolID, cell(c.ProcessorRef)})
		}
		if page.NextCursor == "" {
			break
		}
		rg.Before = page.NextCursor
	}
	out.Flush()
	return out.Error()
}

// cell keeps a text a spreadsheet would run as a formula (=, +, -, @ first)
// as text.
func cell(s string) string {
	if s != "" && strings.ContainsRune("=+-@\t\r", rune(s[0])) {
		return "'" + s
	}
	return s
}
