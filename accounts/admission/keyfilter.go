package admission

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/timeblock/timeblock/accounts"
)

// HashLister lists the lookup hashes (accounts.HashKey, hex) of the
// consumption keys and combined keys of one user, or of every user when
// userID is accounts.InvalidateAll.
type HashLister func(ctx context.Context, userID string) ([]string, error)

// StoreHashes lists hashes with accounts.Tx.ListCredentialHashes in a View.
func StoreHashes(st accounts.Store) HashLister {
	return func(ctx context.Context, userID string) ([]string, error) {
		var hashes []string
		err := st.View(ctx, func(tx accounts.Tx) (err error) {
			hashes, err = tx.ListCredentialHashes(userID)
			return err
		})
		return hashes, err
	}
}

// FilterConfig tunes a KeyFilter; the zero value gives the defaults.
type FilterConfig struct {
	// Rebuild is how often the whole set is read again, so that deleted and
	// re-keyed credentials leave it (default 5m). Invalidations only add.
	Rebuild time.Duration
	// LoadTimeout bounds one read of the store (default 30s).
	LoadTimeout time.Duration
	// RetryMax caps the wait between attempts after a failed read (default
	// 30s; the first retry comes after 1s, then doubling).
	RetryMax time.Duration
	// MaxPendingUsers is how many distinct users' invalidations are queued
	// before the filter reads everything instead (default 1 000).
	MaxPendingUsers int
	Logger          *zap.Logger
}

// KeyFilter is the set of every credential the store holds, kept in memory
// as the first 64 bits of each hash (8 bytes a key, plus the map's
// overhead), so that a guessed key is refused without a store read. It
// answers "maybe" (pass on to the store) for every key it holds, and for
// every key while it is not loaded or after a read failed; "no" only when
// it is loaded, current and the key is absent.
//
// It is kept current by Invalidate, which the caller wires to the store's
// invalidations: a user id reads that user's hashes again, InvalidateAll
// everything. Invalidate returns at once; until the read it queued has been
// applied, a lookup that misses the set waits for it rather than answer
// "no", so a key whose creation was announced before the request arrived
// is always found. A key made on another node whose announcement has not
// arrived yet gets "no"; the cache loads it anyway when its tag is valid
// (TagChecker), so that case does not depend on timing.
type KeyFilter struct {
	list HashLister
	cfg  FilterConfig

	mu  sync.RWMutex
	set map[uint64]struct{}
	// ready: a full read has succeeded and no read failed since; when false
	// every lookup passes.
	ready bool
	// requested counts invalidations; applied is the requested count the
	// latest applied read covers. changed is closed (and replaced) whenever
	// applied moves.
	requested, applied uint64
	changed            chan struct{}
	pendingUsers       map[string]struct{}
	pendingAll         bool

	wake chan struct{}
	stop chan struct{}
	done chan struct{}

	// rejects and tagged are counted by the cache, which has the last word
	// on a "no" (a key's tag may vouch for it).
	rejects, tagged, waits, reads, readErrors atomic.Uint64
	size                                      atomic.Int64
	closeOnce                                 sync.Once
}

// NewKeyFilter starts a filter with an empty, not ready set and reads the
// store in the background; WaitReady waits for the first read. Close stops it.
func NewKeyFilter(list HashLister, cfg FilterConfig) *KeyFilter {
	if cfg.Rebuild <= 0 {
		cfg.Rebuild = 5 * time.Minute
	}
	if cfg.LoadTimeout <= 0 {
		cfg.LoadTimeout = 30 * time.Second
	}
	if cfg.RetryMax <= 0 {
		cfg.RetryMax = 30 * time.Second
	}
	if cfg.MaxPendingUsers <= 0 {
		cfg.MaxPendingUsers = 1000
	}
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	f := &KeyFilter{
		list:         list,
		cfg:          cfg,
		set:          make(map[uint64]struct{}),
		changed:      make(chan struct{}),
		pendingUsers: make(map[string]struct{}),
		pendingAll:   true,
		requested:    1,
		wake:         make(chan struct{}, 1),
		stop:         make(chan struct{}),
		done:         make(chan struct{}),
	}
	go f.run()
	return f
}

// Invalidate queues a read of the user's hashes (of all, for
// accounts.InvalidateAll). It does not block; lookups that miss the set
// wait until the read has been applied.
func (f *KeyFilter) Invalidate(userID string) {
	f.mu.Lock()
	f.requested++
	switch {
	case userID == accounts.InvalidateAll || len(f.pendingUsers) >= f.cfg.MaxPendingUsers:
		f.pendingAll = true
		clear(f.pendingUsers)
	case !f.pendingAll:
		f.pendingUsers[userID] = struct{}{}
	}
	f.mu.Unlock()
	f.poke()
}

func (f *KeyFilter) poke() {
	select {
	case f.wake <- struct{}{}:
	default:
	}
}

// mayExist reports whether the credential whose SHA-256 starts with k (as
// a little-endian uint64) may be in the store. It returns ctx's error when
// ctx ends while it waits for a queued read. A "no" is not counted here:
// the caller counts a reject or a tagged key.
func (f *KeyFilter) mayExist(ctx context.Context, k uint64) (bool, error) {
	f.mu.RLock()
	// A read queued before this request may bring the key: wait for the
	// reads covering every invalidation so far, not for later ones.
	target := f.requested
	for waited := false; ; waited = true {
		if !f.ready {
			f.mu.RUnlock()
			return true, nil
		}
		if _, ok := f.set[k]; ok {
			f.mu.RUnlock()
			return true, nil
		}
		if f.applied >= target {
			f.mu.RUnlock()
			return false, nil
		}
		if !waited {
			f.waits.Add(1)
		}
		ch := f.changed
		f.mu.RUnlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return false, ctx.Err()
		case <-f.stop:
			return true, nil
		}
		f.mu.RLock()
	}
}

// WaitReady waits until the first full read has been applied (true) or
// ctx ends (false).
func (f *KeyFilter) WaitReady(ctx context.Context) bool {
	for {
		f.mu.RLock()
		ready, ch := f.ready, f.changed
		f.mu.RUnlock()
		if ready {
			return true
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return false
		case <-f.stop:
			return false
		}
	}
}

// run applies queued reads one at a time, rebuilds the set every
// cfg.Rebuild and retries failed reads with backoff.
func (f *KeyFilter) run() {
	defer close(f.done)
	rebuild := time.NewTicker(f.cfg.Rebuild)
	defer rebuild.Stop()
	retry := time.NewTimer(0)
	if !retry.Stop() {
		<-retry.C
	}
	backoff := time.Second
	for {
		if failed := f.apply(); failed {
			retry.Reset(backoff)
			backoff = min(2*backoff, f.cfg.RetryMax)
		} else {
			backoff = time.Second
		}
		select {
		case <-f.stop:
			return
		case <-f.wake:
		case <-retry.C:
		case <-rebuild.C:
			// Not counted in requested: lookups do not wait for a rebuild,
			// which removes keys and adds none that an invalidation missed.
			f.mu.Lock()
			f.pendingAll = true
			f.mu.Unlock()
		}
	}
}

// apply performs what is queued and reports whether a read failed (the
// filter is then not ready, and a full read is queued).
func (f *KeyFilter) apply() (failed bool) {
	f.mu.Lock()
	all, users, gen := f.pendingAll, f.pendingUsers, f.requested
	if !all && len(users) == 0 {
		f.mu.Unlock()
		return false
	}
	f.pendingAll, f.pendingUsers = false, make(map[string]struct{})
	f.mu.Unlock()

	// Every invalidation counted in gen was published after the change it
	// announces committed, so a read started now sees the change.
	var fresh map[uint64]struct{}
	var added []uint64
	var err error
	if all {
		fresh, err = f.read(accounts.InvalidateAll)
	} else {
		for u := range users {
			var hashes map[uint64]struct{}
			if hashes, err = f.read(u); err != nil {
				break
			}
			for k := range hashes {
				added = append(added, k)
			}
		}
	}

	f.mu.Lock()
	switch {
	case err != nil:
		f.ready = false
		f.pendingAll = true
		f.cfg.Logger.Warn("reading credential hashes failed; every key is looked up in the store until a read succeeds",
			zap.Error(err))
	case all:
		f.set, f.ready = fresh, true
	default:
		for _, k := range added {
			f.set[k] = struct{}{}
		}
	}
	f.size.Store(int64(len(f.set)))
	if gen > f.applied {
		f.applied = gen
	}
	close(f.changed)
	f.changed = make(chan struct{})
	f.mu.Unlock()
	return err != nil
}

// read lists the hashes of userID (all for InvalidateAll) into a set.
func (f *KeyFilter) read(userID string) (map[uint64]struct{}, error) {
	f.reads.Add(1)
	ctx, cancel := context.WithTimeout(context.Background(), f.cfg.LoadTimeout)
	defer cancel()
	hashes, err := f.list(ctx, userID)
	if err != nil {
		f.readErrors.Add(1)
		return nil, fmt.Errorf("credential hashes: %w", err)
	}
	set := make(map[uint64]struct{}, len(hashes))
	for _, h := range hashes {
		k, ok := filterKey(h)
		if !ok {
			// Not a hash HashKey makes: the filter cannot tell such a
			// credential from a guess, so it must not say "no" to anyone.
			f.readErrors.Add(1)
			return nil, fmt.Errorf("credential hashes: %q is not a hex SHA-256", h)
		}
		set[k] = struct{}{}
	}
	return set, nil
}

// filterKey is the set's key of a hex lookup hash: its first 8 bytes as a
// little-endian uint64, the same bits Cache.Lookup keys entries by.
func filterKey(hash string) (uint64, bool) {
	var b [8]byte
	if len(hash) != 64 {
		return 0, false
	}
	if _, err := hex.Decode(b[:], []byte(hash[:16])); err != nil {
		return 0, false
	}
	return binary.LittleEndian.Uint64(b[:]), true
}

// FilterStats are the filter's counts since it was built.
type FilterStats struct {
	Keys       int64  // hashes held now
	Ready      bool   // loaded and current: lookups of absent keys are refused
	Rejects    uint64 // lookups refused without a store read
	Tagged     uint64 // lookups of keys the set lacks, loaded because their tag is valid (made on another node a moment ago)
	Waits      uint64 // lookups that waited for a queued read
	Reads      uint64 // reads of the store (one user or all)
	ReadErrors uint64 // reads that failed
}

// Stats returns the counts so far.
func (f *KeyFilter) Stats() FilterStats {
	f.mu.RLock()
	ready := f.ready
	f.mu.RUnlock()
	return FilterStats{
		Keys:       f.size.Load(),
		Ready:      ready,
		Rejects:    f.rejects.Load(),
		Tagged:     f.tagged.Load(),
		Waits:      f.waits.Load(),
		Reads:      f.reads.Load(),
		ReadErrors: f.readErrors.Load(),
	}
}

// Close stops the background reads. Lookups after Close pass. It is safe
// to call more than once.
func (f *KeyFilter) Close() {
	f.closeOnce.Do(func() {
		close(f.stop)
		<-f.done
		f.mu.Lock()
		f.ready = false
		f.mu.Unlock()
	})
}
