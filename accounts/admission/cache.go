package admission

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/dgraph-io/ristretto/v2"

	"github.com/timeblock/timeblock/accounts"
)

// ErrUnknownKey means no consumption key or combined key has this value.
var ErrUnknownKey = errors.New("unknown API key")

// Source loads the entitlement of a credential by its lookup hash
// (accounts.HashKey) and returns accounts.ErrNotFound for an unknown hash.
// *accounts.Service satisfies it, and TagChecker too.
type Source interface {
	Entitlement(ctx context.Context, keyHash string) (*accounts.Entitlement, error)
}

// TagChecker is a Source that can tell a key it issued from a guess without
// reading the store: keys carry a MAC under the operator's secret
// (accounts.KeyTags). A key the filter of live keys does not hold but whose
// tag is valid is loaded rather than refused, so a key made on another node
// works here before this node's filter hears of it. Keys without a tag (made
// before tags, or guessed) get the filter's answer alone.
type TagChecker interface {
	ValidKeyTag(key string) bool
}

// CacheConfig tunes a Cache; the zero value gives the defaults.
type CacheConfig struct {
	// MaxEntries bounds the entitlements kept (default 100 000).
	MaxEntries int64
	// TTL is the backstop: an entry is reloaded at least this often even when
	// an invalidation was missed (default 30s). Entries never outlive the
	// entitlement's ValidUntil either.
	TTL time.Duration
	// MaxNegative bounds the unknown hashes remembered (default 10 000), and
	// NegativeTTL is how long each is (default 10s). A client retrying a
	// wrong key needs one entry; random keys miss whatever the size, so a
	// larger bound buys nothing but fixed memory (ristretto keeps about 40
	// bytes of counters per entry of the bound: 3.6 MB at 100 000).
	MaxNegative int64
	NegativeTTL time.Duration
	// LoadTimeout bounds one load from the Source (default 10s).
	LoadTimeout time.Duration
	// Now is the clock (default time.Now).
	Now func() time.Time
	// Filter, when set, is asked after a miss and before any load: a key it
	// does not hold is unknown without a store read (see KeyFilter), unless
	// the Source is a TagChecker vouching for it. The cache does not own it.
	Filter *KeyFilter
}

// Cache maps credentials to entitlements. Lookups that hit allocate nothing;
// concurrent misses for one credential share one load; unknown credentials
// are remembered for a short while so that a client retrying a wrong key does
// not reach the store on every request.
//
// Entries are keyed by the SHA-256 of the credential, never the credential
// itself. Invalidation is by user: InvalidateUser makes every entry of the
// user stale at once (each entry records the invalidation epoch it was loaded
// in and points at its user's last invalidation), so the next request reloads.
type Cache struct {
	cfg      CacheConfig
	entries  *ristretto.Cache[uint64, *entry]
	negative *ristretto.Cache[uint64, negativeEntry]

	// epoch counts invalidations. usersMu guards users and orders
	// invalidations against loads finishing.
	epoch   atomic.Uint64
	usersMu sync.Mutex
	users   map[string]*userState

	flightsMu sync.Mutex
	flights   map[[sha256.Size]byte]*flight

	hits, misses, negativeHits, loads, unknownLoads, loadErrors atomic.Uint64

	stop      chan struct{}
	done      chan struct{}
	closeOnce sync.Once
}

type entry struct {
	digest  [sha256.Size]byte
	ent     *accounts.Entitlement
	user    *userState
	epoch   uint64 // the invalidation epoch when the load started
	expires time.Time
}

type negativeEntry struct {
	digest  [sha256.Size]byte
	expires time.Time
}

type userState struct {
	invalidated atomic.Uint64 // epoch of the user's latest invalidation
	lastLoad    int64         // unix nanoseconds; guarded by Cache.usersMu
}

type flight struct {
	done chan struct{}
	ent  *accounts.Entitlement
	err  error
}

// NewCache builds a cache and starts its janitor; Close stops it.
func NewCache(cfg CacheConfig) (*Cache, error) {
	if cfg.MaxEntries <= 0 {
		cfg.MaxEntries = 100_000
	}
	if cfg.TTL <= 0 {
		cfg.TTL = 30 * time.Second
	}
	if cfg.MaxNegative <= 0 {
		cfg.MaxNegative = 10_000
	}
	if cfg.NegativeTTL <= 0 {
		cfg.NegativeTTL = 10 * time.Second
	}
	if cfg.LoadTimeout <= 0 {
		cfg.LoadTimeout = 10 * time.Second
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	// The ristretto key is the first 64 bits of the digest; the entry keeps
	// the whole digest and a lookup compares it, so two credentials sharing
	// those bits only evict each other.
	identity := func(k uint64) (uint64, uint64) { return k, 0 }
	entries, err := ristretto.NewCache(&ristretto.Config[uint64, *entry]{
		NumCounters:        cfg.MaxEntries * 10,
		MaxCost:            cfg.MaxEntries,
		BufferItems:        64,
		IgnoreInternalCost: true,
		KeyToHash:          identity,
	})
	if err != nil {
		return nil, fmt.Errorf("entitlement cache: %w", err)
	}
	negative, err := ristretto.NewCache(&ristretto.Config[uint64, negativeEntry]{
		NumCounters:        cfg.MaxNegative * 10,
		MaxCost:            cfg.MaxNegative,
		BufferItems:        64,
		IgnoreInternalCost: true,
		KeyToHash:          identity,
	})
	if err != nil {
		entries.Close()
		return nil, fmt.Errorf("negative key cache: %w", err)
	}
	c := &Cache{
		cfg:      cfg,
		entries:  entries,
		negative: negative,
		users:    make(map[string]*userState),
		flights:  make(map[[sha256.Size]byte]*flight),
		stop:     make(chan struct{}),
		done:     make(chan struct{}),
	}
	go c.janitor()
	return c, nil
}

// Lookup returns the entitlement of the credential key at now (the caller's
// clock reading, shared with the rest of the request), loading it from src
// on a miss. It returns ErrUnknownKey for a credential that does not exist,
// ctx's error when ctx ends while waiting for a load, and any other error
// from src wrapped.
func (c *Cache) Lookup(ctx context.Context, key string, now time.Time, src Source) (*accounts.Entitlement, error) {
	digest := sha256.Sum256(unsafe.Slice(unsafe.StringData(key), len(key)))
	k := binary.LittleEndian.Uint64(digest[:8])
	if e, ok := c.entries.Get(k); ok && e.digest == digest && now.Before(e.expires) &&
		e.user.invalidated.Load() <= e.epoch {
		c.hits.Add(1)
		return e.ent, nil
	}
	if n, ok := c.negative.Get(k); ok && n.digest == digest && now.Before(n.expires) {
		c.negativeHits.Add(1)
		return nil, ErrUnknownKey
	}
	if c.cfg.Filter != nil {
		ok, err := c.cfg.Filter.mayExist(ctx, k)
		if err != nil {
			return nil, err
		}
		if !ok {
			// Checked only on the filter's "no" (guesses, and keys made on
			// another node a moment ago), so known keys never pay for it.
			if !validTag(src, key) {
				c.cfg.Filter.rejects.Add(1)
				return nil, ErrUnknownKey
			}
			c.cfg.Filter.tagged.Add(1)
		}
	}
	c.misses.Add(1)

	c.flightsMu.Lock()
	f := c.flights[digest]
	if f == nil {
		f = &flight{done: make(chan struct{})}
		c.flights[digest] = f
		// The load runs on its own: a caller that gives up does not fail the
		// others waiting for the same key.
		go c.fill(key, digest, src, f)
	}
	c.flightsMu.Unlock()
	select {
	case <-f.done:
		return f.ent, f.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// validTag reports whether src vouches for key by its tag (TagChecker).
func validTag(src Source, key string) bool {
	tc, ok := src.(TagChecker)
	return ok && tc.ValidKeyTag(key)
}

func (c *Cache) fill(key string, digest [sha256.Size]byte, src Source, f *flight) {
	k := binary.LittleEndian.Uint64(digest[:8])
	defer func() {
		if r := recover(); r != nil {
			f.ent, f.err = nil, fmt.Errorf("loading entitlement: panic: %v", r)
		}
		c.flightsMu.Lock()
		delete(c.flights, digest)
		c.flightsMu.Unlock()
		close(f.done)
	}()
	c.loads.Add(1)
	epoch := c.epoch.Load()
	ctx, cancel := context.WithTimeout(context.Background(), c.cfg.LoadTimeout)
	defer cancel()
	ent, err := src.Entitlement(ctx, accounts.HashKey(key))
	now := c.cfg.Now()
	switch {
	case errors.Is(err, accounts.ErrNotFound):
		c.unknownLoads.Add(1)
		f.err = ErrUnknownKey
		c.negative.SetWithTTL(k, negativeEntry{digest: digest, expires: now.Add(c.cfg.NegativeTTL)}, 1, c.cfg.NegativeTTL)
		c.negative.Wait()
		return
	case err != nil:
		c.loadErrors.Add(1)
		f.err = fmt.Errorf("loading entitlement: %w", err)
		return
	case ent == nil:
		c.loadErrors.Add(1)
		f.err = errors.New("loading entitlement: the source returned none")
		return
	}
	f.ent = ent

	expires := now.Add(c.cfg.TTL)
	if !ent.ValidUntil.IsZero() && ent.ValidUntil.Before(expires) {
		expires = ent.ValidUntil
	}
	if !expires.After(now) {
		return
	}
	c.usersMu.Lock()
	us := c.users[ent.UserID]
	switch {
	case us == nil && c.epoch.Load() != epoch:
		// Some user was invalidated during the load and this one had no state
		// to record it in: it may have been this user. Serve, do not cache.
		c.usersMu.Unlock()
		return
	case us == nil:
		us = new(userState)
		c.users[ent.UserID] = us
	case us.invalidated.Load() > epoch:
		c.usersMu.Unlock()
		return
	}
	us.lastLoad = now.UnixNano()
	c.usersMu.Unlock()
	// No ristretto TTL: the entry carries its expiry, checked on every hit
	// against the caller's clock reading, which spares the hit path a clock
	// read of its own. Expired entries are replaced by the next load or
	// evicted under the MaxEntries bound.
	c.entries.Set(k, &entry{digest: digest, ent: ent, user: us, epoch: epoch, expires: expires}, 1)
	// Ristretto applies sets asynchronously; waiting here, before the flight
	// ends, means a request arriving after the flight finds the entry
	// instead of starting a second load.
	c.entries.Wait()
}

// InvalidateUser makes every cached entitlement of the user stale, including
// one being loaded right now; the next lookup of each reloads it.
// accounts.InvalidateAll makes every entitlement stale.
func (c *Cache) InvalidateUser(userID string) {
	c.usersMu.Lock()
	e := c.epoch.Add(1)
	if userID == accounts.InvalidateAll {
		for _, us := range c.users {
			us.invalidated.Store(e)
		}
	} else if us := c.users[userID]; us != nil {
		us.invalidated.Store(e)
	}
	c.usersMu.Unlock()
}

// CacheStats are cumulative counts since the cache was built.
type CacheStats struct {
	Hits         uint64 // lookups answered from a cached entitlement
	Misses       uint64 // lookups that had to wait for a load
	NegativeHits uint64 // lookups answered "unknown" from the negative cache
	Loads        uint64 // loads from the Source (misses collapse into these)
	UnknownLoads uint64 // loads that found no credential: an unknown key reached the Source
	LoadErrors   uint64 // loads that failed for a reason other than "unknown key"
}

// Stats returns the counts so far.
func (c *Cache) Stats() CacheStats {
	return CacheStats{
		Hits:         c.hits.Load(),
		Misses:       c.misses.Load(),
		NegativeHits: c.negativeHits.Load(),
		Loads:        c.loads.Load(),
		UnknownLoads: c.unknownLoads.Load(),
		LoadErrors:   c.loadErrors.Load(),
	}
}

// janitor forgets users none of whose entries can still be alive: every
// entry expires at most TTL after the load that made it, so a user whose
// last load is older than that has none.
func (c *Cache) janitor() {
	defer close(c.done)
	t := time.NewTicker(c.cfg.TTL)
	defer t.Stop()
	for {
		select {
		case <-c.stop:
			return
		case <-t.C:
			c.pruneUsers()
		}
	}
}

func (c *Cache) pruneUsers() {
	cutoff := c.cfg.Now().Add(-c.cfg.TTL).UnixNano()
	c.usersMu.Lock()
	for id, us := range c.users {
		if us.lastLoad < cutoff {
			delete(c.users, id)
		}
	}
	c.usersMu.Unlock()
}

// Close stops the janitor and releases the cache. It is safe to call more
// than once.
func (c *Cache) Close() {
	c.closeOnce.Do(func() {
		close(c.stop)
		<-c.done
		c.entries.Close()
		c.negative.Close()
	})
}
