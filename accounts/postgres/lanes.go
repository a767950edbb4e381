package postgres

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/timeblock/timeblock/accounts/admission"
)

// Cluster-wide lanes.
//
// Slot s of the lane group (key, pool) is the session-level advisory lock
// laneLockBase(key, pool) + s, held by one connection per node (its "lane
// session"). PostgreSQL lets one session at a time hold it and frees it when
// that session ends, however it ends: a node killed with SIGKILL frees its
// lanes as soon as the kernel closes its socket; a node cut off from the
// database frees them when PostgreSQL gives up on the connection, which the
// lane session bounds with TCP keepalives and tcp_user_timeout (laneDeadPeer).
// No table, no expiry to sweep.
//
// Nodes tell each other on the laneChannel: "w <node> <key> <pool>" (a
// request on that node waits for a lane of the group: give back idle ones)
// and "f <node> <key> <pool>" (a slot of the group was unlocked).
//
// A held slot may be idle (kept for the key's next request), so the locks
// do not say how many requests are in flight; a status endpoint that needs
// that number asks the nodes: "q <node> <query> <key>:<pool> ..." (how many
// requests of these groups do you have in flight?), answered by every node
// whose lane session is connected with "c <node> <query> <count>".

const (
	laneChannel = "timeblock_lanes"
	// laneSlotBits: slots 0..65535 of a group live in the low bits of the lock.
	laneSlotBits = 16
	maxLaneSlots = 1 << laneSlotBits

	laneOpTimeout   = 2 * time.Second        // one statement on the lane session
	inUseTimeout    = 2 * time.Second        // the other nodes' answers to a count of lanes in use
	laneHeartbeat   = 250 * time.Millisecond // ping of the lane session
	lanePingTimeout = time.Second            // a ping slower than this loses the session
)

// laneDeadPeer makes PostgreSQL end a lane session whose node stopped
// answering: keepalive after 2 s idle, 3 probes 1 s apart, and unacknowledged
// data dropped after 5 s. The node gives up on the session first (a ping
// fails within laneHeartbeat + lanePingTimeout = 1.25 s) and stops using its
// lanes, so the two never overlap.
const laneDeadPeer = `SET tcp_keepalives_idle = 2; SET tcp_keepalives_interval = 1; ` +
	`SET tcp_keepalives_count = 3; SET tcp_user_timeout = 5000`

// LaneDeathBound is how long at most the lanes of a node that died or lost
// the database stay held in PostgreSQL: at once for a killed process (its
// connection closes), at most about 5 s for a lost network (laneDeadPeer).
const LaneDeathBound = 10 * time.Second

// laneSessionName, then the node's id, is the application_name of a lane
// session: the other nodes find who to ask about lanes in use by it.
const laneSessionName = "timeblock lanes "

// laneLockBase is the advisory lock of slot 0 of a lane group.
func laneLockBase(k admission.LaneKey) int64 {
	h := fnv.New64a()
	h.Write([]byte(k.KeyID))
	h.Write([]byte{0})
	h.Write([]byte(k.PoolID))
	return int64(h.Sum64() &^ (maxLaneSlots - 1))
}

// LaneCoordinator is the admission.Coordinator of the nodes sharing one
// database. Make it with Store.LaneCoordinator; Close releases every lane
// the node holds.
type LaneCoordinator struct {
	cfg    *pgx.ConnConfig
	pool   *pgxpool.Pool // the store's pool, for counting lanes in use
	logger interface {
		Warn(msg string, args ...any)
		Info(msg string, args ...any)
	}
	node string

	mu    sync.Mutex // the lane session and what it holds
	conn  *pgx.Conn  // nil while the database is unreachable
	held  map[int64]struct{}
	epoch atomic.Uint64 // odd while conn is up

	qmu   sync.Mutex
	queue []laneNote
	kick  chan struct{}

	events atomic.Pointer[eventsBox]

	queriesMu sync.Mutex
	queries   map[string]*inUseQuery // counts of lanes in use waiting for answers, by query id

	stop context.CancelFunc
	wg   sync.WaitGroup
}

type eventsBox struct{ ev admission.Events }

// laneNote is a release, a want or an answer waiting for the flusher.
type laneNote struct {
	k      admission.LaneKey
	want   bool
	slot   int32
	epoch  uint64
	answer string // a whole "c ..." payload
}

// inUseQuery collects the other nodes' answers to one count of lanes in use.
type inUseQuery struct {
	mu      sync.Mutex
	counts  map[string]int // by node
	arrived chan struct{}  // signaled after each answer
}

// LaneCoordinator opens the node's lane session and its listener. ctx bounds
// the opening only.
func (s *Store) LaneCoordinator(ctx context.Context) (*LaneCoordinator, error) {
	c := &LaneCoordinator{
		cfg:     s.pool.Config().ConnConfig.Copy(),
		pool:    s.pool,
		queries: make(map[string]*inUseQuery),
		logger:  s.logger,
		node:    strings.ToLower(rand.Text()[:12]),
		held:    make(map[int64]struct{}),
		kick:    make(chan struct{}, 1),
	}
	conn, err := c.connect(ctx)
	if err != nil {
		return nil, fmt.Errorf("open the lane session: %w", err)
	}
	c.conn = conn
	c.epoch.Store(1)
	listener, err := c.listen(ctx)
	if err != nil {
		conn.Close(ctx)
		return nil, fmt.Errorf("listen for lanes: %w", err)
	}
	runCtx, stop := context.WithCancel(context.Background())
	c.stop = stop
	c.wg.Add(3)
	go c.runHeartbeat(runCtx)
	go c.runFlusher(runCtx)
	go c.runListener(runCtx, listener)
	return c, nil
}

func (c *LaneCoordinator) connect(ctx context.Context) (*pgx.Conn, error) {
	cfg := c.cfg.Copy()
	cfg.RuntimeParams["application_name"] = laneSessionName + c.node
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, err
	}
	if _, err := conn.Exec(ctx, laneDeadPeer); err != nil {
		conn.Close(ctx)
		return nil, err
	}
	return conn, nil
}

func (c *LaneCoordinator) listen(ctx context.Context) (*pgx.Conn, error) {
	conn, err := pgx.ConnectConfig(ctx, c.cfg.Copy())
	if err != nil {
		return nil, err
	}
	if _, err := conn.Exec(ctx, "LISTEN "+laneChannel); err != nil {
		conn.Close(ctx)
		return nil, err
	}
	return conn, nil
}

// Attach implements admission.Coordinator.
func (c *LaneCoordinator) Attach(ev admission.Events) { c.events.Store(&eventsBox{ev}) }

// Epoch implements admission.Coordinator.
func (c *LaneCoordinator) Epoch() uint64 { return c.epoch.Load() }

// Acquire implements admission.Coordinator: one statement that tries the
// group's free slots in order and locks the first it can.
func (c *LaneCoordinator) Acquire(k admission.LaneKey, capacity int) (int32, uint64, bool, error) {
	base := laneLockBase(k)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.conn == nil {
		return 0, 0, false, admission.ErrClusterDown
	}
	capacity = min(capacity, maxLaneSlots)
	candidates := make([]int32, 0, capacity)
	for s := range int32(capacity) {
		if _, mine := c.held[base+int64(s)]; !mine {
			candidates = append(candidates, s)
		}
	}
	if len(candidates) == 0 {
		return 0, 0, false, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), laneOpTimeout)
	defer cancel()
	var slot int32
	err := c.conn.QueryRow(ctx,
		`SELECT s FROM unnest($1::int4[]) AS s WHERE pg_try_advisory_lock($2::int8 + s) LIMIT 1`,
		candidates, base).Scan(&slot)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return 0, 0, false, nil
	case err != nil:
		c.lose(err)
		return 0, 0, false, fmt.Errorf("%w: %v", admission.ErrClusterDown, err)
	}
	c.held[base+int64(slot)] = struct{}{}
	return slot, c.epoch.Load(), true, nil
}

// Release implements admission.Coordinator: the flusher unlocks the slot
// and tells the other nodes.
func (c *LaneCoordinator) Release(k admission.LaneKey, slot int32, epoch uint64) {
	c.note(laneNote{k: k, slot: slot, epoch: epoch})
}

// Want implements admission.Coordinator.
func (c *LaneCoordinator) Want(k admission.LaneKey) { c.note(laneNote{k: k, want: true}) }

func (c *LaneCoordinator) note(n laneNote) {
	c.qmu.Lock()
	c.queue = append(c.queue, n)
	c.qmu.Unlock()
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

// Held returns how many slots this node holds (for tests).
func (c *LaneCoordinator) Held() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.held)
}

// lose drops the lane session: PostgreSQL frees its locks when it notices,
// and the new epoch makes every slot taken on it worthless here at once.
// The caller holds c.mu.
func (c *LaneCoordinator) lose(err error) {
	if c.conn == nil {
		return
	}
	c.logger.Warn("lane session lost; requests that need a new lane get 503 until it is back", "error", err)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	c.conn.Close(ctx)
	cancel()
	c.conn = nil
	c.held = make(map[int64]struct{})
	c.epoch.Add(1)
}

// runHeartbeat pings the lane session and reconnects it when lost.
func (c *LaneCoordinator) runHeartbeat(ctx context.Context) {
	defer c.wg.Done()
	delay := laneHeartbeat
	for sleep(ctx, delay) == nil {
		delay = laneHeartbeat
		c.mu.Lock()
		if c.conn != nil {
			pctx, cancel := context.WithTimeout(ctx, lanePingTimeout)
			if _, err := c.conn.Exec(pctx, "SELECT 1"); err != nil && ctx.Err() == nil {
				c.lose(err)
			}
			cancel()
			c.mu.Unlock()
			continue
		}
		c.mu.Unlock()
		// Connect outside the lock: Acquire answers ErrClusterDown meanwhile.
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		conn, err := c.connect(cctx)
		cancel()
		if err != nil {
			delay = time.Second
			continue
		}
		c.mu.Lock()
		c.conn = conn
		c.epoch.Add(1)
		c.mu.Unlock()
		c.logger.Info("lane session reconnected")
	}
}

// runFlusher unlocks released slots and publishes releases and wants, all
// pending ones in one statement.
func (c *LaneCoordinator) runFlusher(ctx context.Context) {
	defer c.wg.Done()
	var unlock []int64
	var notes []string
	for {
		select {
		case <-ctx.Done():
			return
		case <-c.kick:
		}
		c.qmu.Lock()
		queue := c.queue
		c.queue = nil
		c.qmu.Unlock()

		c.mu.Lock()
		if c.conn == nil {
			c.mu.Unlock()
			continue
		}
		unlock, notes = unlock[:0], notes[:0]
		epoch := c.epoch.Load()
		for _, n := range queue {
			if n.answer != "" {
				notes = append(notes, n.answer)
				continue
			}
			if n.want {
				// One message per want: each frees one lane on the holder.
				notes = append(notes, "w "+c.node+" "+n.k.KeyID+" "+n.k.PoolID)
				continue
			}
			lock := laneLockBase(n.k) + int64(n.slot)
			if _, mine := c.held[lock]; !mine || n.epoch != epoch {
				continue
			}
			delete(c.held, lock)
			unlock = append(unlock, lock)
			notes = appendOnce(notes, "f "+c.node+" "+n.k.KeyID+" "+n.k.PoolID)
		}
		if len(notes) > 0 {
			// Unlocks take effect at once; notifications go out when the
			// statement commits, after them.
			octx, cancel := context.WithTimeout(ctx, laneOpTimeout)
			_, err := c.conn.Exec(octx, `SELECT count(pg_advisory_unlock(l)) FROM unnest($1::int8[]) AS l
				UNION ALL SELECT count(pg_notify($3, n)) FROM unnest($2::text[]) AS n`, unlock, notes, laneChannel)
			cancel()
			if err != nil && ctx.Err() == nil {
				c.lose(err)
			}
		}
		c.mu.Unlock()
	}
}

func appendOnce(list []string, s string) []string {
	for _, x := range list {
		if x == s {
			return list
		}
	}
	return append(list, s)
}

// runListener hands the other nodes' wants and releases to the registry.
func (c *LaneCoordinator) runListener(ctx context.Context, conn *pgx.Conn) {
	defer c.wg.Done()
	for {
		err := c.receive(ctx, conn)
		closeCtx, cancel := context.WithTimeout(context.Background(), time.Second)
		conn.Close(closeCtx)
		cancel()
		if ctx.Err() != nil {
			return
		}
		c.logger.Warn("lane listener lost its connection; reconnecting", "error", err)
		for conn = nil; conn == nil; {
			if sleep(ctx, 200*time.Millisecond) != nil {
				return
			}
			actx, cancel := context.WithTimeout(ctx, 5*time.Second)
			conn, _ = c.listen(actx)
			cancel()
		}
	}
}

func (c *LaneCoordinator) receive(ctx context.Context, conn *pgx.Conn) error {
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		kind, rest, _ := strings.Cut(n.Payload, " ")
		node, rest, _ := strings.Cut(rest, " ")
		if node == c.node {
			continue
		}
		box := c.events.Load()
		switch kind {
		case "q":
			c.answer(box, rest)
			continue
		case "c":
			c.answered(node, rest)
			continue
		}
		keyID, poolID, ok := strings.Cut(rest, " ")
		if !ok || box == nil {
			continue
		}
		k := admission.LaneKey{KeyID: keyID, PoolID: poolID}
		switch kind {
		case "w":
			box.ev.Wanted(k)
		case "f":
			box.ev.Freed(k)
		}
	}
}

// InUseElsewhere implements admission.InUseCounter: it asks every other
// node whose lane session is connected to this database how many requests
// of keys it has in flight, and waits for each to answer (at most
// inUseTimeout). The question and the list of nodes come from one
// statement, so every node listed was listening when it was asked.
func (c *LaneCoordinator) InUseElsewhere(ctx context.Context, keys []admission.LaneKey) (int, error) {
	id := strings.ToLower(rand.Text()[:12])
	var payload strings.Builder
	payload.WriteString("q " + c.node + " " + id)
	for _, k := range keys {
		payload.WriteString(" " + k.KeyID + ":" + k.PoolID)
	}
	if payload.Len() > 7900 { // NOTIFY's payload limit is 8000 bytes
		return 0, fmt.Errorf("counting lanes in use: %d lane groups are too many to ask for at once", len(keys))
	}
	q := &inUseQuery{counts: make(map[string]int), arrived: make(chan struct{}, 1)}
	c.queriesMu.Lock()
	c.queries[id] = q
	c.queriesMu.Unlock()
	defer func() {
		c.queriesMu.Lock()
		delete(c.queries, id)
		c.queriesMu.Unlock()
	}()

	ctx, cancel := context.WithTimeout(ctx, inUseTimeout)
	defer cancel()
	var nodes []string
	err := c.pool.QueryRow(ctx, `SELECT ARRAY(SELECT substr(application_name, $1) FROM pg_stat_activity
			WHERE datname = current_database() AND application_name LIKE 'timeblock lanes %' AND application_name <> $2)
		FROM (SELECT pg_notify($3, $4)) AS asked`,
		len(laneSessionName)+1, laneSessionName+c.node, laneChannel, payload.String()).Scan(&nodes)
	if err != nil {
		return 0, fmt.Errorf("counting lanes in use: %w", err)
	}
	total := 0
	for waiting := nodes; ; {
		q.mu.Lock()
		waiting = slices.DeleteFunc(waiting, func(node string) bool {
			n, ok := q.counts[node]
			total += n
			return ok
		})
		q.mu.Unlock()
		if len(waiting) == 0 {
			return total, nil
		}
		select {
		case <-q.arrived:
		case <-ctx.Done():
			return 0, fmt.Errorf("counting lanes in use: %d of %d other nodes did not answer: %w", len(waiting), len(nodes), ctx.Err())
		}
	}
}

// answer counts the requests in flight here of the lane groups of a "q"
// question and has the flusher send the count.
func (c *LaneCoordinator) answer(box *eventsBox, question string) {
	id, groups, _ := strings.Cut(question, " ")
	if id == "" {
		return
	}
	n := 0
	for _, g := range strings.Fields(groups) {
		keyID, poolID, ok := strings.Cut(g, ":")
		if ok && box != nil {
			n += box.ev.InUse(admission.LaneKey{KeyID: keyID, PoolID: poolID})
		}
	}
	c.note(laneNote{answer: "c " + c.node + " " + id + " " + strconv.Itoa(n)})
}

// answered records node's answer to one of this node's questions.
func (c *LaneCoordinator) answered(node, answer string) {
	id, count, _ := strings.Cut(answer, " ")
	n, err := strconv.Atoi(count)
	if err != nil {
		return
	}
	c.queriesMu.Lock()
	q := c.queries[id]
	c.queriesMu.Unlock()
	if q == nil {
		return // not ours, or given up on
	}
	q.mu.Lock()
	q.counts[node] = n
	q.mu.Unlock()
	select {
	case q.arrived <- struct{}{}:
	default:
	}
}

// Close stops the coordinator and ends its sessions, which releases every
// lane the node holds.
func (c *LaneCoordinator) Close() error {
	c.stop()
	c.wg.Wait()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.conn != nil {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		c.conn.Close(ctx)
		cancel()
		c.conn = nil
	}
	c.epoch.Add(1)
	return nil
}

var (
	_ admission.Coordinator  = (*LaneCoordinator)(nil)
	_ admission.InUseCounter = (*LaneCoordinator)(nil)
)
