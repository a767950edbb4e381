package api_test

import (
	"bytes"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/timeblock/timeblock/accounts"
)

var (
	combinedRowFields = []string{"id", "token", "label", "isActive", "createdAt", "rolesSelectable", "members"}
	memberFields      = []string{"pledgeId", "role", "poolSlug", "pledgeLabel", "pledgeStatus", "keyActive", "hours",
		"currentPeriodEnd", "windowOpenNow", "maxParallel"}
)

func TestCombinedKeysHTTP(t *testing.T) {
	forEachStore(t, func(t *testing.T, st accounts.Store) {
		e := newHTTPEnv(t, st, 1<<10)
		uid, tok := e.user("ada@example.com", "")
		_, eveTok := e.user("eve@example.com", "")
		alpha, beta := e.pool("alpha", accounts.PoolActive, 10, false), e.pool("beta", accounts.PoolActive, 10, false)
		eu := e.sub(uid, alpha, accounts.SubActive, 2, accounts.BlockEurope)
		all := e.sub(uid, alpha, accounts.SubActive, 1, accounts.BlockAsia, accounts.BlockEurope, accounts.BlockAmericas)
		am := e.sub(uid, beta, accounts.SubActive, 1, accounts.BlockAmericas)

		if rows := e.call("GET", "/api/meta-keys", tok, "").want(t, 200).array(t); len(rows) != 0 {
			t.Errorf("fresh user lists %d combined keys", len(rows))
		}

		created := e.call("POST", "/api/meta-keys", tok,
			fmt.Sprintf(`{"pledgeIds":[%q,%q],"label":"team","roles":{%q:"boost"}}`, eu.ID, all.ID, eu.ID)).
			want(t, 201).object(t, "id", "token", "label", "createdAt")
		token := created["token"].(string)
		if created["label"] != "team" || !regexp.MustCompile(`^sk-compat-meta-[A-Za-z0-9_-]{43}$`).MatchString(token) ||
			!asTime(t, created["createdAt"]).Equal(e.clock()) {
			t.Errorf("created = %v", created)
		}
		raw := dumpStore(t, st)
		if bytes.Contains(raw, []byte(token)) || bytes.Contains(raw, []byte(strings.TrimPrefix(token, "sk-compat-meta-"))) {
			t.Error("the store holds the combined token in the clear")
		}

		rows := e.call("GET", "/api/meta-keys", tok, "").want(t, 200).array(t)
		if len(rows) != 1 {
			t.Fatalf("%d rows", len(rows))
		}
		row := rows[0]
		exactFields(t, row, combinedRowFields...)
		if row["id"] != created["id"] || row["token"] != token || row["label"] != "team" || row["isActive"] != true ||
			row["rolesSelectable"] != true || row["createdAt"] != created["createdAt"] {
			t.Errorf("row = %v", row)
		}
		members := keysMembers(t, row)
		wantMember(t, members[0], map[string]any{
			"pledgeId": eu.ID, "role": "boost", "poolSlug": "alpha", "pledgeLabel": "Model alpha europe x2",
			"pledgeStatus": "active", "keyActive": true, "hours": "8-15", "windowOpenNow": true, "maxParallel": 0.0,
		})
		wantMember(t, members[1], map[string]any{
			"pledgeId": all.ID, "role": "lane", "poolSlug": "alpha", "pledgeLabel": "Model alpha asia+europe+americas",
			"pledgeStatus": "active", "keyActive": true, "hours": "0-23", "windowOpenNow": true, "maxParallel": 1.0,
		})
		if !asTime(t, members[0]["currentPeriodEnd"]).Equal(eu.CurrentPeriodEnd) {
			t.Errorf("currentPeriodEnd = %v", members[0]["currentPeriodEnd"])
		}

		id := created["id"].(string)
		// PATCH member-roles returns the list row.
		upd := e.call("PATCH", "/api/meta-keys/"+id+"/member-roles", tok, fmt.Sprintf(`{"roles":{%q:"lane"}}`, eu.ID)).
			want(t, 200).object(t, combinedRowFields...)
		if ms := keysMembers(t, upd); ms[0]["role"] != "lane" || ms[0]["maxParallel"] != 2.0 {
			t.Errorf("after roles: %v", ms)
		}
		e.call("PATCH", "/api/meta-keys/"+id+"/member-roles", tok, fmt.Sprintf(`{"roles":{%q:"boost",%q:"boost"}}`, eu.ID, all.ID)).
			want(t, 400, "rule 2", "rule 5")
		e.call("PATCH", "/api/meta-keys/"+id+"/member-roles", tok, fmt.Sprintf(`{"roles":{%q:"boost"}}`, all.ID)).
			want(t, 400, "rule 4", "rule 5")
		e.call("PATCH", "/api/meta-keys/"+id+"/member-roles", tok, fmt.Sprintf(`{"roles":{%q:"lane"}}`, am.ID)).
			want(t, 400, "rule 5", "not a member")
		e.call("PATCH", "/api/meta-keys/"+id+"/member-roles", tok, `{"roles":{"x":1}}`).want(t, 400, "string")
		e.call("PATCH", "/api/meta-keys/"+id+"/member-roles", tok, `{"roles":["lane"]}`).want(t, 400, "roles")
		e.call("PATCH", "/api/meta-keys/"+id+"/member-roles", tok, `{}`).want(t, 400, "roles is required")
		e.call("PATCH", "/api/meta-keys/"+id+"/member-roles", tok, `{"roles":{"`+strings.Repeat("x", 2000)+`":"lane"}}`).want(t, 413)
		e.call("PATCH", "/api/meta-keys/"+id+"/member-roles", eveTok, `{"roles":{}}`).want(t, 404, "not found")

		// PUT members returns the list row; retained keep roles, added are lanes.
		upd = e.call("PUT", "/api/meta-keys/"+id+"/members", tok, fmt.Sprintf(`{"pledgeIds":[%q,%q]}`, eu.ID, am.ID)).
			want(t, 200).object(t, combinedRowFields...)
		ms := keysMembers(t, upd)
		if len(ms) != 2 || ms[0]["pledgeId"] != eu.ID || ms[1]["pledgeId"] != am.ID || ms[1]["role"] != "lane" ||
			ms[1]["poolSlug"] != "beta" || upd["rolesSelectable"] != false {
			t.Errorf("after members: %v", upd)
		}
		e.call("PUT", "/api/meta-keys/"+id+"/members", tok, fmt.Sprintf(`{"pledgeIds":[%q]}`, eu.ID)).want(t, 400, "rule 1")
		e.call("PUT", "/api/meta-keys/"+id+"/members", tok, `{}`).want(t, 400, "pledgeIds is required")
		e.call("PUT", "/api/meta-keys/"+id+"/members", tok, `{"pledgeIds":["`+strings.Repeat("x", 2000)+`"]}`).want(t, 413)
		e.call("PUT", "/api/meta-keys/"+id+"/members", tok, `{"pledgeIds":"a,b"}`).want(t, 400, "pledgeIds")
		e.call("PUT", "/api/meta-keys/"+id+"/members", eveTok, fmt.Sprintf(`{"pledgeIds":[%q,%q]}`, eu.ID, am.ID)).want(t, 404)

		// PATCH label returns the list row.
		upd = e.call("PATCH", "/api/meta-keys/"+id, tok, `{"label":"renamed"}`).want(t, 200).object(t, combinedRowFields...)
		if upd["label"] != "renamed" || upd["token"] != token {
			t.Errorf("after label: %v", upd)
		}
		e.call("PATCH", "/api/meta-keys/"+id, tok, `{}`).want(t, 400, "label is required")
		e.call("PATCH", "/api/meta-keys/"+id, tok, `{"label":false}`).want(t, 400, "label")
		e.call("PATCH", "/api/meta-keys/"+id, tok, `{"label":"`+strings.Repeat("x", 2000)+`"}`).want(t, 413)
		e.call("PATCH", "/api/meta-keys/"+id, eveTok, `{"label":"x"}`).want(t, 404)
		e.call("PATCH", "/api/meta-keys/nope", tok, `{"label":"x"}`).want(t, 404)

		// DELETE leaves the subscriptions active and keyless.
		e.call("DELETE", "/api/meta-keys/"+id, eveTok, "").want(t, 404)
		del := e.call("DELETE", "/api/meta-keys/"+id, tok, "").want(t, 200).object(t, "deleted")
		if del["deleted"] != true {
			t.Errorf("delete = %v", del)
		}
		e.call("DELETE", "/api/meta-keys/"+id, tok, "").want(t, 404)
		e.call("POST", "/api/keys/subscription", tok, fmt.Sprintf(`{"subscriptionId":%q}`, eu.ID)).want(t, 201)
	})
}

func TestCombinedKeyRulesHTTP(t *testing.T) {
	forEachStore(t, func(t *testing.T, st accounts.Store) {
		e := newHTTPEnv(t, st, 1<<10)
		uid, tok := e.user("ada@example.com", "")
		eveID, _ := e.user("eve@example.com", "")
		alpha, beta := e.pool("alpha", accounts.PoolActive, 10, false), e.pool("beta", accounts.PoolActive, 10, false)
		a1 := e.sub(uid, alpha, accounts.SubActive, 1, accounts.BlockEurope)
		a2 := e.sub(uid, alpha, accounts.SubActive, 1, accounts.BlockEurope, accounts.BlockAmericas)
		b1 := e.sub(uid, beta, accounts.SubActive, 1, accounts.BlockEurope)
		keyed := e.sub(uid, alpha, accounts.SubActive, 1, accounts.BlockAsia)
		e.call("POST", "/api/keys/subscription", tok, fmt.Sprintf(`{"subscriptionId":%q}`, keyed.ID)).want(t, 201)
		pastDue := e.sub(uid, alpha, accounts.SubPastDue, 1, accounts.BlockAsia)
		theirs := e.sub(eveID, alpha, accounts.SubActive, 1, accounts.BlockAsia)

		cases := []struct {
			name, body string
			status     int
			want       []string
		}{
			{"rule 1: fewer than 2", fmt.Sprintf(`{"pledgeIds":[%q]}`, a1.ID), 400, []string{"rule 1", "at least 2"}},
			{"rule 1: missing pledgeIds", `{"label":"x"}`, 400, []string{"rule 1"}},
			{"rule 1: duplicates", fmt.Sprintf(`{"pledgeIds":[%q,%q]}`, a1.ID, a1.ID), 400, []string{"rule 1", "listed twice"}},
			{"rule 1: not active", fmt.Sprintf(`{"pledgeIds":[%q,%q]}`, a1.ID, pastDue.ID), 400, []string{"rule 1", "past_due"}},
			{"rule 1: keyed", fmt.Sprintf(`{"pledgeIds":[%q,%q]}`, a1.ID, keyed.ID), 400, []string{"rule 1", "has a key"}},
			{"rule 2: no lane", fmt.Sprintf(`{"pledgeIds":[%q,%q],"roles":{%q:"boost",%q:"boost"}}`, a1.ID, a2.ID, a1.ID, a2.ID), 400, []string{"rule 2"}},
			{"rule 3: boost across pools", fmt.Sprintf(`{"pledgeIds":[%q,%q],"roles":{%q:"boost"}}`, a1.ID, b1.ID, b1.ID), 400, []string{"rule 3"}},
			{"rule 4: boost uncovered", fmt.Sprintf(`{"pledgeIds":[%q,%q],"roles":{%q:"boost"}}`, a1.ID, a2.ID, a2.ID), 400, []string{"rule 4", "16-23"}},
			{"bad role", fmt.Sprintf(`{"pledgeIds":[%q,%q],"roles":{%q:"turbo"}}`, a1.ID, a2.ID, a2.ID), 400, []string{"lane or boost"}},
			{"another user's subscription", fmt.Sprintf(`{"pledgeIds":[%q,%q]}`, a1.ID, theirs.ID), 404, []string{"not found"}},
			{"unknown subscription", fmt.Sprintf(`{"pledgeIds":[%q,"nope"]}`, a1.ID), 404, []string{"not found"}},
			{"wrong type", `{"pledgeIds":"abc"}`, 400, []string{"pledgeIds"}},
			{"wrong element type", `{"pledgeIds":[1,2]}`, 400, []string{"string"}},
			{"malformed", `{"pledgeIds":[`, 400, []string{"not valid JSON"}},
			{"not an object", `"pledgeIds"`, 400, nil},
			{"empty body", ``, 400, []string{"empty"}},
			{"oversized", `{"label":"` + strings.Repeat("x", 2000) + `"}`, 413, nil},
		}
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				e.call("POST", "/api/meta-keys", tok, c.body).want(t, c.status, c.want...)
			})
		}
		if rows := e.call("GET", "/api/meta-keys", tok, "").array(t); len(rows) != 0 {
			t.Errorf("refused creations left %d combined keys", len(rows))
		}
		// Rule 6 over HTTP: an added member must be active and keyless.
		id := e.call("POST", "/api/meta-keys", tok, fmt.Sprintf(`{"pledgeIds":[%q,%q]}`, a1.ID, b1.ID)).want(t, 201).
			object(t, "id", "token", "label", "createdAt")["id"].(string)
		e.call("PUT", "/api/meta-keys/"+id+"/members", tok, fmt.Sprintf(`{"pledgeIds":[%q,%q]}`, a1.ID, keyed.ID)).want(t, 400, "rule 6", "has a key")
		e.call("PUT", "/api/meta-keys/"+id+"/members", tok, fmt.Sprintf(`{"pledgeIds":[%q,%q]}`, a1.ID, pastDue.ID)).want(t, 400, "rule 6", "past_due")
		// Rule 3 through a role change (rule 5).
		e.call("PATCH", "/api/meta-keys/"+id+"/member-roles", tok, fmt.Sprintf(`{"roles":{%q:"boost"}}`, b1.ID)).want(t, 400, "rule 3", "rule 5")
	})
}

// keysMembers returns the members of a combined-key row, each checked for its fields.
func keysMembers(t *testing.T, row map[string]any) []map[string]any {
	t.Helper()
	list, ok := row["members"].([]any)
	if !ok {
		t.Fatalf("members = %v", row["members"])
	}
	out := make([]map[string]any, len(list))
	for i, m := range list {
		out[i] = m.(map[string]any)
		exactFields(t, out[i], memberFields...)
	}
	return out
}

// wantMember compares member fields; "hours" is given as a range "from-to".
func wantMember(t *testing.T, got map[string]any, want map[string]any) {
	t.Helper()
	for k, w := range want {
		g := got[k]
		if k == "hours" {
			var from, to int
			fmt.Sscanf(w.(string), "%d-%d", &from, &to)
			hs, _ := g.([]any)
			ok := len(hs) == to-from+1
			for i := 0; ok && i < len(hs); i++ {
				ok = hs[i] == float64(from+i)
			}
			if !ok {
				t.Errorf("hours = %v, want %s", g, w)
			}
			continue
		}
		if g != w {
			t.Errorf("%s = %v (%T), want %v", k, g, g, w)
		}
	}
}
