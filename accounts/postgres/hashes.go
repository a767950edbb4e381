package postgres

import (
	"github.com/jackc/pgx/v5"
)

// ListCredentialHashes reads only the hash column, from both key tables.
func (t *tx) ListCredentialHashes(userID string) ([]string, error) {
	scan := func(row pgx.Row) (string, error) {
		var h string
		err := row.Scan(&h)
		return h, err
	}
	if userID == "" {
		hashes, err := queryAll(t, scan, `SELECT hash FROM keys UNION ALL SELECT hash FROM combined_keys`)
		return hashes, wrap(err, "list credential hashes")
	}
	hashes, err := queryAll(t, scan,
		`SELECT hash FROM keys WHERE user_id = $1 UNION ALL SELECT hash FROM combined_keys WHERE user_id = $1`, userID)
	return hashes, wrap(err, "list credential hashes of %s", userID)
}
