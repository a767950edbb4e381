package caddymodule

import (
	"strconv"
	"strings"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/dustin/go-humanize"

	"github.com/timeblock/timeblock/accounts"
)

func init() {
	httpcaddyfile.RegisterGlobalOption("timeblock", parseAppOptions)
}

// parseAppOptions turns the `timeblock { ... }` global option block into the
// timeblock app.
func parseAppOptions(d *caddyfile.Dispenser, _ any) (any, error) {
	app := new(App)
	if err := app.UnmarshalCaddyfile(d); err != nil {
		return nil, err
	}
	return httpcaddyfile.App{Name: "timeblock", Value: caddyconfig.JSON(app, nil)}, nil
}

// UnmarshalCaddyfile sets up the app from Caddyfile tokens. Syntax:
//
//	timeblock {
//		store embedded [path]
//		store postgres <dsn>
//		secret <value>
//		terms_version <string>
//		session_ttl <duration>
//		sign_up open|invite
//		grace_period <duration>
//		max_request_body <size>
//		lifecycle_interval <duration>
//		smtp <host:port> {
//			from <address>
//			username <name>
//			password <password>
//			operator <address>
//		}
//		operator_webhook <url> <secret>
//		operators <email>...
//		seller {
//			name <text>
//			address <text>
//			email <address>
//			tax_id <text>
//		}
//		billing stripe {
//			secret_key <sk_live_... | sk_test_... | rk_...>
//			webhook_secret <whsec_...>
//			publishable_key <pk_live_... | pk_test_...>
//			api_base <url>
//			statement_descriptor <suffix>
//		}
//		pool <slug> {
//			model <model id>
//			name <display name>
//			description <text>
//			status draft|funding|activating|active|paused
//			slots <seats per hour>
//			block asia|europe|americas <monthly USD per seat>
//			annual_discount <fraction>
//			manual_provisioning [true|false]
//			max_output_tokens <n>
//			funding_goal <monthly amount>
//			funding_deadline <RFC 3339 time>
//			max_pledge_seats <n>
//		}
//	}
func (a *App) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next() // option name
	if d.NextArg() {
		return d.ArgErr()
	}
	for d.NextBlock(0) {
		switch d.Val() {
		case "store":
			if a.Store != nil {
				return d.Err("store is already set")
			}
			if !d.NextArg() {
				return d.Err("store needs a backend: embedded [path] or postgres <dsn>")
			}
			a.Store = &StoreConfig{Backend: d.Val()}
			switch a.Store.Backend {
			case "embedded":
				if d.NextArg() {
					a.Store.Path = d.Val()
				}
			case "postgres":
				if !d.NextArg() {
					return d.Err("store postgres needs a DSN, e.g. store postgres postgres://user@host:5432/db")
				}
				a.Store.DSN = d.Val()
			default:
				return d.Errf("unknown store %q (use embedded or postgres)", a.Store.Backend)
			}
			if d.NextArg() {
				return d.ArgErr()
			}
		case "secret":
			if err := singleArg(d, &a.Secret); err != nil {
				return err
			}
		case "terms_version":
			if err := singleArg(d, &a.TermsVersion); err != nil {
				return err
			}
		case "session_ttl":
			if err := durationArg(d, &a.SessionTTL); err != nil {
				return err
			}
		case "sign_up":
			if err := singleArg(d, &a.SignUp); err != nil {
				return err
			}
			if a.SignUp != "open" && a.SignUp != "invite" {
				return d.Errf("sign_up %q: use open (anyone who signs in becomes a user) or invite (only users created with POST /timeblock/users)", a.SignUp)
			}
		case "grace_period":
			if err := durationArg(d, &a.GracePeriod); err != nil {
				return err
			}
		case "max_request_body":
			var s string
			if err := singleArg(d, &s); err != nil {
				return err
			}
			n, err := humanize.ParseBytes(s)
			if err != nil || n == 0 {
				return d.Errf("max_request_body: %q is not a size such as 32MiB", s)
			}
			a.MaxRequestBody = int64(n)
		case "lifecycle_interval":
			if err := durationArg(d, &a.LifecycleInterval); err != nil {
				return err
			}
		case "smtp":
			if a.SMTP != nil {
				return d.Err("smtp is already set")
			}
			a.SMTP = new(SMTPConfig)
			if err := singleArg(d, &a.SMTP.Addr); err != nil {
				return d.Err("smtp needs the mail server address, e.g. smtp mail.example.com:587 { from keys@example.com }")
			}
			for nesting := d.Nesting(); d.NextBlock(nesting); {
				var err error
				switch d.Val() {
				case "from":
					err = singleArg(d, &a.SMTP.From)
				case "username":
					err = singleArg(d, &a.SMTP.Username)
				case "password":
					err = singleArg(d, &a.SMTP.Password)
				case "operator":
					err = singleArg(d, &a.SMTP.Operator)
				default:
					err = d.Errf("unknown smtp option %q", d.Val())
				}
				if err != nil {
					return err
				}
			}
		case "operators":
			emails := d.RemainingArgs()
			if len(emails) == 0 {
				return d.Err("operators needs the operators' sign-in e-mail addresses (or identity header values), e.g. operators ops@example.com ada@example.com")
			}
			for _, e := range emails {
				if strings.Contains(e, ",") {
					return d.Errf("operators: %q: separate the addresses with spaces, not commas", e)
				}
				a.Operators = append(a.Operators, strings.ToLower(e))
			}
		case "seller":
			if err := parseSeller(d, a); err != nil {
				return err
			}
		case "operator_webhook":
			if a.OperatorWebhook != nil {
				return d.Err("operator_webhook is already set")
			}
			args := d.RemainingArgs()
			if len(args) != 2 {
				return d.Errf("operator_webhook needs a URL and a signing secret, e.g. " +
					"operator_webhook https://ops.example.com/timeblock {env.TIMEBLOCK_WEBHOOK_SECRET}")
			}
			a.OperatorWebhook = &OperatorWebhookConfig{URL: args[0], Secret: args[1]}
			if !strings.Contains(args[0]+args[1], "{") { // placeholders are checked once replaced (Validate)
				if err := a.OperatorWebhook.validate(); err != nil {
					return d.Err(err.Error())
				}
			}
		case "billing":
			if a.Billing != nil {
				return d.Err(errBillingTwice.Error())
			}
			b, err := parseBilling(d)
			if err != nil {
				return err
			}
			a.Billing = b
		case "pool":
			p, err := parsePool(d)
			if err != nil {
				return err
			}
			a.Pools = append(a.Pools, p)
		default:
			return d.Errf("unknown timeblock option %q", d.Val())
		}
	}
	return nil
}

func parsePool(d *caddyfile.Dispenser) (*PoolConfig, error) {
	p := &PoolConfig{Blocks: map[string]string{}}
	if !d.NextArg() {
		return nil, d.Err("pool needs a slug, e.g. pool llama-70b { ... }")
	}
	p.Slug = d.Val()
	if d.NextArg() {
		return nil, d.ArgErr()
	}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		var err error
		switch d.Val() {
		case "model":
			err = singleArg(d, &p.Model)
		case "name":
			err = singleArg(d, &p.Name)
		case "description":
			err = singleArg(d, &p.Description)
		case "status":
			err = singleArg(d, &p.Status)
		case "slots":
			err = intArg(d, &p.Slots)
		case "max_output_tokens":
			err = intArg(d, &p.MaxOutputTokens)
		case "funding_goal":
			err = singleArg(d, &p.FundingGoal)
			if err == nil {
				if perr := accounts.CheckFundingGoal(p.FundingGoal); perr != nil {
					err = d.Errf("pool %s: funding_goal: %v", p.Slug, perr)
				}
			}
		case "funding_deadline":
			err = singleArg(d, &p.FundingDeadline)
			if err == nil {
				if _, perr := accounts.ParseFundingDeadline(p.FundingDeadline); perr != nil {
					err = d.Errf("pool %s: funding_deadline %v", p.Slug, perr)
				}
			}
		case "max_pledge_seats":
			err = intArg(d, &p.MaxPledgeSeats)
			if err == nil && p.MaxPledgeSeats < 1 {
				err = d.Errf("pool %s: max_pledge_seats must be a positive number of seats (the most one user may pledge per block), got %d", p.Slug, p.MaxPledgeSeats)
			}
		case "annual_discount":
			err = singleArg(d, &p.AnnualDiscount)
			if err == nil {
				if perr := accounts.CheckAnnualDiscount(p.AnnualDiscount); perr != nil {
					err = d.Errf("annual_discount: %v", perr)
				}
			}
		case "manual_provisioning":
			p.ManualProvisioning = true
			if d.NextArg() {
				v, perr := strconv.ParseBool(d.Val())
				if perr != nil {
					return nil, d.Errf("manual_provisioning: %q is not true or false", d.Val())
				}
				p.ManualProvisioning = v
			}
			if d.NextArg() {
				return nil, d.ArgErr()
			}
		case "block":
			args := d.RemainingArgs()
			if len(args) != 2 {
				return nil, d.Err("block needs a name and a monthly price per seat, e.g. block europe 40")
			}
			if perr := accounts.CheckBlockName(args[0]); perr != nil {
				return nil, d.Errf("%v", perr)
			}
			if perr := accounts.CheckBlockPrice(args[1]); perr != nil {
				return nil, d.Errf("pool %s: block %s: %v", p.Slug, args[0], perr)
			}
			if _, dup := p.Blocks[args[0]]; dup {
				return nil, d.Errf("block %s is priced twice", args[0])
			}
			p.Blocks[args[0]] = args[1]
		default:
			return nil, d.Errf("unknown pool option %q", d.Val())
		}
		if err != nil {
			return nil, err
		}
	}
	// Known only once every line is read: annual_discount may follow the blocks.
	for _, b := range accounts.Blocks {
		if price, ok := p.Blocks[string(b)]; ok {
			if err := accounts.CheckAnnualPrice(price, p.AnnualDiscount); err != nil {
				return nil, d.Errf("pool %s: block %s: %v", p.Slug, b, err)
			}
		}
	}
	return p, nil
}

func singleArg(d *caddyfile.Dispenser, dst *string) error {
	name := d.Val()
	if !d.NextArg() {
		return d.Errf("%s needs a value", name)
	}
	*dst = d.Val()
	if d.NextArg() {
		return d.Errf("%s takes one value", name)
	}
	return nil
}

func intArg(d *caddyfile.Dispenser, dst *int) error {
	name := d.Val()
	var s string
	if err := singleArg(d, &s); err != nil {
		return err
	}
	n, err := strconv.Atoi(s)
	if err != nil {
		return d.Errf("%s: %q is not a whole number", name, s)
	}
	*dst = n
	return nil
}

func durationArg(d *caddyfile.Dispenser, dst *caddy.Duration) error {
	name := d.Val()
	var s string
	if err := singleArg(d, &s); err != nil {
		return err
	}
	v, err := caddy.ParseDuration(s)
	if err != nil {
		return d.Errf("%s: %v", name, err)
	}
	*dst = caddy.Duration(v)
	return nil
}

var _ caddyfile.Unmarshaler = (*App)(nil)
