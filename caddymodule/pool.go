package caddymodule

import (
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/timeblock/timeblock/accounts"
)

// poolNamespace derives stable pool UUIDs from slugs, so every node and every
// reload agrees on a pool's id without coordination.
var poolNamespace = uuid.MustParse("5b0a4c1e-7d1f-4e51-9a7c-1f3c2d8e6b40")

// PoolConfig is one `pool <slug> { ... }` block of the timeblock global options.
type PoolConfig struct {
	Slug               string            `json:"slug"`
	Model              string            `json:"model"`
	Name               string            `json:"name,omitempty"`
	Description        string            `json:"description,omitempty"`
	Status             string            `json:"status,omitempty"`
	Slots              int               `json:"slots,omitempty"`
	Blocks             map[string]string `json:"blocks,omitempty"` // block → monthly USD per seat
	AnnualDiscount     string            `json:"annual_discount,omitempty"`
	ManualProvisioning bool              `json:"manual_provisioning,omitempty"`
	MaxOutputTokens    int               `json:"max_output_tokens,omitempty"`
	// FundingGoal is the monthly amount (the sum of pledged monthly prices)
	// at which a funding pool moves to activating by itself; required with
	// status funding. FundingDeadline (RFC 3339) returns a funding pool
	// still below its goal to draft, its pledges released.
	FundingGoal     string `json:"funding_goal,omitempty"`
	FundingDeadline string `json:"funding_deadline,omitempty"`
	// MaxPledgeSeats is the most seats one user may pledge per block of a
	// funding pool; 0 (unset) is half of slots, at least 1
	// (accounts.PledgeSeatLimit).
	MaxPledgeSeats int `json:"max_pledge_seats,omitempty"`
}

func (p *PoolConfig) provision() {
	if p.Name == "" {
		p.Name = p.Model
	}
	if p.Status == "" {
		p.Status = accounts.PoolActive
	}
	if p.Slots == 0 {
		p.Slots = 1
	}
	if p.AnnualDiscount == "" {
		p.AnnualDiscount = "0"
	}
}

func (p *PoolConfig) validate() error {
	if p.Slug == "" {
		return errors.New("a pool needs a slug")
	}
	if p.Model == "" {
		return errors.New("model is required")
	}
	if err := accounts.CheckPoolStatus(p.Status); err != nil {
		return err
	}
	if p.Slots < 1 {
		return fmt.Errorf("slots must be at least 1, got %d", p.Slots)
	}
	if len(p.Blocks) == 0 {
		return errors.New("at least one block with a price is required, e.g. block europe 40")
	}
	for b, price := range p.Blocks {
		if err := accounts.CheckBlockName(b); err != nil {
			return err
		}
		if err := accounts.CheckBlockPrice(price); err != nil {
			return fmt.Errorf("block %s price: %w", b, err)
		}
	}
	if err := accounts.CheckAnnualDiscount(p.AnnualDiscount); err != nil {
		return fmt.Errorf("annual_discount: %w", err)
	}
	// A discount close to 1 can bring a year under the processor's minimum.
	for _, b := range accounts.Blocks {
		if price, ok := p.Blocks[string(b)]; ok {
			if err := accounts.CheckAnnualPrice(price, p.AnnualDiscount); err != nil {
				return fmt.Errorf("block %s price: %w", b, err)
			}
		}
	}
	if p.MaxOutputTokens < 0 {
		return fmt.Errorf("max_output_tokens must not be negative, got %d", p.MaxOutputTokens)
	}
	if p.FundingGoal != "" {
		if err := accounts.CheckFundingGoal(p.FundingGoal); err != nil {
			return fmt.Errorf("funding_goal: %w", err)
		}
	} else if p.Status == accounts.PoolFunding {
		return errors.New("status funding needs funding_goal <monthly amount>: the sum of pledged monthly prices at which the pool moves to activating")
	}
	if p.FundingDeadline != "" {
		if _, err := accounts.ParseFundingDeadline(p.FundingDeadline); err != nil {
			return fmt.Errorf("funding_deadline %w", err)
		}
	}
	if p.MaxPledgeSeats < 0 {
		return fmt.Errorf("max_pledge_seats must be a positive number of seats, got %d", p.MaxPledgeSeats)
	}
	if p.MaxPledgeSeats > p.Slots {
		return fmt.Errorf("max_pledge_seats %d is more than the pool's %d slots (seats per hour): one user can pledge at most every seat; use %d or fewer",
			p.MaxPledgeSeats, p.Slots, p.Slots)
	}
	return nil
}

// pool converts the configuration into the stored pool.
func (p *PoolConfig) pool(now time.Time) *accounts.Pool {
	prices := make(map[accounts.Block]string, len(p.Blocks))
	for b, price := range p.Blocks {
		prices[accounts.Block(b)] = price
	}
	var deadline time.Time
	if p.FundingDeadline != "" {
		deadline, _ = accounts.ParseFundingDeadline(p.FundingDeadline) // checked by validate
	}
	return &accounts.Pool{
		ID:                 uuid.NewSHA1(poolNamespace, []byte(p.Slug)).String(),
		Slug:               p.Slug,
		ModelID:            p.Model,
		ModelName:          p.Name,
		Description:        p.Description,
		Status:             p.Status,
		Slots:              p.Slots,
		BlockPrices:        prices,
		AnnualDiscount:     p.AnnualDiscount,
		ManualProvisioning: p.ManualProvisioning,
		MaxOutputTokens:    p.MaxOutputTokens,
		FundingGoal:        p.FundingGoal,
		FundingDeadline:    deadline.UTC(),
		MaxPledgeSeats:     p.MaxPledgeSeats,
		UpdatedAt:          now,
	}
}
