package embedded

import "fmt"

// ListCredentialHashes reads the hash indexes for every user, and the
// records of the user's keys for one.
func (t *tx) ListCredentialHashes(userID string) ([]string, error) {
	if userID == "" {
		var hashes []string
		for _, name := range []string{bucketKeysByHash, bucketCombinedByHash} {
			err := t.bucket(name).ForEach(func(k, _ []byte) error {
				hashes = append(hashes, string(k[2:])) // compositeKey(hash): length, then the hash
				return nil
			})
			if err != nil {
				return nil, fmt.Errorf("list credential hashes: %w", err)
			}
		}
		return hashes, nil
	}
	keys, err := loadAll[keyRecord](t, bucketKeys, idsOf(t.bucket(bucketKeysByUser), userID))
	if err != nil {
		return nil, fmt.Errorf("list credential hashes of %s: %w", userID, err)
	}
	combined, err := loadAll[combinedKeyRecord](t, bucketCombined, idsOf(t.bucket(bucketCombinedByUser), userID))
	if err != nil {
		return nil, fmt.Errorf("list credential hashes of %s: %w", userID, err)
	}
	hashes := make([]string, 0, len(keys)+len(combined))
	for _, k := range keys {
		hashes = append(hashes, k.Hash)
	}
	for _, k := range combined {
		hashes = append(hashes, k.Hash)
	}
	return hashes, nil
}
