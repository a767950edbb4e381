package postgres

import (
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/timeblock/timeblock/accounts"
	"github.com/timeblock/timeblock/accounts/billing"
)

const userColumns = `id, email, name, payment_method_id, payment_method_brand, payment_method_last4, created_at`

func scanUser(row pgx.Row) (*accounts.User, error) {
	var u accounts.User
	var pmID *string
	var pm billing.PaymentMethod
	if err := row.Scan(&u.ID, &u.Email, &u.Name, &pmID, &pm.Brand, &pm.Last4, &u.CreatedAt); err != nil {
		return nil, err
	}
	if pmID != nil {
		pm.ID = *pmID
		u.PaymentMethod = &pm
	}
	u.CreatedAt = u.CreatedAt.UTC()
	return &u, nil
}

// userArgs lists u's columns in userColumns order.
func userArgs(u *accounts.User) []any {
	var pmID *string
	var pm billing.PaymentMethod
	if u.PaymentMethod != nil {
		pm = *u.PaymentMethod
		pmID = &pm.ID
	}
	return []any{u.ID, u.Email, u.Name, pmID, pm.Brand, pm.Last4, ts(u.CreatedAt)}
}

func (t *tx) CreateUser(u *accounts.User) error {
	err := t.execOne(`INSERT INTO users (`+userColumns+`) VALUES ($1, $2, $3, $4, $5, $6, $7)`, userArgs(u)...)
	return wrap(err, "create user %s", u.ID)
}

func (t *tx) GetUser(id string) (*accounts.User, error) {
	u, err := scanUser(t.db.QueryRow(t.ctx, `SELECT `+userColumns+` FROM users WHERE id = $1`, id))
	return u, wrap(err, "get user %s", id)
}

func (t *tx) GetUserByEmail(email string) (*accounts.User, error) {
	u, err := scanUser(t.db.QueryRow(t.ctx, `SELECT `+userColumns+` FROM users WHERE email = $1`, email))
	return u, wrap(err, "get user by email")
}

func (t *tx) UpdateUser(u *accounts.User) error {
	err := t.execOne(`UPDATE users SET email = $2, name = $3, payment_method_id = $4,
		payment_method_brand = $5, payment_method_last4 = $6, created_at = $7 WHERE id = $1`, userArgs(u)...)
	return wrap(err, "update user %s", u.ID)
}

func (t *tx) ListUsers() ([]*accounts.User, error) {
	users, err := queryAll(t, scanUser, `SELECT `+userColumns+` FROM users ORDER BY created_at, id`)
	return users, wrap(err, "list users")
}

func (t *tx) CreateSession(s *accounts.Session) error {
	err := t.execOne(`INSERT INTO sessions (token_hash, user_id, created_at, expires_at) VALUES ($1, $2, $3, $4)`,
		s.TokenHash, s.UserID, ts(s.CreatedAt), ts(s.ExpiresAt))
	return wrap(err, "create session")
}

func (t *tx) GetSession(tokenHash string) (*accounts.Session, error) {
	var s accounts.Session
	err := t.db.QueryRow(t.ctx, `SELECT token_hash, user_id, created_at, expires_at FROM sessions WHERE token_hash = $1`, tokenHash).
		Scan(&s.TokenHash, &s.UserID, &s.CreatedAt, &s.ExpiresAt)
	if err != nil {
		return nil, wrap(err, "get session")
	}
	s.CreatedAt, s.ExpiresAt = s.CreatedAt.UTC(), s.ExpiresAt.UTC()
	return &s, nil
}

func (t *tx) DeleteSession(tokenHash string) error {
	return wrap(t.execOne(`DELETE FROM sessions WHERE token_hash = $1`, tokenHash), "delete session")
}

const mgmtKeyColumns = `id, user_id, name, prefix, hash, active, created_at, last_used_at`

func scanManagementKey(row pgx.Row) (*accounts.ManagementKey, error) {
	var k accounts.ManagementKey
	var lastUsed *time.Time
	if err := row.Scan(&k.ID, &k.UserID, &k.Name, &k.Prefix, &k.Hash, &k.Active, &k.CreatedAt, &lastUsed); err != nil {
		return nil, err
	}
	k.CreatedAt, k.LastUsedAt = k.CreatedAt.UTC(), fromNull(lastUsed)
	return &k, nil
}

func (t *tx) CreateManagementKey(k *accounts.ManagementKey) error {
	err := t.execOne(`INSERT INTO management_keys (`+mgmtKeyColumns+`) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`,
		k.ID, k.UserID, k.Name, k.Prefix, k.Hash, k.Active, ts(k.CreatedAt), nullTS(k.LastUsedAt))
	return wrap(err, "create management key %s", k.ID)
}

func (t *tx) GetManagementKey(id string) (*accounts.ManagementKey, error) {
	k, err := scanManagementKey(t.db.QueryRow(t.ctx, `SELECT `+mgmtKeyColumns+` FROM management_keys WHERE id = $1`, id))
	return k, wrap(err, "get management key %s", id)
}

func (t *tx) GetManagementKeyByHash(hash string) (*accounts.ManagementKey, error) {
	k, err := scanManagementKey(t.db.QueryRow(t.ctx, `SELECT `+mgmtKeyColumns+` FROM management_keys WHERE hash = $1`, hash))
	return k, wrap(err, "get management key by hash")
}

func (t *tx) ListManagementKeys(userID string) ([]*accounts.ManagementKey, error) {
	keys, err := queryAll(t, scanManagementKey,
		`SELECT `+mgmtKeyColumns+` FROM management_keys WHERE user_id = $1 ORDER BY created_at, id`, userID)
	return keys, wrap(err, "list management keys of %s", userID)
}

func (t *tx) DeleteManagementKey(id string) error {
	return wrap(t.execOne(`DELETE FROM management_keys WHERE id = $1`, id), "delete management key %s", id)
}
