package accounts_test

import (
	"strings"
	"testing"

	"github.com/timeblock/timeblock/accounts"
)

func pricedPool(prices map[accounts.Block]string, discount string) *accounts.Pool {
	return &accounts.Pool{ID: "p", Slug: "p", BlockPrices: prices, AnnualDiscount: discount}
}

func TestPricePerDay(t *testing.T) {
	cases := map[string]string{
		"40":      "5",
		"100":     "12.5",
		"12.50":   "1.5625",
		"99.99":   "12.49875",
		"0":       "0",
		"0.08":    "0.01",
		"1":       "0.125",
		"1000000": "125000",
	}
	for monthly, want := range cases {
		p := pricedPool(map[accounts.Block]string{accounts.BlockEurope: monthly}, "0")
		got, err := accounts.PricePerDay(p, accounts.BlockEurope)
		if err != nil || got != want {
			t.Errorf("PricePerDay(%s) = %q, %v; want %q", monthly, got, err, want)
		}
	}
	p := pricedPool(map[accounts.Block]string{accounts.BlockEurope: "40"}, "0")
	if _, err := accounts.PricePerDay(p, accounts.BlockAsia); err == nil {
		t.Error("a block the pool does not sell has a price")
	}
	p.BlockPrices[accounts.BlockAsia] = "4o"
	if _, err := accounts.PricePerDay(p, accounts.BlockAsia); err == nil {
		t.Error("a malformed price was accepted")
	}
}

func TestMonthlyAndChargeAmounts(t *testing.T) {
	prices := map[accounts.Block]string{accounts.BlockAsia: "80", accounts.BlockEurope: "96.50", accounts.BlockAmericas: "120.10"}
	cases := []struct {
		blocks   []accounts.Block
		q        int
		discount string
		monthly  string
		month    string // charged monthly
		year     string // charged yearly
	}{
		{[]accounts.Block{accounts.BlockAsia}, 1, "0", "80", "80", "960"},
		{[]accounts.Block{accounts.BlockAsia, accounts.BlockEurope}, 1, "0.15", "176.5", "176.5", "1800.3"},
		{[]accounts.Block{accounts.BlockEurope}, 3, "0.2", "289.5", "289.5", "2779.2"},
		{[]accounts.Block{accounts.BlockAmericas}, 20, "0.1", "2402", "2402", "25941.6"},
		// 120.1 × 12 × 0.6667 = 960.84804, rounded to cents.
		{[]accounts.Block{accounts.BlockAmericas}, 1, "0.3333", "120.1", "120.1", "960.85"},
		{accounts.Blocks, 2, "", "593.2", "593.2", "7118.4"},
	}
	for _, c := range cases {
		p := pricedPool(prices, c.discount)
		m, err := accounts.MonthlyPrice(p, c.blocks, c.q)
		if err != nil || m != c.monthly {
			t.Errorf("MonthlyPrice(%v, %d) = %q, %v; want %q", c.blocks, c.q, m, err, c.monthly)
			continue
		}
		if got, err := accounts.ChargeAmount(m, accounts.CycleMonth, c.discount); err != nil || got != c.month {
			t.Errorf("monthly charge of %s = %q, %v; want %q", m, got, err, c.month)
		}
		if got, err := accounts.ChargeAmount(m, accounts.CycleYear, c.discount); err != nil || got != c.year {
			t.Errorf("yearly charge of %s at %s off = %q, %v; want %q", m, c.discount, got, err, c.year)
		}
	}
}

func TestChargeRoundsHalfUpToCents(t *testing.T) {
	cases := []struct{ monthly, discount, want string }{
		{"0.125", "", "0.13"},    // month: .125 → .13 (half up, not banker's)
		{"0.135", "", "0.14"},    // float64 would make this 0.13
		{"0.124999", "", "0.12"}, // below half
		{"1.005", "", "1.01"},    // float64 would make this 1
		{"10", "0.125", "105"},   // 10 × 12 × 0.875 = 105 exactly
		{"0.01", "0.5", "0.06"},  // 0.06 exactly
		{"0.001", "0.5", "0.01"}, // 0.006 → 0.01
		{"0.0004", "0", "0"},     // 0.0048 → 0
	}
	for _, c := range cases {
		cycle := accounts.CycleMonth
		if c.discount != "" {
			cycle = accounts.CycleYear
		}
		got, err := accounts.ChargeAmount(c.monthly, cycle, c.discount)
		if err != nil || got != c.want {
			t.Errorf("ChargeAmount(%s, %s, %s) = %q, %v; want %q", c.monthly, cycle, c.discount, got, err, c.want)
		}
	}
	if _, err := accounts.ChargeAmount("10", accounts.CycleYear, "1"); err == nil {
		t.Error("a discount of 1 was accepted")
	}
	if _, err := accounts.ChargeAmount("ten", accounts.CycleMonth, "0"); err == nil {
		t.Error("a malformed price was accepted")
	}
}

func TestMinPricePerDay(t *testing.T) {
	cases := []struct {
		prices map[accounts.Block]string
		want   string
	}{
		{map[accounts.Block]string{accounts.BlockAsia: "80", accounts.BlockEurope: "96", accounts.BlockAmericas: "120"}, "80"},
		{map[accounts.Block]string{accounts.BlockEurope: "12.50", accounts.BlockAmericas: "40"}, "12.5"},
		{map[accounts.Block]string{accounts.BlockAmericas: "7.10"}, "7.1"},
		{map[accounts.Block]string{}, "0"},
	}
	for _, c := range cases {
		if got := accounts.MinPricePerDay(pricedPool(c.prices, "0")); got != c.want {
			t.Errorf("MinPricePerDay(%v) = %q, want %q", c.prices, got, c.want)
		}
	}
}

// A block price is refused when the smallest purchase it allows, one seat
// for a month (or, with a discount close to 1, for a year), is under what a
// processor can charge.
func TestPricesUnderTheMinimumCharge(t *testing.T) {
	for _, c := range []struct {
		price, discount, want string // want: a fragment of the error, "" for none
	}{
		{"0.50", "0", ""},
		{"0.5", "0.9", ""}, // a year: 0.60
		{"40", "0.15", ""},
		{"0.49", "0", "0.49 is under 0.50 USD, the least a payment processor charges"},
		{"0.01", "0", "0.01 is under 0.50 USD"},
		{"0", "0", "free blocks are not supported"},
		{"1e3", "0", "not a plain decimal"},
		{"40", "0.999", "a year of one seat at 40 with annual_discount 0.999 costs 0.48, under 0.50 USD"},
	} {
		err := accounts.CheckBlockPrice(c.price)
		if err == nil {
			err = accounts.CheckAnnualPrice(c.price, c.discount)
		}
		switch {
		case c.want == "" && err != nil:
			t.Errorf("price %s, discount %s refused: %v", c.price, c.discount, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("price %s, discount %s: error %v, want it to contain %q", c.price, c.discount, err, c.want)
		}
	}
}
