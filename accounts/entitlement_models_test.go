package accounts_test

import (
	"testing"
	"time"

	"github.com/timeblock/timeblock/accounts"
)

func TestEntitlementModels(t *testing.T) {
	qwen, llama, mistral := entPool("p1", "qwen3-32b"), entPool("p2", "llama-70b"), entPool("p3", "mistral")
	qwen.ModelName = "Qwen3 32B"
	pools := map[string]*accounts.Pool{qwen.ID: qwen, llama.ID: llama, mistral.ID: mistral}
	evening := entSub("s1", qwen.ID, 1, accounts.BlockAmericas)
	evening.CreatedAt = entAt(-10, 0, 0)
	morning := entSub("s2", qwen.ID, 1, accounts.BlockAsia)
	morning.CreatedAt = entAt(-30, 0, 0) // the earlier start wins
	ending := entSub("s3", llama.ID, 1, accounts.BlockEurope)
	ending.CancelAtPeriodEnd = true
	boostOnly := entSub("s4", mistral.ID, 1, accounts.BlockEurope)
	subs := map[string]*accounts.Subscription{evening.ID: evening, morning.ID: morning, ending.ID: ending, boostOnly.ID: boostOnly}
	ck := combined(lane("s1"), lane("s2"), lane("s3"), boost("s4"))
	now := entAt(0, 12, 0) // europe: only llama's hours are open
	e := accounts.ResolveCombinedEntitlement(ck, subs, pools, now)

	got := e.Models(now, nil)
	want := []accounts.HeldModel{
		{ID: "qwen3-32b", Name: "Qwen3 32B", Since: entAt(-30, 0, 0), MaxOutputTokens: 4096},
		{ID: "llama-70b", Name: "llama-70b", MaxOutputTokens: 4096},
	}
	if len(got) != len(want) {
		t.Fatalf("Models = %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("Models[%d] = %+v, want %+v", i, got[i], want[i])
		}
	}
	// Past the end of its period, a grant that does not renew serves no more.
	if got := e.Models(entAt(21, 0, 0), nil); len(got) != 1 || got[0].ID != "qwen3-32b" {
		t.Errorf("after llama's period: %+v", got)
	}
	// Appends to dst.
	if got := e.Models(now, make([]accounts.HeldModel, 1, 4)); len(got) != 3 {
		t.Errorf("appended %d models after one, want 3", len(got))
	}
	if n := testing.AllocsPerRun(50, func() { e.Models(now, make([]accounts.HeldModel, 0, 4)[:0]) }); n > 1 {
		t.Errorf("Models allocates %v times", n)
	}
	denied := &accounts.Entitlement{Denied: accounts.DeniedRevoked, Grants: e.Grants}
	if got := denied.Models(now, nil); len(got) != 0 {
		t.Errorf("a denied key holds %+v", got)
	}
	var none *accounts.Entitlement
	if got := none.Models(time.Now(), nil); got != nil {
		t.Errorf("nil entitlement: %+v", got)
	}
}
