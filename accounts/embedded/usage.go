package embedded

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"time"

	"github.com/timeblock/timeblock/accounts"
)

// usageRecord is one key's usage in one hour, under usageKey(key, hour).
type usageRecord struct {
	Admitted     int64            `json:"admitted"`
	Refused      map[string]int64 `json:"refused,omitempty"`
	InputTokens  int64            `json:"input_tokens"`
	OutputTokens int64            `json:"output_tokens"`
	Seconds      float64          `json:"seconds"`
}

// usageKey is compositeKey(key id, hour as 8 big-endian bytes of Unix
// seconds): a key's hours sort in time order after its prefix.
func usageKey(keyID string, hour time.Time) []byte {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], uint64(hour.UTC().Truncate(time.Hour).Unix()))
	return compositeKey(keyID, string(b[:]))
}

// usageHour reads the hour back from a usage key.
func usageHour(k []byte) (time.Time, bool) {
	if len(k) < 10 {
		return time.Time{}, false
	}
	return time.Unix(int64(binary.BigEndian.Uint64(k[len(k)-8:])), 0).UTC(), true
}

func (t *tx) AddKeyUsage(rows []accounts.KeyUsage) error {
	b := t.bucket(bucketKeyUsage)
	for _, r := range accounts.MergeKeyUsage(rows) {
		k := usageKey(r.KeyID, r.Hour)
		var rec usageRecord
		if v := b.Get(k); v != nil {
			if err := json.Unmarshal(v, &rec); err != nil {
				return fmt.Errorf("add key usage: decode %q: %w", k, err)
			}
		}
		sum := accounts.KeyUsage{Admitted: rec.Admitted, Refused: rec.Refused, InputTokens: rec.InputTokens,
			OutputTokens: rec.OutputTokens, Seconds: rec.Seconds}
		sum.Add(&r)
		v, err := json.Marshal(usageRecord{Admitted: sum.Admitted, Refused: sum.Refused, InputTokens: sum.InputTokens,
			OutputTokens: sum.OutputTokens, Seconds: sum.Seconds})
		if err != nil {
			return fmt.Errorf("add key usage: %w", err)
		}
		if err := b.Put(k, v); err != nil {
			return fmt.Errorf("add key usage: %w", err)
		}
	}
	return nil
}

func (t *tx) ListKeyUsage(keyID string, from, to time.Time) ([]accounts.KeyUsage, error) {
	prefix := compositeKey(keyID)
	end := usageKey(keyID, to)
	var out []accounts.KeyUsage
	c := t.bucket(bucketKeyUsage).Cursor()
	for k, v := c.Seek(usageKey(keyID, from)); k != nil && bytes.HasPrefix(k, prefix) && bytes.Compare(k, end) < 0; k, v = c.Next() {
		hour, ok := usageHour(k)
		if !ok || len(k) != len(prefix)+10 {
			continue
		}
		var rec usageRecord
		if err := json.Unmarshal(v, &rec); err != nil {
			return nil, fmt.Errorf("list usage of key %s: decode %q: %w", keyID, k, err)
		}
		out = append(out, accounts.KeyUsage{KeyID: keyID, Hour: hour, Admitted: rec.Admitted, Refused: rec.Refused,
			InputTokens: rec.InputTokens, OutputTokens: rec.OutputTokens, Seconds: rec.Seconds})
	}
	return out, nil
}

func (t *tx) DeleteKeyUsageBefore(before time.Time) (int, error) {
	b := t.bucket(bucketKeyUsage)
	var old [][]byte
	err := b.ForEach(func(k, _ []byte) error {
		if hour, ok := usageHour(k); ok && hour.Before(before) {
			old = append(old, k)
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("delete key usage: %w", err)
	}
	for _, k := range old {
		if err := b.Delete(k); err != nil {
			return 0, fmt.Errorf("delete key usage: %w", err)
		}
	}
	return len(old), nil
}
