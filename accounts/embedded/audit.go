package embedded

// The operator's audit log (accounts.AuditTx). Records are keyed by their
// time (big-endian microseconds) and id, so a page newest first is a
// backward cursor walk, never a scan; bucketAuditIDs keeps ids unique. Like
// the billing records, the buckets are created by the first write.

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"time"

	"github.com/timeblock/timeblock/accounts"
)

const (
	bucketAudit    = "operator_audit"     // at (8 bytes) + id → record
	bucketAuditIDs = "operator_audit_ids" // id → nothing
)

type auditRecord struct {
	ID     string    `json:"id"`
	At     time.Time `json:"at"`
	Actor  string    `json:"actor"`
	Action string    `json:"action"`
	Target string    `json:"target"`
	Detail string    `json:"detail"`
}

func auditKey(at time.Time, id string) []byte {
	k := make([]byte, 8, 8+len(id))
	binary.BigEndian.PutUint64(k, uint64(at.UnixMicro())) // times before 1970 are not audit times
	return append(k, id...)
}

func (t *tx) CreateAuditRecord(r *accounts.AuditRecord) error {
	records, err := t.optBucket(bucketAudit)
	if err != nil {
		return err
	}
	ids, err := t.optBucket(bucketAuditIDs)
	if err != nil {
		return err
	}
	if ids.Get([]byte(r.ID)) != nil {
		return fmt.Errorf("create audit record %s: %w", r.ID, accounts.ErrConflict)
	}
	v, err := json.Marshal(auditRecord{ID: r.ID, At: ts(r.At), Actor: r.Actor, Action: r.Action, Target: r.Target, Detail: r.Detail})
	if err != nil {
		return fmt.Errorf("encode audit record %s: %w", r.ID, err)
	}
	if err := ids.Put([]byte(r.ID), []byte{}); err != nil {
		return err
	}
	return records.Put(auditKey(ts(r.At), r.ID), v)
}

func (t *tx) ListAuditRecords(beforeAt time.Time, beforeID string, limit int) ([]*accounts.AuditRecord, error) {
	b, err := t.optBucket(bucketAudit)
	if err != nil || b == nil {
		return nil, err
	}
	if limit <= 0 {
		limit = 1 << 30
	}
	c := b.Cursor()
	var k, v []byte
	if beforeAt.IsZero() {
		k, v = c.Last()
	} else {
		bound := auditKey(ts(beforeAt), beforeID)
		k, v = c.Seek(bound)
		if k == nil {
			k, v = c.Last()
		}
		for k != nil && bytes.Compare(k, bound) >= 0 {
			k, v = c.Prev()
		}
	}
	var out []*accounts.AuditRecord
	for ; k != nil && len(out) < limit; k, v = c.Prev() {
		var r auditRecord
		if err := json.Unmarshal(v, &r); err != nil {
			return nil, fmt.Errorf("decode audit record %x: %w", k, err)
		}
		out = append(out, &accounts.AuditRecord{ID: r.ID, At: r.At.UTC(), Actor: r.Actor, Action: r.Action, Target: r.Target, Detail: r.Detail})
	}
	return out, nil
}
