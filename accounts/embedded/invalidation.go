package embedded

import (
	"context"
	"slices"
	"sync"
)

// PublishInvalidation calls the registered callbacks at once: on one node
// there is no one else to tell.
func (s *Store) PublishInvalidation(_ context.Context, userID string) error {
	s.callbacks.call(userID)
	return nil
}

// OnInvalidation registers fn for every published invalidation.
func (s *Store) OnInvalidation(fn func(userID string)) (cancel func()) {
	return s.callbacks.add(fn)
}

// callbacks is a set of invalidation callbacks, called in registration order.
type callbacks struct {
	mu   sync.Mutex
	next uint64
	fns  []callback
}

type callback struct {
	id uint64
	fn func(userID string)
}

func (c *callbacks) add(fn func(userID string)) (cancel func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.next++
	id := c.next
	c.fns = append(c.fns, callback{id: id, fn: fn})
	return func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		c.fns = slices.DeleteFunc(c.fns, func(cb callback) bool { return cb.id == id })
	}
}

func (c *callbacks) call(userID string) {
	c.mu.Lock()
	fns := slices.Clone(c.fns)
	c.mu.Unlock()
	for _, cb := range fns {
		cb.fn(userID)
	}
}
