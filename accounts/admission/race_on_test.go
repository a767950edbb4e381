//go:build race

package admission

// raceEnabled: the race detector makes sync.Pool drop items at random, so
// ristretto's pooled buffers allocate and allocation counts mean nothing.
const raceEnabled = true
