package accounts

// Figures the operator's service (accounts/operator) reads inside its own
// store transactions, computed exactly as the buyers' views compute them.

import "math/big"

// SumAmounts adds the exact decimal amounts add and subtracts sub, in the
// canonical form of every amount (an unparsable one is an error).
func SumAmounts(add, sub []string) (string, error) {
	total := new(big.Rat)
	for i, list := range [][]string{add, sub} {
		for _, a := range list {
			r, err := parseAmount(a)
			if err != nil {
				return "", err
			}
			if i == 1 {
				r.Neg(r)
			}
			total.Add(total, r)
		}
	}
	return formatAmount(total), nil
}

// PoolFundingTx reads a pool's funding figures as pool views show them:
// its goal ("0" when none) and the sum of its pledges' monthly prices.
func PoolFundingTx(tx Tx, p *Pool) (goal, pledged string, err error) {
	f, err := fundingTx(tx, p.ID)
	if err != nil {
		return "", "", err
	}
	v := poolView(p)
	f.fill(&v)
	return v.FundingGoal, v.FundingPledged, nil
}

// PeriodAmountTx is what each period of sub charges (PeriodAmount, or for a
// subscription bought before it was kept, what its renewals charge).
func PeriodAmountTx(tx Tx, sub *Subscription) (string, error) { return periodAmountTx(tx, sub) }

// MonthlyAmountTx is what sub brings in per month: its period amount, a
// twelfth of it on a yearly cycle (the discount included, unlike
// MonthlyPrice, which is the undiscounted monthly price).
func MonthlyAmountTx(tx Tx, sub *Subscription) (string, error) {
	amount, err := periodAmountTx(tx, sub)
	if err != nil || sub.BillingCycle != CycleYear {
		return amount, err
	}
	r, err := parseAmount(amount)
	if err != nil {
		return "", err
	}
	return formatAmount(r.Quo(r, big.NewRat(12, 1))), nil
}
