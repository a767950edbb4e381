package admission

import (
	"context"
	"errors"
)

// ErrClusterDown means the registry works with a Coordinator (several nodes
// share the lanes) and cannot reach it: the request needs a lane this node
// does not hold, and taking one without the cluster could admit beyond what
// the key was sold. The gate answers 503.
var ErrClusterDown = errors.New("the lane coordinator is unreachable")

// Coordinator shares lanes between the nodes of a cluster. A lane is one of
// the slots 0..capacity-1 of a lane group; a node takes a slot from the
// cluster for the first request of a burst and keeps it while it is busy or
// idle (so that the next request of the key admits locally, with no round
// trip), and gives it back when another node wants it or it stays unused.
// Because a slot is held by at most one node and a node only takes slots
// below the capacity it computed, the lanes in use across the cluster never
// exceed the capacity at the moment of acquiring.
//
// Grants carry the epoch of the coordinator's connection to the cluster: when
// that connection is lost the cluster frees every slot the node held (or
// will soon), so the epoch changes and slots of an older epoch are worthless.
//
// A Coordinator reports what other nodes do through the Events given to
// Attach.
type Coordinator interface {
	// Acquire takes one free slot below capacity that this node does not
	// hold yet. ok is false when every such slot is held (by any node); err
	// is ErrClusterDown (wrapped) when the cluster cannot be asked.
	Acquire(k LaneKey, capacity int) (slot int32, epoch uint64, ok bool, err error)
	// Release gives a slot back to the cluster and tells the nodes waiting
	// for k. It must not block: the registry calls it under its locks.
	Release(k LaneKey, slot int32, epoch uint64)
	// Want tells the other nodes that a request here waits for a lane of k,
	// so that they give back their idle slots of k. It must not block.
	Want(k LaneKey)
	// Epoch is the current connection's epoch (see above); slots of any
	// other epoch must not admit. It is called on the hot path.
	Epoch() uint64
	// Attach sets where the coordinator reports the other nodes' wants and
	// releases.
	Attach(ev Events)
}

// Events is what a Coordinator reports about the other nodes. The Registry
// implements it.
type Events interface {
	// Wanted: another node waits for a lane of k.
	Wanted(k LaneKey)
	// Freed: another node gave back a slot of k.
	Freed(k LaneKey)
	// InUse: the requests of k in flight on this node, for another node
	// that counts them across the cluster (InUseCounter).
	InUse(k LaneKey) int
}

// InUseCounter is a Coordinator that can count the requests in flight on
// the other nodes. Counting asks every node, so it is for status
// endpoints, never for admission.
type InUseCounter interface {
	// InUseElsewhere returns the requests of the lane groups keys in flight
	// on the other nodes; err when one of them did not answer in time.
	InUseElsewhere(ctx context.Context, keys []LaneKey) (int, error)
}
