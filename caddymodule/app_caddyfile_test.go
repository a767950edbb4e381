package caddymodule

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
)

func TestAppCaddyfile(t *testing.T) {
	d := caddyfile.NewTestDispenser(`timeblock {
		store postgres postgres://tb@db:5432/tb
		secret {env.TIMEBLOCK_SECRET}
		terms_version 2026-11
		session_ttl 12h
		grace_period 3d
		max_request_body 1MiB
		pool llama {
			model meta-llama/Llama-3.3-70B-Instruct
			name "Llama 70B"
			description "fast"
			status funding
			funding_goal 1200
			funding_deadline 2027-03-01T00:00:00Z
			max_pledge_seats 3
			slots 8
			block asia 30
			block europe 40.50
			annual_discount 0.15
			manual_provisioning
			max_output_tokens 4096
		}
		pool small {
			model m
			block americas 5
			manual_provisioning false
		}
	}`)
	var app App
	if err := app.UnmarshalCaddyfile(d); err != nil {
		t.Fatal(err)
	}
	got, _ := json.Marshal(app)
	want := `{"store":{"backend":"postgres","dsn":"postgres://tb@db:5432/tb"},"secret":"{env.TIMEBLOCK_SECRET}",` +
		`"terms_version":"2026-11","pools":[{"slug":"llama","model":"meta-llama/Llama-3.3-70B-Instruct","name":"Llama 70B",` +
		`"description":"fast","status":"funding","slots":8,"blocks":{"asia":"30","europe":"40.50"},"annual_discount":"0.15",` +
		`"manual_provisioning":true,"max_output_tokens":4096,"funding_goal":"1200","funding_deadline":"2027-03-01T00:00:00Z","max_pledge_seats":3},{"slug":"small","model":"m","blocks":{"americas":"5"}}],` +
		`"session_ttl":43200000000000,"grace_period":259200000000000,"max_request_body":1048576}`
	if string(got) != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}

func TestAppCaddyfileErrors(t *testing.T) {
	for _, tc := range []struct{ name, input, want string }{
		{"unknown option", "timeblock {\n bogus 1\n}", `unknown timeblock option "bogus"`},
		{"unknown store", "timeblock {\n store redis\n}", `unknown store "redis"`},
		{"postgres without dsn", "timeblock {\n store postgres\n}", "needs a DSN"},
		{"store twice", "timeblock {\n store embedded\n store embedded\n}", "store is already set"},
		{"secret without value", "timeblock {\n secret\n}", "secret needs a value"},
		{"bad size", "timeblock {\n max_request_body lots\n}", "is not a size"},
		{"bad duration", "timeblock {\n session_ttl soon\n}", "session_ttl"},
		{"pool without slug", "timeblock {\n pool {\n model m\n }\n}", "pool needs a slug"},
		{"slots not a number", "timeblock {\n pool p {\n slots many\n }\n}", `slots: "many" is not a whole number`},
		{"unknown block", "timeblock {\n pool p {\n block mars 3\n }\n}", `unknown block "mars"`},
		{"block without price", "timeblock {\n pool p {\n block asia\n }\n}", "block needs a name and a monthly price"},
		{"bad price", "timeblock {\n pool p {\n block asia 1e3\n }\n}", "not a plain decimal"},
		{"negative price", "timeblock {\n pool p {\n block asia -3\n }\n}", "not a plain decimal"},
		{"block twice", "timeblock {\n pool p {\n block asia 3\n block asia 4\n }\n}", "priced twice"},
		{"price under the processor minimum", "timeblock {\n pool cheap {\n block asia 0.01\n }\n}", "pool cheap: block asia: 0.01 is under 0.50 USD"},
		{"free block", "timeblock {\n pool p {\n block europe 0\n }\n}", "pool p: block europe: 0 is under 0.50 USD, the least a payment processor charges (Stripe's minimum): free blocks are not supported"},
		{"year under the processor minimum", "timeblock {\n pool cheap {\n block europe 4\n block asia 0.50\n annual_discount 0.95\n }\n}",
			"pool cheap: block asia: a year of one seat at 0.50 with annual_discount 0.95 costs 0.3, under 0.50 USD"},
		{"bad discount", "timeblock {\n pool p {\n annual_discount ten\n }\n}", "annual_discount"},
		{"bad bool", "timeblock {\n pool p {\n manual_provisioning maybe\n }\n}", "is not true or false"},
		{"unknown pool option", "timeblock {\n pool p {\n gpus 8\n }\n}", `unknown pool option "gpus"`},
		{"bad funding goal", "timeblock {\n pool p {\n funding_goal lots\n }\n}", "pool p: funding_goal"},
		{"zero funding goal", "timeblock {\n pool p {\n funding_goal 0\n }\n}", "not a positive monthly amount"},
		{"bad funding deadline", "timeblock {\n pool p {\n funding_deadline tomorrow\n }\n}", "not an RFC 3339 time"},
		{"max pledge seats not a number", "timeblock {\n pool p {\n max_pledge_seats half\n }\n}", `max_pledge_seats: "half" is not a whole number`},
		{"zero max pledge seats", "timeblock {\n pool p {\n max_pledge_seats 0\n }\n}", "pool p: max_pledge_seats must be a positive number of seats"},
		{"negative max pledge seats", "timeblock {\n pool p {\n max_pledge_seats -2\n }\n}", "pool p: max_pledge_seats must be a positive number of seats"},
		{"max pledge seats without a value", "timeblock {\n pool p {\n max_pledge_seats\n }\n}", "max_pledge_seats"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var app App
			err := app.UnmarshalCaddyfile(caddyfile.NewTestDispenser(tc.input))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error = %v, want it to contain %q", err, tc.want)
			}
			if !strings.Contains(err.Error(), "Testfile:") {
				t.Errorf("error %q does not name the file and line", err)
			}
		})
	}
}

func TestAppValidate(t *testing.T) {
	valid := func() *App {
		p := &PoolConfig{Slug: "p", Model: "m", Blocks: map[string]string{"asia": "10"}}
		p.provision()
		return &App{Store: &StoreConfig{Backend: "embedded"}, Secret: strings.Repeat("s", 16), Pools: []*PoolConfig{p}}
	}
	if err := valid().Validate(); err != nil {
		t.Fatalf("valid config rejected: %v", err)
	}
	// The processor's minimum itself is a price: a month of one seat charges 0.50, a year 0.60.
	atMinimum := valid()
	atMinimum.Pools[0].Blocks = map[string]string{"asia": "0.50", "europe": "0.5"}
	atMinimum.Pools[0].AnnualDiscount = "0.9"
	if err := atMinimum.Validate(); err != nil {
		t.Fatalf("prices at the processor minimum rejected: %v", err)
	}
	for _, tc := range []struct {
		name   string
		mutate func(a *App)
		want   string
	}{
		{"no secret", func(a *App) { a.Secret = "" }, "TIMEBLOCK_SECRET"},
		{"short secret", func(a *App) { a.Secret = "short" }, "too short"},
		{"postgres without dsn", func(a *App) { a.Store = &StoreConfig{Backend: "postgres"} }, "needs a DSN"},
		{"pool without model", func(a *App) { a.Pools[0].Model = "" }, "model is required"},
		{"pool without blocks", func(a *App) { a.Pools[0].Blocks = nil }, "at least one block"},
		{"bad status", func(a *App) { a.Pools[0].Status = "open" }, `unknown status "open"`},
		{"zero slots", func(a *App) { a.Pools[0].Slots = 0 }, "slots must be at least 1"},
		{"discount of one", func(a *App) { a.Pools[0].AnnualDiscount = "1" }, "below 1"},
		{"price under the processor minimum", func(a *App) { a.Pools[0].Blocks["asia"] = "0.49" }, `pool "p": block asia price: 0.49 is under 0.50 USD`},
		{"free block", func(a *App) { a.Pools[0].Blocks["europe"] = "0" }, `pool "p": block europe price: 0 is under 0.50 USD`},
		{"year under the processor minimum", func(a *App) { a.Pools[0].AnnualDiscount = "0.999" },
			`pool "p": block asia price: a year of one seat at 10 with annual_discount 0.999 costs 0.12, under 0.50 USD`},
		{"duplicate pool", func(a *App) { a.Pools = append(a.Pools, a.Pools[0]) }, "defined twice"},
		{"funding without a goal", func(a *App) { a.Pools[0].Status = "funding" }, "status funding needs funding_goal"},
		{"bad deadline", func(a *App) { a.Pools[0].FundingDeadline = "2027-13-01" }, "not an RFC 3339 time"},
		{"max pledge seats over the slots", func(a *App) { a.Pools[0].Slots, a.Pools[0].MaxPledgeSeats = 4, 5 },
			`pool "p": max_pledge_seats 5 is more than the pool's 4 slots (seats per hour)`},
		{"negative max pledge seats", func(a *App) { a.Pools[0].MaxPledgeSeats = -1 }, "max_pledge_seats must be a positive number"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := valid()
			tc.mutate(a)
			err := a.Validate()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error = %v, want it to contain %q", err, tc.want)
			}
		})
	}
}

func TestPoolIDIsStableAndDistinct(t *testing.T) {
	a := (&PoolConfig{Slug: "llama"}).pool(time.Time{})
	b := (&PoolConfig{Slug: "llama"}).pool(time.Time{})
	c := (&PoolConfig{Slug: "qwen"}).pool(time.Time{})
	if a.ID != b.ID || a.ID == c.ID || len(a.ID) != 36 {
		t.Fatalf("pool ids: %s %s %s", a.ID, b.ID, c.ID)
	}
}

func TestHandlerCaddyfiles(t *testing.T) {
	var g Gate
	if err := g.UnmarshalCaddyfile(caddyfile.NewTestDispenser("timeblock_gate {\n lane_wait 0\n}")); err != nil {
		t.Fatal(err)
	}
	if g.LaneWait >= 0 {
		t.Errorf("lane_wait 0 should mean reject at once, got %v", g.LaneWait)
	}
	if err := g.UnmarshalCaddyfile(caddyfile.NewTestDispenser("timeblock_gate {\n lane_wait 250ms\n}")); err != nil || g.LaneWait != caddy.Duration(250e6) {
		t.Errorf("lane_wait 250ms: %v %v", g.LaneWait, err)
	}
	if err := g.UnmarshalCaddyfile(caddyfile.NewTestDispenser("timeblock_gate {\n boost_priority off\n}")); err != nil || !g.NoBoostPriority {
		t.Errorf("boost_priority off: %v %v", g.NoBoostPriority, err)
	}
	if err := new(Gate).UnmarshalCaddyfile(caddyfile.NewTestDispenser("timeblock_gate {\n boost_priority maybe\n}")); err == nil {
		t.Error("boost_priority maybe accepted")
	}
	if err := new(Gate).UnmarshalCaddyfile(caddyfile.NewTestDispenser("timeblock_gate {\n lanes 3\n}")); err == nil {
		t.Error("unknown gate option accepted")
	}

	var tr Translate
	if err := tr.UnmarshalCaddyfile(caddyfile.NewTestDispenser("timeblock_translate messages {\n path /upstream/v1/messages\n}")); err != nil {
		t.Fatal(err)
	}
	if tr.Upstream != "messages" || tr.Path != "/upstream/v1/messages" {
		t.Errorf("translate = %+v", tr)
	}
	for _, bad := range []string{"timeblock_translate", "timeblock_translate grpc", "timeblock_translate chat {\n path relative\n}"} {
		if err := new(Translate).UnmarshalCaddyfile(caddyfile.NewTestDispenser(bad)); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	if err := new(Accounts).UnmarshalCaddyfile(caddyfile.NewTestDispenser("timeblock_accounts {\n foo\n}")); err == nil {
		t.Error("accounts option accepted")
	}
}

func TestOperatorWebhookCaddyfile(t *testing.T) {
	var app App
	err := app.UnmarshalCaddyfile(caddyfile.NewTestDispenser(`timeblock {
		operator_webhook https://ops.example.com/timeblock {env.TIMEBLOCK_WEBHOOK_SECRET}
	}`))
	if err != nil {
		t.Fatal(err)
	}
	got, _ := json.Marshal(app.OperatorWebhook)
	if want := `{"url":"https://ops.example.com/timeblock","secret":"{env.TIMEBLOCK_WEBHOOK_SECRET}"}`; string(got) != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	for _, tc := range []struct{ name, input, want string }{
		{"no secret", "timeblock {\n operator_webhook https://ops.example.com/hook\n}", "operator_webhook needs a URL and a signing secret"},
		{"no arguments", "timeblock {\n operator_webhook\n}", "operator_webhook needs a URL and a signing secret"},
		{"three arguments", "timeblock {\n operator_webhook https://a.example/h 0123456789abcdef extra\n}", "operator_webhook needs a URL and a signing secret"},
		{"twice", "timeblock {\n operator_webhook https://a.example/h 0123456789abcdef\n operator_webhook https://b.example/h 0123456789abcdef\n}",
			"operator_webhook is already set"},
		{"not http", "timeblock {\n operator_webhook ftp://a.example/h 0123456789abcdef\n}", `"ftp://a.example/h" is not an http or https URL`},
		{"no scheme", "timeblock {\n operator_webhook ops.example.com/h 0123456789abcdef\n}", "is not an http or https URL; write it in full"},
		{"short secret", "timeblock {\n operator_webhook https://a.example/h tooshort\n}", "signing secret is too short (8 characters); use at least 16"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var app App
			err := app.UnmarshalCaddyfile(caddyfile.NewTestDispenser(tc.input))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error = %v, want it to contain %q", err, tc.want)
			}
			if !strings.Contains(err.Error(), "Testfile:") {
				t.Errorf("error %q does not name the file and line", err)
			}
		})
	}
	// Placeholders are checked once replaced, by Validate.
	valid := &App{Store: &StoreConfig{Backend: "embedded"}, Secret: strings.Repeat("s", 16),
		OperatorWebhook: &OperatorWebhookConfig{URL: "http://127.0.0.1:9000/hook", Secret: strings.Repeat("w", 16)}}
	if err := valid.Validate(); err != nil {
		t.Fatalf("valid webhook rejected: %v", err)
	}
	t.Setenv("TB_TEST_WEBHOOK_SECRET", "short")
	w := &OperatorWebhookConfig{URL: "https://ops.example.com/h", Secret: "{env.TB_TEST_WEBHOOK_SECRET}"}
	w.provision(caddy.NewReplacer())
	bad := &App{Store: &StoreConfig{Backend: "embedded"}, Secret: strings.Repeat("s", 16), OperatorWebhook: w}
	if err := bad.Validate(); err == nil || !strings.Contains(err.Error(), "timeblock: operator_webhook: the signing secret is too short (5 characters)") {
		t.Errorf("a short secret from the environment: error = %v", err)
	}
}
