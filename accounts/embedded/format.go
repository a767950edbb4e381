package embedded

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"strconv"

	bolt "go.etcd.io/bbolt"

	"github.com/timeblock/timeblock/accounts"
)

// formatVersion is the layout this build reads and writes. A file written by
// an older build is migrated at Open; a newer one is refused.
const formatVersion = 5

// Buckets. Entity buckets map an id to its JSON record; the others are
// indexes that map a unique value (or a composite key) to an id.
const (
	bucketMeta = "meta" // formatKey → formatVersion as decimal text

	bucketUsers        = "users"
	bucketUsersByEmail = "users_by_email"

	bucketSessions = "sessions" // token hash → record

	bucketMgmtKeys       = "management_keys"
	bucketMgmtKeysByHash = "management_keys_by_hash"
	bucketMgmtKeysByUser = "management_keys_by_user" // (user, id) → nil

	bucketPools       = "pools"
	bucketPoolsBySlug = "pools_by_slug"

	bucketSubs       = "subscriptions"
	bucketSubsByUser = "subscriptions_by_user" // (user, id) → nil
	bucketSeats      = "seats"                 // (pool, hour, slot) → subscription id

	bucketKeys       = "keys"
	bucketKeysByHash = "keys_by_hash"
	bucketKeysBySub  = "keys_by_subscription"
	bucketKeysByUser = "keys_by_user" // (user, id) → nil

	bucketCombined       = "combined_keys"
	bucketCombinedByHash = "combined_keys_by_hash"
	bucketCombinedBySub  = "combined_keys_by_subscription" // member subscription → combined key id
	bucketCombinedByUser = "combined_keys_by_user"         // (user, id) → nil

	bucketCharges         = "charges"
	bucketChargesByPeriod = "charges_by_period" // (subscription, period start) → charge id

	// Since format 2 (intents.go).
	bucketIntents          = "charge_intents"
	bucketIntentsByKey     = "charge_intents_by_key" // idempotency key → intent id
	bucketIntentsOpen      = "charge_intents_open"   // id → nil, pending or settling only
	bucketTestCharges      = "test_charges"          // idempotency key → record
	bucketTestChargesByRef = "test_charges_by_ref"   // ref → idempotency key

	// Since format 3.
	bucketChargesPending = "charges_pending" // charge id → nil, pending charges only

	// Since format 4.
	bucketSignInTokens = "sign_in_tokens" // token hash → record

	// Since format 5 (usage.go).
	bucketKeyUsage = "key_usage" // (key id, hour) → counters
)

const formatKey = "format"

// migrate brings the file to formatVersion, in the same transaction that
// checks it, so a crash mid-migration leaves the old format intact.
func migrate(btx *bolt.Tx) error {
	meta, err := btx.CreateBucketIfNotExists([]byte(bucketMeta))
	if err != nil {
		return err
	}
	version := 0
	if v := meta.Get([]byte(formatKey)); v != nil {
		if version, err = strconv.Atoi(string(v)); err != nil {
			return fmt.Errorf("unreadable format version %q", v)
		}
	}
	if version > formatVersion {
		return fmt.Errorf("format version %d is newer than this build understands (%d); upgrade Timeblock", version, formatVersion)
	}
	// steps[i] moves the file from version i to i+1.
	steps := []func(*bolt.Tx) error{
		createBuckets,
		createIntentBuckets,
		indexPendingCharges,
		createSignInBucket,
		createKeyUsageBucket,
	}
	for ; version < formatVersion; version++ {
		if err := steps[version](btx); err != nil {
			return fmt.Errorf("migrate format %d to %d: %w", version, version+1, err)
		}
	}
	return meta.Put([]byte(formatKey), []byte(strconv.Itoa(formatVersion)))
}

func createBuckets(btx *bolt.Tx) error {
	for _, name := range []string{
		bucketUsers, bucketUsersByEmail, bucketSessions,
		bucketMgmtKeys, bucketMgmtKeysByHash, bucketMgmtKeysByUser,
		bucketPools, bucketPoolsBySlug,
		bucketSubs, bucketSubsByUser, bucketSeats,
		bucketKeys, bucketKeysByHash, bucketKeysBySub, bucketKeysByUser,
		bucketCombined, bucketCombinedByHash, bucketCombinedBySub, bucketCombinedByUser,
		bucketCharges, bucketChargesByPeriod,
	} {
		if _, err := btx.CreateBucketIfNotExists([]byte(name)); err != nil {
			return fmt.Errorf("create bucket %s: %w", name, err)
		}
	}
	return nil
}

// createIntentBuckets adds the charge intents and the test processor's
// ledger (format 2).
func createIntentBuckets(btx *bolt.Tx) error {
	for _, name := range []string{
		bucketIntents, bucketIntentsByKey, bucketIntentsOpen, bucketTestCharges, bucketTestChargesByRef,
	} {
		if _, err := btx.CreateBucketIfNotExists([]byte(name)); err != nil {
			return fmt.Errorf("create bucket %s: %w", name, err)
		}
	}
	return nil
}

// indexPendingCharges adds the index of pending charges and fills it
// (format 3).
func indexPendingCharges(btx *bolt.Tx) error {
	idx, err := btx.CreateBucketIfNotExists([]byte(bucketChargesPending))
	if err != nil {
		return fmt.Errorf("create bucket %s: %w", bucketChargesPending, err)
	}
	return btx.Bucket([]byte(bucketCharges)).ForEach(func(k, v []byte) error {
		var r chargeRecord
		if err := json.Unmarshal(v, &r); err != nil {
			return fmt.Errorf("decode charge %q: %w", k, err)
		}
		if r.Status != accounts.ChargePending {
			return nil
		}
		return idx.Put(k, []byte{})
	})
}

// compositeKey joins parts, each preceded by its 2-byte length, so that no
// two part lists collide and the key of a prefix of parts is a byte prefix of
// every longer key: a cursor Seek on compositeKey(user) finds all of a user's
// entries.
func compositeKey(parts ...string) []byte {
	n := 0
	for _, p := range parts {
		n += 2 + len(p)
	}
	k := make([]byte, 0, n)
	for _, p := range parts {
		k = binary.BigEndian.AppendUint16(k, uint16(len(p)))
		k = append(k, p...)
	}
	return k
}

// lastPart returns the final length-prefixed part of a compositeKey.
func lastPart(k []byte, prefix []byte) string {
	rest := k[len(prefix):]
	if len(rest) < 2 {
		return ""
	}
	return string(rest[2:])
}

// createSignInBucket adds the e-mail sign-in link tokens (format 4).
func createSignInBucket(btx *bolt.Tx) error {
	if _, err := btx.CreateBucketIfNotExists([]byte(bucketSignInTokens)); err != nil {
		return fmt.Errorf("create bucket %s: %w", bucketSignInTokens, err)
	}
	return nil
}

// createKeyUsageBucket adds the hourly usage of keys (format 5).
func createKeyUsageBucket(btx *bolt.Tx) error {
	if _, err := btx.CreateBucketIfNotExists([]byte(bucketKeyUsage)); err != nil {
		return fmt.Errorf("create bucket %s: %w", bucketKeyUsage, err)
	}
	return nil
}
