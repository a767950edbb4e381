package main

// Account setup through the operator endpoints and the account API, the way
// a user gets keys: a user, a test card, subscriptions to every block (so
// the keys are open at any hour) at the largest quantity (so lanes do not
// limit the load), a consumption key and a combined key.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/tidwall/gjson"
)

const seatsPerSubscription = 20 // the API's largest quantity

type keys struct {
	single   string   // consumption key of one subscription
	combined string   // combined key of several subscriptions
	lanes    int      // lanes of the combined key
	mem      []string // keys of the slow-stream check's pool
}

type accountClient struct {
	c     *caddyProc
	token string
	http  *http.Client
}

func (a *accountClient) call(method, url, token string, body any, want int) (gjson.Result, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return gjson.Result{}, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		return gjson.Result{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := a.http.Do(req)
	if err != nil {
		return gjson.Result{}, err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != want {
		return gjson.Result{}, fmt.Errorf("%s %s: %s: %s", method, url, resp.Status, b)
	}
	return gjson.GetBytes(b, "data"), nil
}

func (a *accountClient) api(method, path string, body any, want int) (gjson.Result, error) {
	return a.call(method, a.c.gateURL+path, a.token, body, want)
}

func (a *accountClient) subscribe(pool string) (string, error) {
	data, err := a.api(http.MethodPost, "/api/pools/"+pool+"/subscribe", map[string]any{
		"blocks": []string{"asia", "europe", "americas"}, "quantity": seatsPerSubscription,
	}, http.StatusCreated)
	if err != nil {
		return "", err
	}
	return data.Get("id").Str, nil
}

func (a *accountClient) key(subID string) (string, error) {
	data, err := a.api(http.MethodPost, "/api/keys/subscription", map[string]any{"subscriptionId": subID}, http.StatusCreated)
	if err != nil {
		return "", err
	}
	return data.Get("apiKey").Str, nil
}

// setupAccounts creates the keys: members subscriptions folded into the
// combined key, and memKeys keys in the mem pool.
func setupAccounts(c *caddyProc, members, memKeys int) (*keys, error) {
	a := &accountClient{c: c, http: &http.Client{Timeout: time.Minute}}
	user, err := a.call(http.MethodPost, c.adminURL+"/timeblock/users",
		"", map[string]any{"email": "loadbench@example.com", "name": "Load bench"}, http.StatusCreated)
	if err != nil {
		return nil, fmt.Errorf("creating the user: %w", err)
	}
	a.token = user.Get("sessionToken").Str
	if _, err := a.api(http.MethodPost, "/api/billing/setup-intent", map[string]any{"paymentMethod": "pm_card_visa"}, http.StatusOK); err != nil {
		return nil, fmt.Errorf("saving the test card: %w", err)
	}
	k := &keys{}
	sub, err := a.subscribe("bench")
	if err != nil {
		return nil, fmt.Errorf("subscribing: %w", err)
	}
	if k.single, err = a.key(sub); err != nil {
		return nil, fmt.Errorf("creating a key: %w", err)
	}
	ids := make([]string, members)
	for i := range ids {
		if ids[i], err = a.subscribe("bench"); err != nil {
			return nil, fmt.Errorf("subscribing: %w", err)
		}
	}
	data, err := a.api(http.MethodPost, "/api/meta-keys", map[string]any{"pledgeIds": ids, "label": "loadbench"}, http.StatusCreated)
	if err != nil {
		return nil, fmt.Errorf("creating the combined key: %w", err)
	}
	k.combined, k.lanes = data.Get("token").Str, members*seatsPerSubscription
	for range memKeys {
		sub, err := a.subscribe("mem")
		if err != nil {
			return nil, fmt.Errorf("subscribing to the mem pool: %w", err)
		}
		key, err := a.key(sub)
		if err != nil {
			return nil, fmt.Errorf("creating a key: %w", err)
		}
		k.mem = append(k.mem, key)
	}
	return k, nil
}
