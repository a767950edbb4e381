package accounts

// Pools as the account API shows them: the list of active pools, one pool
// with its hour slots, and the purchase terms.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"time"
)

// PoolView is a pool as GET /api/pools lists it.
type PoolView struct {
	ID          string `json:"id"`
	Slug        string `json:"slug"`
	ModelID     string `json:"modelId"`
	ModelName   string `json:"modelName"`
	Description string `json:"description"`
	Status      string `json:"status"`
	// TotalSlots counts hour slots: seats per hour × hours of the blocks sold,
	// which is the length of hourSlots on the detail.
	TotalSlots         int         `json:"totalSlots"`
	SeatsPerHour       int         `json:"seatsPerHour"`
	MinPricePerDay     string      `json:"minPricePerDay"`
	ManualProvisioning bool        `json:"manualProvisioning"`
	AnnualDiscount     json.Number `json:"annualDiscount"`
	MaxOutputTokens    int         `json:"maxOutputTokens"`
	Blocks             []BlockView `json:"blocks"`
	// Funding (funding.go): the goal ("0" when the pool has none), the sum
	// of the pledges' monthly prices, the deadline (null: none) and the
	// hour slots pledges hold.
	FundingGoal     string     `json:"fundingGoal"`
	FundingPledged  string     `json:"fundingPledged"`
	FundingDeadline *time.Time `json:"fundingDeadline"`
	PledgedSlots    int        `json:"pledgedSlots"`
}

// BlockView is one block a pool sells.
type BlockView struct {
	Block        Block  `json:"block"`
	StartHour    int    `json:"startHour"` // first UTC hour
	EndHour      int    `json:"endHour"`   // last UTC hour (inclusive)
	MonthlyPrice string `json:"monthlyPrice"`
	PricePerDay  string `json:"pricePerDay"`
}

// PoolDetail is a pool with its hour slots (GET /api/pools/:id).
type PoolDetail struct {
	PoolView
	HourSlots []HourSlot `json:"hourSlots"`
}

// Hour slot statuses.
const (
	SlotAvailable = "available"
	SlotTaken     = "taken"
)

// HourSlot is one hour of one seat.
type HourSlot struct {
	ID          string `json:"id"`
	Hour        int    `json:"hour"`
	SlotIndex   int    `json:"slotIndex"`
	PricePerDay string `json:"pricePerDay"`
	Status      string `json:"status"`
}

// Terms are the purchase terms a subscriber acknowledges (GET /api/pools/disclosure).
type Terms struct {
	Version       string   `json:"version"`
	Bullets       []string `json:"bullets"`
	CheckboxLabel string   `json:"checkboxLabel"`
	TermsURL      string   `json:"termsUrl"`
}

// defaultTermsVersion is the terms version when the configuration sets none.
const defaultTermsVersion = "1"

// currentTermsVersion is the version subscribers must acknowledge.
func (s *Service) currentTermsVersion() string {
	if s.termsVersion == "" {
		return defaultTermsVersion
	}
	return s.termsVersion
}

// Terms returns the current purchase terms. They need no credentials.
func (s *Service) Terms() Terms {
	return Terms{
		Version: s.currentTermsVersion(),
		Bullets: []string{
			"You buy seats in UTC time blocks (asia 00:00-07:59, europe 08:00-15:59, americas 16:00-23:59). A key admits one simultaneous request per seat, only during the hours you hold.",
			"Usage inside your hours is unlimited: no token caps and no token counting.",
			"Your card is charged immediately, and again at the start of every billing period (monthly, or yearly up front with the pool's annual discount) until you cancel.",
			"Canceling stops renewal at the end of the current period; the key works until then. Unused time is not refunded.",
			"If a renewal payment fails the key is suspended until a working card is saved; after the grace period the subscription is canceled and its seats are freed.",
			"On pools with manual provisioning the key is delivered by the operator, usually within hours and always within 24 hours; you are notified when it is ready.",
		},
		CheckboxLabel: "I have read and accept the purchase terms",
		TermsURL:      "/terms",
	}
}

// ListPools returns the listed pools (every status but draft), in slug
// order, with their funding figures.
func (s *Service) ListPools(ctx context.Context) ([]PoolView, error) {
	var views []PoolView
	err := s.store.View(ctx, func(tx Tx) error {
		views = views[:0]
		pools, err := tx.ListPools()
		if err != nil {
			return err
		}
		sort.Slice(pools, func(i, j int) bool { return pools[i].Slug < pools[j].Slug })
		for _, p := range pools {
			if p.Status == PoolDraft {
				continue
			}
			v := poolView(p)
			if p.Status != PoolActive && p.Status != PoolPaused || p.FundingGoal != "" {
				f, err := fundingTx(tx, p.ID)
				if err != nil {
					return err
				}
				f.fill(&v)
			}
			views = append(views, v)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list pools: %w", err)
	}
	return views, nil
}

// GetPool returns a pool by UUID or slug with its hour slots. Draft pools
// are not visible (404).
func (s *Service) GetPool(ctx context.Context, idOrSlug string) (*PoolDetail, error) {
	var (
		p     *Pool
		taken map[Seat]string
		f     funding
	)
	err := s.store.View(ctx, func(tx Tx) error {
		var err error
		if p, err = findPoolTx(tx, idOrSlug); err != nil {
			return err
		}
		if taken, err = tx.TakenSeats(p.ID); err != nil {
			return err
		}
		f, err = fundingTx(tx, p.ID)
		return err
	})
	if err != nil {
		return nil, poolError(idOrSlug, err)
	}
	d := &PoolDetail{PoolView: poolView(p), HourSlots: make([]HourSlot, 0, hourSlotCount(p))}
	f.fill(&d.PoolView)
	for _, b := range Blocks {
		ppd, err := PricePerDay(p, b)
		if err != nil {
			continue // block not sold
		}
		first := b.FirstHour()
		for h := first; h < first+HoursPerBlock; h++ {
			for i := 0; i < p.Slots; i++ {
				status := SlotAvailable
				if _, ok := taken[Seat{Hour: h, SlotIndex: i}]; ok {
					status = SlotTaken
				}
				d.HourSlots = append(d.HourSlots, HourSlot{
					ID:          slotID(p.ID, h, i),
					Hour:        h,
					SlotIndex:   i,
					PricePerDay: ppd,
					Status:      status,
				})
			}
		}
	}
	return d, nil
}

// hourSlotCount is the number of hour slots a pool has.
func hourSlotCount(p *Pool) int { return len(poolBlocks(p)) * HoursPerBlock * p.Slots }

// slotID names one hour slot of a pool.
func slotID(poolID string, hour, slot int) string {
	return fmt.Sprintf("%s:%d:%d", poolID, hour, slot)
}

// poolBlocks lists the blocks the pool sells, in hour order.
func poolBlocks(p *Pool) []Block {
	var bs []Block
	for _, b := range Blocks {
		if _, ok := p.BlockPrices[b]; ok {
			bs = append(bs, b)
		}
	}
	return bs
}

func poolView(p *Pool) PoolView {
	v := PoolView{
		ID:                 p.ID,
		Slug:               p.Slug,
		ModelID:            p.ModelID,
		ModelName:          p.ModelName,
		Description:        p.Description,
		Status:             p.Status,
		TotalSlots:         hourSlotCount(p),
		SeatsPerHour:       p.Slots,
		MinPricePerDay:     MinPricePerDay(p),
		ManualProvisioning: p.ManualProvisioning,
		AnnualDiscount:     json.Number(canonicalAmount(orZero(p.AnnualDiscount))),
		MaxOutputTokens:    p.MaxOutputTokens,
		Blocks:             []BlockView{},
		FundingGoal:        canonicalAmount(orZero(p.FundingGoal)),
		FundingPledged:     "0",
	}
	if !p.FundingDeadline.IsZero() {
		d := p.FundingDeadline
		v.FundingDeadline = &d
	}
	for _, b := range poolBlocks(p) {
		ppd, err := PricePerDay(p, b)
		if err != nil {
			continue
		}
		v.Blocks = append(v.Blocks, BlockView{
			Block:        b,
			StartHour:    b.FirstHour(),
			EndHour:      b.FirstHour() + HoursPerBlock - 1,
			MonthlyPrice: canonicalAmount(p.BlockPrices[b]),
			PricePerDay:  ppd,
		})
	}
	return v
}

func orZero(s string) string {
	if s == "" {
		return "0"
	}
	return s
}

// findPoolTx finds a visible (non-draft) pool by UUID or slug.
func findPoolTx(tx Tx, idOrSlug string) (*Pool, error) {
	p, err := tx.GetPool(idOrSlug)
	if errors.Is(err, ErrNotFound) {
		p, err = tx.GetPoolBySlug(idOrSlug)
	}
	if err != nil {
		return nil, err
	}
	if p.Status == PoolDraft {
		return nil, ErrNotFound
	}
	return p, nil
}

// poolError maps a pool lookup failure to the API's answer.
func poolError(idOrSlug string, err error) error {
	if errors.Is(err, ErrNotFound) {
		return NotFound("no pool %q; list the pools with GET /api/pools", idOrSlug)
	}
	return fmt.Errorf("pool %s: %w", idOrSlug, err)
}

// PoolID returns the id of the pool named by id or slug, or the name as
// given when no listed pool has it (what a purchase's fingerprint names).
func (s *Service) PoolID(ctx context.Context, idOrSlug string) string {
	id := idOrSlug
	_ = s.store.View(ctx, func(tx Tx) error {
		if p, err := findPoolTx(tx, idOrSlug); err == nil {
			id = p.ID
		}
		return nil
	})
	return id
}
