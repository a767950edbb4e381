package accounts

import (
	"slices"
	"sync"
)

// InvalidateAll is the user id an invalidation callback receives when the
// store cannot tell whose keys changed (for instance notifications were lost
// while a listener reconnected): caches should drop everything.
const InvalidateAll = ""

// Listeners is the set of invalidation callbacks a Store keeps, called in
// registration order. The zero value is ready to use.
type Listeners struct {
	mu   sync.Mutex
	next uint64
	fns  []listener
}

type listener struct {
	id uint64
	fn func(userID string)
}

// Add registers fn; the returned func unregisters it.
func (l *Listeners) Add(fn func(userID string)) (cancel func()) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.next++
	id := l.next
	l.fns = append(l.fns, listener{id: id, fn: fn})
	return func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.fns = slices.DeleteFunc(l.fns, func(x listener) bool { return x.id == id })
	}
}

// Call calls every registered callback with userID, outside the lock so a
// callback may register or unregister others.
func (l *Listeners) Call(userID string) {
	l.mu.Lock()
	fns := slices.Clone(l.fns)
	l.mu.Unlock()
	for _, x := range fns {
		x.fn(userID)
	}
}
