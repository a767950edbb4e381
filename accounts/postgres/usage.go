package postgres

import (
	"encoding/json"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/timeblock/timeblock/accounts"
)

// AddKeyUsage adds every row in one statement: rows of the same key and
// hour are merged first (ON CONFLICT may touch a row once per statement),
// and refused adds up reason by reason.
func (t *tx) AddKeyUsage(rows []accounts.KeyUsage) error {
	rows = accounts.MergeKeyUsage(rows)
	if len(rows) == 0 {
		return nil
	}
	n := len(rows)
	ids, hours, refused := make([]string, n), make([]time.Time, n), make([]string, n)
	admitted, in, out, secs := make([]int64, n), make([]int64, n), make([]int64, n), make([]float64, n)
	for i, r := range rows {
		ids[i], hours[i] = r.KeyID, ts(r.Hour)
		admitted[i], in[i], out[i], secs[i] = r.Admitted, r.InputTokens, r.OutputTokens, r.Seconds
		refused[i] = "{}"
		if len(r.Refused) > 0 {
			b, err := json.Marshal(r.Refused)
			if err != nil {
				return wrap(err, "add key usage")
			}
			refused[i] = string(b)
		}
	}
	err := t.write(func(db dbtx) error {
		_, err := db.Exec(t.ctx, `INSERT INTO key_usage AS u (key_id, hour, admitted, refused, input_tokens, output_tokens, seconds)
			SELECT * FROM unnest($1::text[], $2::timestamptz[], $3::bigint[], $4::text[]::jsonb[], $5::bigint[], $6::bigint[], $7::float8[])
			ON CONFLICT (key_id, hour) DO UPDATE SET
				admitted = u.admitted + excluded.admitted,
				refused = u.refused || coalesce((
					SELECT jsonb_object_agg(e.reason, coalesce((u.refused->>e.reason)::bigint, 0) + e.n::bigint)
					FROM jsonb_each_text(excluded.refused) AS e (reason, n)), '{}'::jsonb),
				input_tokens = u.input_tokens + excluded.input_tokens,
				output_tokens = u.output_tokens + excluded.output_tokens,
				seconds = u.seconds + excluded.seconds`,
			ids, hours, admitted, refused, in, out, secs)
		return err
	})
	return wrap(err, "add key usage")
}

func (t *tx) ListKeyUsage(keyID string, from, to time.Time) ([]accounts.KeyUsage, error) {
	rows, err := queryAll(t, scanKeyUsage, `SELECT key_id, hour, admitted, refused, input_tokens, output_tokens, seconds
		FROM key_usage WHERE key_id = $1 AND hour >= $2 AND hour < $3 ORDER BY hour`, keyID, ts(from), ts(to))
	return rows, wrap(err, "list usage of key %s", keyID)
}

func scanKeyUsage(row pgx.Row) (accounts.KeyUsage, error) {
	var u accounts.KeyUsage
	var refused []byte
	if err := row.Scan(&u.KeyID, &u.Hour, &u.Admitted, &refused, &u.InputTokens, &u.OutputTokens, &u.Seconds); err != nil {
		return u, err
	}
	u.Hour = u.Hour.UTC()
	if err := json.Unmarshal(refused, &u.Refused); err != nil {
		return u, err
	}
	return u, nil
}

func (t *tx) DeleteKeyUsageBefore(before time.Time) (int, error) {
	var n int64
	err := t.write(func(db dbtx) error {
		tag, err := db.Exec(t.ctx, `DELETE FROM key_usage WHERE hour < $1`, ts(before))
		n = tag.RowsAffected()
		return err
	})
	return int(n), wrap(err, "delete key usage before %s", before.UTC().Format(time.RFC3339))
}
