package caddymodule

import (
	"context"
	"sync"

	"github.com/timeblock/timeblock/accounts"
)

// storeHandle is the account store as the service, the billing processor
// and the handlers hold it from Provision on: the store itself opens at the
// app's Start (shared.open), and a call before then waits for it, as a
// request may arrive before the timeblock app has started (Caddy starts
// apps in no fixed order).
type storeHandle struct {
	ready chan struct{} // closed once st or err is set
	st    accounts.Store
	err   error
}

func newStoreHandle() *storeHandle { return &storeHandle{ready: make(chan struct{})} }

// settle ends the wait: st is the open store, or err says why there is none.
func (h *storeHandle) settle(st accounts.Store, err error) {
	h.st, h.err = st, err
	close(h.ready)
}

// open waits for the store. Once it is open, that costs a receive from a
// closed channel, without a lock.
func (h *storeHandle) open(ctx context.Context) (accounts.Store, error) {
	select {
	case <-h.ready:
	default:
		select {
		case <-h.ready:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	if h.err != nil {
		return nil, errStoreNotOpen{h.err}
	}
	return h.st, nil
}

// Update implements accounts.Store.
func (h *storeHandle) Update(ctx context.Context, fn func(tx accounts.Tx) error) error {
	st, err := h.open(ctx)
	if err != nil {
		return err
	}
	return st.Update(ctx, fn)
}

// View implements accounts.Store.
func (h *storeHandle) View(ctx context.Context, fn func(tx accounts.Tx) error) error {
	st, err := h.open(ctx)
	if err != nil {
		return err
	}
	return st.View(ctx, fn)
}

// TouchLastUsed implements accounts.Store.
func (h *storeHandle) TouchLastUsed(ctx context.Context, batch accounts.LastUsedBatch) error {
	st, err := h.open(ctx)
	if err != nil {
		return err
	}
	return st.TouchLastUsed(ctx, batch)
}

// PublishInvalidation implements accounts.Store.
func (h *storeHandle) PublishInvalidation(ctx context.Context, userID string) error {
	st, err := h.open(ctx)
	if err != nil {
		return err
	}
	return st.PublishInvalidation(ctx, userID)
}

// OnInvalidation implements accounts.Store: on the open store, or, before
// it opens, as soon as it does.
func (h *storeHandle) OnInvalidation(fn func(userID string)) (cancel func()) {
	select {
	case <-h.ready:
		if h.st == nil {
			return func() {}
		}
		return h.st.OnInvalidation(fn)
	default:
	}
	var (
		mu       sync.Mutex
		stop     func()
		canceled = make(chan struct{})
	)
	go func() {
		select {
		case <-h.ready:
		case <-canceled:
			return
		}
		mu.Lock()
		defer mu.Unlock()
		select {
		case <-canceled:
		default:
			if h.st != nil {
				stop = h.st.OnInvalidation(fn)
			}
		}
	}()
	return sync.OnceFunc(func() {
		mu.Lock()
		defer mu.Unlock()
		close(canceled)
		if stop != nil {
			stop()
		}
	})
}

// Close closes the store if it was opened.
func (h *storeHandle) Close() error {
	select {
	case <-h.ready:
		if h.st != nil {
			return h.st.Close()
		}
	default:
	}
	return nil
}

// errStoreNotOpen is what a call on a store that failed to open returns.
type errStoreNotOpen struct{ err error }

func (e errStoreNotOpen) Error() string { return "the account store is not open: " + e.err.Error() }
func (e errStoreNotOpen) Unwrap() error { return e.err }

var (
	_ accounts.Store = (*storeHandle)(nil)
	_ error          = errStoreNotOpen{}
)
