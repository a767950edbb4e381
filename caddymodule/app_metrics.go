package caddymodule

// The funding metrics (accounts/funding.go): counters of pool moves and of
// pledges charged at activation, kept in the shared state so that they keep
// counting across reloads, and the funding figures of each pool read from
// the store at scrape time.

import (
	"context"
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/timeblock/timeblock/accounts"
)

// fundingMetrics implements accounts.FundingMetrics.
type fundingMetrics struct {
	moves   *prometheus.CounterVec
	charges *prometheus.CounterVec
}

func newFundingMetrics() *fundingMetrics {
	return &fundingMetrics{
		moves: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "timeblock", Subsystem: "pool", Name: "status_changes_total",
			Help: "Pool status changes, by pool, new status and what moved it (config, operator, goal reached, deadline passed); to=\"active\" counts activations.",
		}, []string{"pool", "to", "reason"}),
		charges: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "timeblock", Subsystem: "pool", Name: "pledge_charges_total",
			Help: "Pledges charged when their pool went live, by pool and outcome (paid, declined, error: retried with the same idempotency key).",
		}, []string{"pool", "outcome"}),
	}
}

func (m *fundingMetrics) PoolMoved(p *accounts.Pool, _, to, reason string) {
	m.moves.WithLabelValues(p.Slug, to, reason).Inc()
}

func (m *fundingMetrics) PledgeCharged(p *accounts.Pool, outcome string) {
	m.charges.WithLabelValues(p.Slug, outcome).Inc()
}

// register adds the counters and a collector of svc's funding figures to a
// config's registry.
func (m *fundingMetrics) register(reg prometheus.Registerer, svc *accounts.Service) error {
	if reg == nil {
		return nil
	}
	for _, c := range []prometheus.Collector{m.moves, m.charges, fundingCollector{svc}} {
		if err := reg.Register(c); err != nil && !errors.As(err, &prometheus.AlreadyRegisteredError{}) {
			return err
		}
	}
	return nil
}

var (
	pledgedAmountDesc = prometheus.NewDesc("timeblock_pool_pledged_amount",
		"Monthly amount pledged on the pool (sum of its pledges' monthly prices), in its currency.", []string{"pool"}, nil)
	pledgedSlotsDesc = prometheus.NewDesc("timeblock_pool_pledged_slots",
		"Hour slots held by the pool's pledges.", []string{"pool"}, nil)
	fundingGoalDesc = prometheus.NewDesc("timeblock_pool_funding_goal",
		"The pool's funding goal (monthly amount); absent when it has none.", []string{"pool"}, nil)
	poolStatusDesc = prometheus.NewDesc("timeblock_pool_status",
		"1 for the pool's current status.", []string{"pool", "status"}, nil)
)

// fundingCollector reads the funding figures at scrape time: one store
// read per scrape, none on any request path.
type fundingCollector struct{ svc *accounts.Service }

func (c fundingCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- pledgedAmountDesc
	ch <- pledgedSlotsDesc
	ch <- fundingGoalDesc
	ch <- poolStatusDesc
}

func (c fundingCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	figures, err := c.svc.FundingFigures(ctx)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(pledgedAmountDesc, err)
		return
	}
	for _, f := range figures {
		ch <- prometheus.MustNewConstMetric(pledgedAmountDesc, prometheus.GaugeValue, f.Pledged, f.Slug)
		ch <- prometheus.MustNewConstMetric(pledgedSlotsDesc, prometheus.GaugeValue, float64(f.Slots), f.Slug)
		if f.Goal > 0 {
			ch <- prometheus.MustNewConstMetric(fundingGoalDesc, prometheus.GaugeValue, f.Goal, f.Slug)
		}
		ch <- prometheus.MustNewConstMetric(poolStatusDesc, prometheus.GaugeValue, 1, f.Slug, f.Status)
	}
}
