package api

import (
	"sync"
	"time"
)

// windowLimiter allows limit events per key in each fixed window. It holds
// at most maxKeys keys: when full it forgets the keys whose window has ended,
// and if none has, all of them (a flood of new keys then costs the limiter
// its memory of old ones, never the node its memory).
type windowLimiter struct {
	limit   int
	window  time.Duration
	maxKeys int

	mu   sync.Mutex
	hits map[string]windowCount
}

type windowCount struct {
	start time.Time
	n     int
}

func newWindowLimiter(limit int, window time.Duration, maxKeys int) *windowLimiter {
	return &windowLimiter{limit: limit, window: window, maxKeys: maxKeys, hits: make(map[string]windowCount)}
}

// allow counts an event for key and returns 0, or how long until key may
// try again when it is over its limit (the event is then not counted).
func (l *windowLimiter) allow(key string, now time.Time) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	c, ok := l.hits[key]
	if !ok || now.Sub(c.start) >= l.window {
		if !ok && len(l.hits) >= l.maxKeys {
			l.forget(now)
		}
		c = windowCount{start: now}
	}
	if c.n >= l.limit {
		return c.start.Add(l.window).Sub(now)
	}
	c.n++
	l.hits[key] = c
	return 0
}

// forget drops the keys whose window has ended, or every key if none has.
func (l *windowLimiter) forget(now time.Time) {
	for k, c := range l.hits {
		if now.Sub(c.start) >= l.window {
			delete(l.hits, k)
		}
	}
	if len(l.hits) >= l.maxKeys {
		clear(l.hits)
	}
}
