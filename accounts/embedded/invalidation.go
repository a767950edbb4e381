package embedded

import (
	"context"
)

// PublishInvalidation calls the registered callbacks at once: on one node
// there is no one else to tell.
func (s *Store) PublishInvalidation(_ context.Context, userID string) error {
	s.callbacks.Call(userID)
	return nil
}

// OnInvalidation registers fn for every published invalidation.
func (s *Store) OnInvalidation(fn func(userID string)) (cancel func()) {
	return s.callbacks.Add(fn)
}
