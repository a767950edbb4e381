package accounts

// Management keys: credentials for scripts on /api/*, never for inference.
// Only their hash is stored, so the full key is shown once, on creation.

import (
	"context"
	"errors"
	"strings"
	"time"
)

// ManagementKeyRow is a management key as GET /api/keys/management shows it.
type ManagementKeyRow struct {
	ID         string     `json:"id"`
	Name       string     `json:"name"`
	KeyPrefix  string     `json:"keyPrefix"`
	IsActive   bool       `json:"isActive"`
	LastUsedAt *time.Time `json:"lastUsedAt"` // null when never used
	CreatedAt  time.Time  `json:"createdAt"`
}

// CreatedManagementKey is the answer to creating a management key: the only
// time the full key is shown.
type CreatedManagementKey struct {
	ID        string `json:"id"`
	Name      string `json:"name"`
	KeyPrefix string `json:"keyPrefix"`
	APIKey    string `json:"apiKey"`
}

// ListManagementKeys returns the user's management keys, oldest first.
func (s *Service) ListManagementKeys(ctx context.Context, userID string) ([]ManagementKeyRow, error) {
	var keys []*ManagementKey
	err := s.store.View(ctx, func(tx Tx) error {
		var err error
		keys, err = tx.ListManagementKeys(userID)
		return err
	})
	if err != nil {
		return nil, passClientError("list management keys", err)
	}
	rows := make([]ManagementKeyRow, 0, len(keys))
	for _, k := range keys {
		rows = append(rows, ManagementKeyRow{
			ID:         k.ID,
			Name:       k.Name,
			KeyPrefix:  k.Prefix,
			IsActive:   k.Active,
			LastUsedAt: optionalTime(k.LastUsedAt),
			CreatedAt:  k.CreatedAt,
		})
	}
	return rows, nil
}

// CreateManagementKey creates a management key named name (required).
func (s *Service) CreateManagementKey(ctx context.Context, userID, name string) (CreatedManagementKey, error) {
	name = strings.TrimSpace(name)
	if err := checkLabel("name", name, true); err != nil {
		return CreatedManagementKey{}, err
	}
	full, prefix := newManagementKey()
	k := &ManagementKey{
		ID:        newID(),
		UserID:    userID,
		Name:      name,
		Prefix:    prefix,
		Hash:      HashKey(full),
		Active:    true,
		CreatedAt: s.clock(),
	}
	err := s.store.Update(ctx, func(tx Tx) error {
		if _, err := tx.GetUser(userID); err != nil {
			return err
		}
		return tx.CreateManagementKey(k)
	})
	if err != nil {
		return CreatedManagementKey{}, passClientError("create management key", err)
	}
	return CreatedManagementKey{ID: k.ID, Name: k.Name, KeyPrefix: k.Prefix, APIKey: full}, nil
}

// DeleteManagementKey deletes one of the user's management keys; it stops
// working at once.
func (s *Service) DeleteManagementKey(ctx context.Context, userID, id string) error {
	err := s.store.Update(ctx, func(tx Tx) error {
		k, err := tx.GetManagementKey(id)
		if err != nil {
			return err
		}
		if k.UserID != userID {
			return ErrNotFound
		}
		return tx.DeleteManagementKey(id)
	})
	if errors.Is(err, ErrNotFound) {
		return NotFound("management key %s not found", id)
	}
	if err != nil {
		return passClientError("delete management key", err)
	}
	return nil
}
