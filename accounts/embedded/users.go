package embedded

import (
	"fmt"
	"time"

	"github.com/timeblock/timeblock/accounts"
)

func (t *tx) CreateUser(u *accounts.User) error {
	if t.exists(bucketUsers, u.ID) {
		return fmt.Errorf("create user %s: id already used: %w", u.ID, accounts.ErrConflict)
	}
	byEmail := t.bucket(bucketUsersByEmail)
	if !free(byEmail, u.Email, u.ID) {
		return fmt.Errorf("create user %s: email already used: %w", u.ID, accounts.ErrConflict)
	}
	if err := t.save(bucketUsers, u.ID, newUserRecord(u)); err != nil {
		return fmt.Errorf("create user %s: %w", u.ID, err)
	}
	return putUnique(byEmail, u.Email, u.ID)
}

func (t *tx) GetUser(id string) (*accounts.User, error) {
	var r userRecord
	if err := t.mustLoad(bucketUsers, id, &r); err != nil {
		return nil, fmt.Errorf("get user %s: %w", id, err)
	}
	return r.user(), nil
}

func (t *tx) GetUserByEmail(email string) (*accounts.User, error) {
	id := lookup(t.bucket(bucketUsersByEmail), email)
	if id == "" {
		return nil, fmt.Errorf("get user by email: %w", accounts.ErrNotFound)
	}
	return t.GetUser(id)
}

func (t *tx) UpdateUser(u *accounts.User) error {
	var old userRecord
	if err := t.mustLoad(bucketUsers, u.ID, &old); err != nil {
		return fmt.Errorf("update user %s: %w", u.ID, err)
	}
	byEmail := t.bucket(bucketUsersByEmail)
	if !free(byEmail, u.Email, u.ID) {
		return fmt.Errorf("update user %s: email already used: %w", u.ID, accounts.ErrConflict)
	}
	if err := t.save(bucketUsers, u.ID, newUserRecord(u)); err != nil {
		return fmt.Errorf("update user %s: %w", u.ID, err)
	}
	return moveUnique(byEmail, old.Email, u.Email, u.ID)
}

func (t *tx) ListUsers() ([]*accounts.User, error) {
	records, err := scanAll[userRecord](t, bucketUsers)
	if err != nil {
		return nil, fmt.Errorf("list users: %w", err)
	}
	users := make([]*accounts.User, len(records))
	for i, r := range records {
		users[i] = r.user()
	}
	byCreation(users, func(u *accounts.User) (time.Time, string) { return u.CreatedAt, u.ID })
	return users, nil
}

func (t *tx) CreateSession(s *accounts.Session) error {
	if t.exists(bucketSessions, s.TokenHash) {
		return fmt.Errorf("create session: token hash already used: %w", accounts.ErrConflict)
	}
	if err := t.refs(bucketUsers, s.UserID); err != nil {
		return fmt.Errorf("create session: %w", err)
	}
	if err := t.save(bucketSessions, s.TokenHash, newSessionRecord(s)); err != nil {
		return fmt.Errorf("create session: %w", err)
	}
	return nil
}

func (t *tx) GetSession(tokenHash string) (*accounts.Session, error) {
	var r sessionRecord
	if err := t.mustLoad(bucketSessions, tokenHash, &r); err != nil {
		return nil, fmt.Errorf("get session: %w", err)
	}
	return r.session(), nil
}

func (t *tx) DeleteSession(tokenHash string) error {
	if !t.exists(bucketSessions, tokenHash) {
		return fmt.Errorf("delete session: %w", accounts.ErrNotFound)
	}
	if err := t.bucket(bucketSessions).Delete([]byte(tokenHash)); err != nil {
		return fmt.Errorf("delete session: %w", err)
	}
	return nil
}

func (t *tx) CreateManagementKey(k *accounts.ManagementKey) error {
	if t.exists(bucketMgmtKeys, k.ID) {
		return fmt.Errorf("create management key %s: id already used: %w", k.ID, accounts.ErrConflict)
	}
	byHash := t.bucket(bucketMgmtKeysByHash)
	if !free(byHash, k.Hash, k.ID) {
		return fmt.Errorf("create management key %s: hash already used: %w", k.ID, accounts.ErrConflict)
	}
	if err := t.refs(bucketUsers, k.UserID); err != nil {
		return fmt.Errorf("create management key %s: %w", k.ID, err)
	}
	if err := t.save(bucketMgmtKeys, k.ID, newMgmtKeyRecord(k)); err != nil {
		return fmt.Errorf("create management key %s: %w", k.ID, err)
	}
	if err := putUnique(byHash, k.Hash, k.ID); err != nil {
		return err
	}
	return putOwned(t.bucket(bucketMgmtKeysByUser), k.UserID, k.ID)
}

func (t *tx) GetManagementKey(id string) (*accounts.ManagementKey, error) {
	var r mgmtKeyRecord
	if err := t.mustLoad(bucketMgmtKeys, id, &r); err != nil {
		return nil, fmt.Errorf("get management key %s: %w", id, err)
	}
	return r.managementKey(), nil
}

func (t *tx) GetManagementKeyByHash(hash string) (*accounts.ManagementKey, error) {
	id := lookup(t.bucket(bucketMgmtKeysByHash), hash)
	if id == "" {
		return nil, fmt.Errorf("get management key by hash: %w", accounts.ErrNotFound)
	}
	return t.GetManagementKey(id)
}

func (t *tx) ListManagementKeys(userID string) ([]*accounts.ManagementKey, error) {
	records, err := loadAll[mgmtKeyRecord](t, bucketMgmtKeys, idsOf(t.bucket(bucketMgmtKeysByUser), userID))
	if err != nil {
		return nil, fmt.Errorf("list management keys of %s: %w", userID, err)
	}
	keys := make([]*accounts.ManagementKey, len(records))
	for i, r := range records {
		keys[i] = r.managementKey()
	}
	byCreation(keys, func(k *accounts.ManagementKey) (time.Time, string) { return k.CreatedAt, k.ID })
	return keys, nil
}

func (t *tx) DeleteManagementKey(id string) error {
	var r mgmtKeyRecord
	if err := t.mustLoad(bucketMgmtKeys, id, &r); err != nil {
		return fmt.Errorf("delete management key %s: %w", id, err)
	}
	if err := t.delete(
		entry{bucketMgmtKeys, []byte(id)},
		entry{bucketMgmtKeysByHash, compositeKey(r.Hash)},
		entry{bucketMgmtKeysByUser, compositeKey(r.UserID, id)},
	); err != nil {
		return fmt.Errorf("delete management key %s: %w", id, err)
	}
	return nil
}
