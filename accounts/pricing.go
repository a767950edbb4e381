package accounts

// Prices are exact decimals. Every amount is computed with math/big.Rat and
// rendered in one canonical form: the shortest exact decimal, with no
// trailing zeros and no trailing point ("40", "12.5", "5.125", "0.15").
// Charged amounts are first rounded half-up to cents, so they have at most
// two decimals ("408", "40.8", "40.85"). Prices in the configuration are
// plain decimals ("40", "12.50"); they are re-rendered canonically.

import (
	"fmt"
	"math/big"
	"strings"
)

var (
	ratZero     = new(big.Rat)
	ratOne      = big.NewRat(1, 1)
	ratTwelve   = big.NewRat(12, 1)
	ratHundred  = big.NewRat(100, 1)
	ratHalf     = big.NewRat(1, 2)
	ratPerBlock = big.NewRat(HoursPerBlock, 1)
)

// parseAmount parses a plain non-negative decimal such as "40" or "12.50".
func parseAmount(s string) (*big.Rat, error) {
	if s == "" {
		return nil, fmt.Errorf("empty amount")
	}
	for i, c := range s {
		if (c < '0' || c > '9') && !(c == '.' && i > 0 && i < len(s)-1) {
			return nil, fmt.Errorf("%q is not a plain decimal such as 40 or 12.50", s)
		}
	}
	r, ok := new(big.Rat).SetString(s)
	if !ok {
		return nil, fmt.Errorf("%q is not a plain decimal such as 40 or 12.50", s)
	}
	return r, nil
}

// formatAmount renders r in the canonical form. r must have a terminating
// decimal expansion (a denominator of the form 2^a·5^b), which holds for
// every price derived from decimal configuration values; anything else is
// rendered with 12 decimals, trailing zeros removed.
func formatAmount(r *big.Rat) string {
	prec := 0
	if !r.IsInt() {
		prec = 12
		if exact, ok := decimalPlaces(r.Denom()); ok {
			prec = exact
		}
	}
	s := r.FloatString(prec)
	if strings.Contains(s, ".") {
		s = strings.TrimRight(s, "0")
		s = strings.TrimSuffix(s, ".")
	}
	if s == "-0" {
		s = "0"
	}
	return s
}

// decimalPlaces returns how many decimals 1/d needs when d = 2^a·5^b: max(a, b).
func decimalPlaces(d *big.Int) (int, bool) {
	n := new(big.Int).Set(d)
	two, five := big.NewInt(2), big.NewInt(5)
	var a, b int
	m := new(big.Int)
	for {
		q, r := new(big.Int).QuoRem(n, two, m)
		if r.Sign() != 0 {
			break
		}
		n, a = q, a+1
	}
	for {
		q, r := new(big.Int).QuoRem(n, five, m)
		if r.Sign() != 0 {
			break
		}
		n, b = q, b+1
	}
	if n.Cmp(big.NewInt(1)) != 0 {
		return 0, false
	}
	return max(a, b), true
}

// roundCents rounds a non-negative amount half-up to whole cents.
func roundCents(r *big.Rat) *big.Rat {
	cents := new(big.Rat).Mul(r, ratHundred)
	cents.Add(cents, ratHalf)
	whole := new(big.Int).Quo(cents.Num(), cents.Denom()) // floor for non-negative values
	return new(big.Rat).SetFrac(whole, big.NewInt(100))
}

// blockPrice returns the pool's monthly price per seat for block b.
func blockPrice(p *Pool, b Block) (*big.Rat, error) {
	s, ok := p.BlockPrices[b]
	if !ok {
		return nil, fmt.Errorf("pool %s does not sell the %s block", p.Slug, b)
	}
	r, err := parseAmount(s)
	if err != nil {
		return nil, fmt.Errorf("pool %s, block %s price: %w", p.Slug, b, err)
	}
	return r, nil
}

// PricePerDay is the price of one hour slot of a block: the block's monthly
// price per seat spread evenly over its 8 hours, as a canonical decimal.
func PricePerDay(p *Pool, b Block) (string, error) {
	r, err := blockPrice(p, b)
	if err != nil {
		return "", err
	}
	return formatAmount(new(big.Rat).Quo(r, ratPerBlock)), nil
}

// MinPricePerDay is the lowest monthly block price of the pool (the field
// name is historical: it is a monthly amount per seat), or "0" when the pool
// sells no block.
func MinPricePerDay(p *Pool) string {
	var low *big.Rat
	for _, b := range Blocks {
		r, err := blockPrice(p, b)
		if err != nil {
			continue
		}
		if low == nil || r.Cmp(low) < 0 {
			low = r
		}
	}
	if low == nil {
		return "0"
	}
	return formatAmount(low)
}

// MonthlyPrice is quantity × the sum of the chosen blocks' monthly prices.
func MonthlyPrice(p *Pool, blocks []Block, quantity int) (string, error) {
	r, err := monthlyRat(p, blocks, quantity)
	if err != nil {
		return "", err
	}
	return formatAmount(r), nil
}

func monthlyRat(p *Pool, blocks []Block, quantity int) (*big.Rat, error) {
	sum := new(big.Rat)
	for _, b := range blocks {
		r, err := blockPrice(p, b)
		if err != nil {
			return nil, err
		}
		sum.Add(sum, r)
	}
	return sum.Mul(sum, big.NewRat(int64(quantity), 1)), nil
}

// ChargeAmount is what one billing period costs: the monthly price for a
// monthly cycle; monthly × 12 × (1 − annualDiscount) for a yearly one;
// rounded half-up to cents.
func ChargeAmount(monthlyPrice, cycle, annualDiscount string) (string, error) {
	m, err := parseAmount(monthlyPrice)
	if err != nil {
		return "", fmt.Errorf("monthly price: %w", err)
	}
	amount := new(big.Rat).Set(m)
	if cycle == CycleYear {
		d := ratZero
		if annualDiscount != "" {
			if d, err = parseAmount(annualDiscount); err != nil {
				return "", fmt.Errorf("annual discount: %w", err)
			}
		}
		if d.Cmp(ratOne) >= 0 {
			return "", fmt.Errorf("annual discount %s is not a fraction below 1", annualDiscount)
		}
		amount.Mul(amount, ratTwelve)
		amount.Mul(amount, new(big.Rat).Sub(ratOne, d))
	}
	return formatAmount(roundCents(amount)), nil
}

// canonicalAmount re-renders a decimal string canonically; an unparsable
// value is returned as is.
func canonicalAmount(s string) string {
	r, err := parseAmount(s)
	if err != nil {
		return s
	}
	return formatAmount(r)
}

// periodAmountTx returns what one period of sub costs: fixed at purchase
// (Subscription.PeriodAmount), so that a reload changing the pool's prices
// or annual discount never changes what an existing subscription pays.
//
// A subscription bought before that was kept pays what it was sold at. A
// monthly period is its monthly price, itself fixed at purchase. A yearly
// one is what its first succeeded charge paid, when that amount is one a
// year of its monthly price can cost (more than 0, at most 12 months
// undiscounted: a charge for a year, not for something else); the billing
// cycle never changes after purchase, so every period charge is a year.
// Without such a charge (a purchase never paid, or records lost), today's
// annual discount is all there is.
func periodAmountTx(tx Tx, sub *Subscription) (string, error) {
	if sub.PeriodAmount != "" {
		return sub.PeriodAmount, nil
	}
	if sub.BillingCycle != CycleYear {
		return ChargeAmount(sub.MonthlyPrice, sub.BillingCycle, "")
	}
	undiscounted, err := ChargeAmount(sub.MonthlyPrice, CycleYear, "")
	if err != nil {
		return "", err
	}
	ceiling, _ := parseAmount(undiscounted)
	charges, err := tx.ListCharges(sub.ID)
	if err != nil {
		return "", err
	}
	for _, c := range charges { // oldest first
		if c.Status != ChargeSucceeded {
			continue
		}
		if paid, err := parseAmount(c.Amount); err == nil && paid.Sign() > 0 && paid.Cmp(ceiling) <= 0 {
			return canonicalAmount(c.Amount), nil
		}
		break // the first payment is not a year's price: ignore the rest too
	}
	pool, err := tx.GetPool(sub.PoolID)
	if err != nil {
		return "", err
	}
	return ChargeAmount(sub.MonthlyPrice, sub.BillingCycle, pool.AnnualDiscount)
}

// MinimumCharge is the least a processor can charge, in USD: Stripe refuses
// a payment under 0.50. The built-in test processor is held to it too, by
// configuration (CheckBlockPrice, CheckAnnualPrice), so that the quick start
// refuses what production would: a price under it could never be sold.
const MinimumCharge = "0.50"

// CheckBlockPrice reports what is wrong with a block's monthly price per
// seat: not a plain decimal, or under MinimumCharge, since the smallest
// purchase (one seat for a month) costs exactly the block's price. 0 is
// refused too: every purchase is a charge, and a free one cannot be made.
func CheckBlockPrice(price string) error {
	r, err := parseAmount(price)
	if err != nil {
		return err
	}
	min, _ := parseAmount(MinimumCharge)
	switch {
	case r.Sign() == 0:
		return fmt.Errorf("0 is under %s USD, the least a payment processor charges (Stripe's minimum): free blocks are not supported, every purchase is charged", MinimumCharge)
	case r.Cmp(min) < 0:
		return fmt.Errorf("%s is under %s USD, the least a payment processor charges (Stripe's minimum): the smallest purchase, one seat for a month, costs the block's price", price, MinimumCharge)
	}
	return nil
}

// CheckAnnualPrice reports a block whose smallest yearly purchase (one seat
// for a year, annualDiscount off) costs less than MinimumCharge: possible
// only with a discount close to 1.
func CheckAnnualPrice(price, annualDiscount string) error {
	year, err := ChargeAmount(price, CycleYear, annualDiscount)
	if err != nil {
		return err
	}
	r, _ := parseAmount(year)
	if min, _ := parseAmount(MinimumCharge); r.Cmp(min) < 0 {
		return fmt.Errorf("a year of one seat at %s with annual_discount %s costs %s, under %s USD, the least a payment processor charges (Stripe's minimum)",
			price, annualDiscount, year, MinimumCharge)
	}
	return nil
}

// CheckAnnualDiscount checks a configured annual discount: a plain decimal
// fraction below 1 ("0", "0.15").
func CheckAnnualDiscount(discount string) error {
	d, err := parseAmount(discount)
	if err != nil {
		return err
	}
	if d.Cmp(big.NewRat(1, 1)) >= 0 {
		return fmt.Errorf("%s is not a fraction below 1 such as 0.15", discount)
	}
	return nil
}
