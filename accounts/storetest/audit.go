package storetest

import (
	"testing"
	"time"

	"github.com/timeblock/timeblock/accounts"
)

// testAuditRecords checks the operator's audit log: ids are unique, and a
// page is newest first (by time, then id), after a cursor, limited.
func testAuditRecords(t *testing.T, s accounts.Store) {
	rec := func(id string, d time.Duration) *accounts.AuditRecord {
		return &accounts.AuditRecord{ID: id, At: at(d), Actor: "ops@example.com", Action: "pool.status",
			Target: "pool-" + id, Detail: "to active"}
	}
	// Two records at the same time: the id breaks the tie.
	a, b, c, d := rec("au_a", 0), rec("au_b", time.Minute), rec("au_c", time.Minute), rec("au_d", time.Hour)
	list := func(name string, beforeAt time.Time, beforeID string, limit int, want ...*accounts.AuditRecord) {
		t.Helper()
		expect(t, s, name, want, func(tx accounts.Tx) ([]*accounts.AuditRecord, error) {
			got, err := tx.ListAuditRecords(beforeAt, beforeID, limit)
			if len(got) == 0 && len(want) == 0 {
				return want, err
			}
			return got, err
		})
	}
	list("ListAuditRecords of an empty log", time.Time{}, "", 10)
	update(t, s, func(tx accounts.Tx) error {
		for _, r := range []*accounts.AuditRecord{c, a, d, b} {
			if err := tx.CreateAuditRecord(r); err != nil {
				return err
			}
		}
		return nil
	})
	expectErr(t, s, "CreateAuditRecord with a used id", accounts.ErrConflict, func(tx accounts.Tx) error {
		return tx.CreateAuditRecord(rec(a.ID, 2*time.Hour))
	})
	list("ListAuditRecords, all", time.Time{}, "", 0, d, c, b, a)
	list("ListAuditRecords, first page", time.Time{}, "", 2, d, c)
	list("ListAuditRecords, after c", c.At, c.ID, 2, b, a)
	list("ListAuditRecords, after b", b.At, b.ID, 10, a)
	list("ListAuditRecords, after a", a.At, a.ID, 10)
}
