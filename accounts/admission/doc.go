// Package admission holds the state the inference gate consults on every
// request, kept apart from Caddy so that it can be tested and benchmarked on
// its own: the entitlement cache (key hash → what the key may do), the lane
// registry (how many requests each key runs in each pool right now) and the
// last-used batcher (lastUsedAt written off the request path).
//
// All three are built once per store and survive a Caddy config reload; the
// hit path of the cache and an uncontended lane acquire and release allocate
// nothing.
package admission
