package caddymodule

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
)

// rejectReason labels timeblock_gate_rejections_total.
type rejectReason int

const (
	rejectMissingKey     rejectReason = iota // no credential at all
	rejectWrongKeyKind                       // a management key or session token
	rejectUnknownKey                         // no such consumption or combined key
	rejectKeyDenied                          // revoked, canceled, past due...
	rejectKeyCheckFailed                     // the store could not be asked
	rejectBadRequest                         // unreadable body, not JSON, no model
	rejectBodyTooLarge
	rejectModelNotHeld
	rejectWindowClosed
	rejectLanesFull
	rejectClientGone
	rejectUnknownEndpoint  // a path the gate does not serve (404)
	rejectMethodNotAllowed // a served path with the wrong method (405)
	rejectThrottled        // too many failed key checks from the address (429)
	rejectClusterDown      // a lane must come from a cluster this node cannot reach (503)
	numRejectReasons
)

var rejectReasonNames = [numRejectReasons]string{
	rejectMissingKey:     "missing_key",
	rejectWrongKeyKind:   "wrong_key_kind",
	rejectUnknownKey:     "unknown_key",
	rejectKeyDenied:      "key_denied",
	rejectKeyCheckFailed: "key_check_failed",
	rejectBadRequest:     "bad_request",
	rejectBodyTooLarge:   "body_too_large",
	rejectModelNotHeld:   "model_not_held",
	rejectWindowClosed:   "window_closed",
	rejectLanesFull:      "lanes_full",
	rejectClientGone:     "client_gone",

	rejectUnknownEndpoint:  "unknown_endpoint",
	rejectMethodNotAllowed: "method_not_allowed",
	rejectThrottled:        "throttled",
	rejectClusterDown:      "cluster_unavailable",
}

func (r rejectReason) String() string { return rejectReasonNames[r] }

// lanelessEndpoint labels timeblock_gate_laneless_total: requests the gate
// lets through, or answers itself, without taking a lane.
type lanelessEndpoint int

const (
	lanelessModels      lanelessEndpoint = iota // GET /v1/models and /v1/models/{id}
	lanelessCountTokens                         // POST /v1/messages/count_tokens
	lanelessKeyStatus                           // GET /v1/key
	lanelessKeyLanes                            // GET /v1/key/lanes
	numLanelessEndpoints
)

var lanelessNames = [numLanelessEndpoints]string{
	lanelessModels:      "models",
	lanelessCountTokens: "count_tokens",
	lanelessKeyStatus:   "key",
	lanelessKeyLanes:    "key_lanes",
}

// gateMetrics are built once per store with the rest of the gate state, so
// counters keep counting across config reloads; each config registers them
// in its own registry.
type gateMetrics struct {
	admissions *prometheus.CounterVec
	// laneSeconds adds up the time admitted requests held their lane, by
	// pool: its increase over an hour divided by 3600 is the pool's mean
	// occupancy in lanes over that hour.
	laneSeconds *prometheus.CounterVec
	rejections  [numRejectReasons]prometheus.Counter
	laneless    [numLanelessEndpoints]prometheus.Counter
	laneWait    prometheus.Histogram
	collectors  []prometheus.Collector
}

func newGateMetrics(s *gateState) *gateMetrics {
	const ns, sub = "timeblock", "gate"
	m := &gateMetrics{
		admissions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: ns, Subsystem: sub, Name: "admissions_total",
			Help: "Inference requests admitted, by pool.",
		}, []string{"pool"}),
		laneSeconds: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: ns, Subsystem: sub, Name: "lane_seconds_total",
			Help: "Seconds admitted requests held a lane, by pool; increase over an hour / 3600 is the mean lanes in use in that hour.",
		}, []string{"pool"}),
		laneWait: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: ns, Subsystem: sub, Name: "lane_wait_seconds",
			Help:    "Time requests waited for a free lane (0 when one was free), admitted or not.",
			Buckets: []float64{0.001, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30},
		}),
	}
	rejections := prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: ns, Subsystem: sub, Name: "rejections_total",
		Help: "Inference requests rejected by the gate, by reason.",
	}, []string{"reason"})
	for r := range numRejectReasons {
		m.rejections[r] = rejections.WithLabelValues(r.String())
	}
	laneless := prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: ns, Subsystem: sub, Name: "laneless_total",
		Help: "Requests passed without taking a lane, by endpoint: model lists (answered by the gate) and token counts.",
	}, []string{"endpoint"})
	for e := range numLanelessEndpoints {
		m.laneless[e] = laneless.WithLabelValues(lanelessNames[e])
	}
	m.collectors = []prometheus.Collector{m.admissions, m.laneSeconds, rejections, laneless, m.laneWait, gateCollector{s}, keyGuardCollector{s}}
	return m
}

// register adds the metrics to a config's registry. Several gates in one
// config share them, so "already registered" is fine.
func (m *gateMetrics) register(reg prometheus.Registerer) error {
	if reg == nil {
		return nil
	}
	for _, c := range m.collectors {
		if err := reg.Register(c); err != nil && !errors.As(err, &prometheus.AlreadyRegisteredError{}) {
			return err
		}
	}
	return nil
}

// gateCollector reads what the lane registry and the cache already count,
// at scrape time, so the request path pays nothing for these series. Until
// the state is open there is nothing to read.
type gateCollector struct{ s *gateState }

var (
	lanesInUseDesc = prometheus.NewDesc("timeblock_gate_lanes_in_use",
		"Requests in flight holding a lane, by pool.", []string{"pool"}, nil)
	cacheLookupsDesc = prometheus.NewDesc("timeblock_gate_key_cache_lookups_total",
		"Key lookups by result: hit (cached entitlement), negative_hit (cached unknown key), miss (loaded from the store).",
		[]string{"result"}, nil)
	cacheLoadsDesc = prometheus.NewDesc("timeblock_gate_key_cache_loads_total",
		"Entitlement loads from the store (concurrent misses of one key share one load).", nil, nil)
	cacheUnknownLoadsDesc = prometheus.NewDesc("timeblock_gate_key_cache_unknown_loads_total",
		"Entitlement loads that found no credential: an unknown key that reached the store (the filter of live keys was not loaded, or held a deleted key).", nil, nil)
	cacheLoadErrorsDesc = prometheus.NewDesc("timeblock_gate_key_cache_load_errors_total",
		"Entitlement loads that failed for a reason other than an unknown key.", nil, nil)
)

func (c gateCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- lanesInUseDesc
	ch <- cacheLookupsDesc
	ch <- cacheLoadsDesc
	ch <- cacheUnknownLoadsDesc
	ch <- cacheLoadErrorsDesc
}

func (c gateCollector) Collect(ch chan<- prometheus.Metric) {
	if !c.s.opened.Load() {
		return
	}
	for pool, n := range c.s.lanes.InUseByPool() {
		ch <- prometheus.MustNewConstMetric(lanesInUseDesc, prometheus.GaugeValue, float64(n), pool)
	}
	s := c.s.cache.Stats()
	ch <- prometheus.MustNewConstMetric(cacheLookupsDesc, prometheus.CounterValue, float64(s.Hits), "hit")
	ch <- prometheus.MustNewConstMetric(cacheLookupsDesc, prometheus.CounterValue, float64(s.NegativeHits), "negative_hit")
	ch <- prometheus.MustNewConstMetric(cacheLookupsDesc, prometheus.CounterValue, float64(s.Misses), "miss")
	ch <- prometheus.MustNewConstMetric(cacheLoadsDesc, prometheus.CounterValue, float64(s.Loads))
	ch <- prometheus.MustNewConstMetric(cacheUnknownLoadsDesc, prometheus.CounterValue, float64(s.UnknownLoads))
	ch <- prometheus.MustNewConstMetric(cacheLoadErrorsDesc, prometheus.CounterValue, float64(s.LoadErrors))
}
