// Package caddymodule holds Timeblock's Caddy modules and their Caddyfile
// parsing. Domain logic lives in accounts/ and translate/.
package caddymodule

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"github.com/caddyserver/caddy/v2"
	"go.uber.org/zap"

	"github.com/timeblock/timeblock/accounts"
	"github.com/timeblock/timeblock/accounts/api"
	"github.com/timeblock/timeblock/accounts/billing"
	"github.com/timeblock/timeblock/accounts/ledger"
	"github.com/timeblock/timeblock/accounts/operator"
	"github.com/timeblock/timeblock/accounts/operatorhook"
)

func init() {
	caddy.RegisterModule(App{})
}

// Defaults of the global options.
const (
	defaultSessionTTL        = 30 * 24 * time.Hour
	defaultGracePeriod       = 7 * 24 * time.Hour
	defaultMaxRequestBody    = 32 << 20
	minSecretLength          = 16
	defaultLifecycleInterval = time.Minute
)

// App is the `timeblock` app: it owns the account store and everything the
// handlers share (pools, caches, lane registry, lifecycle worker). Handlers
// reach it through ctx.App("timeblock").
type App struct {
	// Store selects the account store; the default is the embedded store under
	// Caddy's data directory.
	Store *StoreConfig `json:"store,omitempty"`
	// Secret encrypts retrievable consumption keys at rest. Required.
	Secret string `json:"secret,omitempty"`
	// TermsVersion is the current purchase-terms version.
	TermsVersion string `json:"terms_version,omitempty"`
	// Pools are the model pools on sale, written to the store at Start.
	Pools []*PoolConfig `json:"pools,omitempty"`
	// SessionTTL is how long a session token lives (default 30 days).
	SessionTTL caddy.Duration `json:"session_ttl,omitempty"`
	// SignUp decides who may sign in: "open" (default; any e-mail address
	// that signs in becomes a user) or "invite" (only users the operator
	// created with POST /timeblock/users).
	SignUp string `json:"sign_up,omitempty"`
	// GracePeriod is how long a subscription may stay past_due before it is
	// canceled (default 7 days).
	GracePeriod caddy.Duration `json:"grace_period,omitempty"`
	// MaxRequestBody limits request bodies on the account API and inference
	// endpoints, in bytes (default 32 MiB).
	MaxRequestBody int64 `json:"max_request_body,omitempty"`
	// LifecycleInterval is how often renewals, cancellations and grace-period
	// expiries are processed (default 1 minute).
	LifecycleInterval caddy.Duration `json:"lifecycle_interval,omitempty"`
	// SMTP sends key-delivered notices by e-mail; without it they are logged.
	SMTP *SMTPConfig `json:"smtp,omitempty"`
	// Billing selects a real payment processor (Stripe); without it the
	// built-in test processor is used.
	Billing *BillingConfig `json:"billing,omitempty"`
	// OperatorWebhook receives the operator notices (signed POSTs); without
	// it they are only logged or mailed.
	OperatorWebhook *OperatorWebhookConfig `json:"operator_webhook,omitempty"`
	// Seller is printed at the top of every receipt (seller.go).
	Seller *ledger.Seller `json:"seller,omitempty"`
	// Operators are the users (by sign-in e-mail, or the identity header's
	// value) whose sessions reach /api/operator/* (accounts/operator).
	Operators []string `json:"operators,omitempty"`

	ctx        caddy.Context
	shared     *shared
	service    *accounts.Service
	api        *api.Handler
	apiOpts    api.Options // what api was built with; handlers with options of their own start from it
	operator   *api.Operator
	stopWorker context.CancelFunc
	workerDone chan struct{}
	logger     *zap.Logger

	// identityProvider is set by any timeblock_accounts handler of this
	// config with identity_header: the site then signs people in through
	// the provider, and e-mail sign-in is off on every handler, the ones
	// without identity_header (a bearer route) included.
	identityProvider *atomic.Bool
}

// SMTPConfig is the mail server notices are sent through.
type SMTPConfig struct {
	Addr     string `json:"addr"`
	From     string `json:"from"`
	Username string `json:"username,omitempty"`
	Password string `json:"password,omitempty"`
	// Operator receives the operator's notices (a funding goal reached);
	// without it they are only logged.
	Operator string `json:"operator,omitempty"`
}

// StoreConfig selects and configures the account store.
type StoreConfig struct {
	// Backend is "embedded" (default) or "postgres".
	Backend string `json:"backend,omitempty"`
	// Path of the embedded store file (default: <caddy data dir>/timeblock/timeblock.db).
	Path string `json:"path,omitempty"`
	// DSN of the PostgreSQL database, for the postgres backend.
	DSN string `json:"dsn,omitempty"`
}

// CaddyModule returns the Caddy module information.
func (App) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "timeblock",
		New: func() caddy.Module { return new(App) },
	}
}

// Provision fills defaults and builds the service on the store, which it
// does not touch: Start opens the store (or reuses the running config's)
// and writes the pools, so `caddy validate` neither locks a file nor
// connects to a database.
func (a *App) Provision(ctx caddy.Context) error {
	a.ctx = ctx
	a.logger = ctx.Logger()
	a.identityProvider = new(atomic.Bool)
	repl := caddy.NewReplacer()
	if a.Store == nil {
		a.Store = &StoreConfig{}
	}
	if a.Store.Backend == "" {
		a.Store.Backend = "embedded"
	}
	a.Store.Path = repl.ReplaceAll(a.Store.Path, "")
	a.Store.DSN = repl.ReplaceAll(a.Store.DSN, "")
	if a.Store.Backend == "embedded" && a.Store.Path == "" {
		a.Store.Path = filepath.Join(caddy.AppDataDir(), "timeblock", "timeblock.db")
	}
	a.Secret = repl.ReplaceAll(a.Secret, "")
	if a.SessionTTL == 0 {
		a.SessionTTL = caddy.Duration(defaultSessionTTL)
	}
	if a.GracePeriod == 0 {
		a.GracePeriod = caddy.Duration(defaultGracePeriod)
	}
	if a.MaxRequestBody == 0 {
		a.MaxRequestBody = defaultMaxRequestBody
	}
	if a.LifecycleInterval == 0 {
		a.LifecycleInterval = caddy.Duration(defaultLifecycleInterval)
	}
	if a.SMTP != nil {
		a.SMTP.Password = repl.ReplaceAll(a.SMTP.Password, "")
		a.SMTP.Username = repl.ReplaceAll(a.SMTP.Username, "")
	}
	if a.Billing != nil {
		a.Billing.provision(repl)
	}
	if a.OperatorWebhook != nil {
		a.OperatorWebhook.provision(repl)
	}
	for _, p := range a.Pools {
		p.provision()
	}
	if err := a.Validate(); err != nil {
		return err
	}

	sh := loadShared(a.Store)
	a.shared = sh

	var (
		processor billing.Processor // nil: the built-in test processor
		webhook   api.WebhookSource // nil: no webhook endpoint
	)
	if a.Billing != nil {
		sp, err := a.Billing.processor(sh.store)
		if err != nil {
			return err
		}
		processor, webhook = sp, sp
	}
	var notifier accounts.Notifier = accounts.LogNotifier{Logger: a.logger}
	if a.SMTP != nil {
		notifier = accounts.SMTPNotifier{Addr: a.SMTP.Addr, From: a.SMTP.From, Username: a.SMTP.Username, Password: a.SMTP.Password,
			Operator: a.SMTP.Operator, Logger: a.logger}
	}
	var opWebhook accounts.OperatorWebhook // nil: none
	if a.OperatorWebhook != nil {
		opWebhook = operatorhook.New(a.OperatorWebhook.URL, a.OperatorWebhook.Secret)
	}
	service, err := accounts.NewService(accounts.Config{
		Store:           sh.gate.announcing(sh.store),
		Secret:          a.Secret,
		TermsVersion:    a.TermsVersion,
		Processor:       processor,
		Notifier:        notifier,
		SessionTTL:      time.Duration(a.SessionTTL),
		SignUp:          a.SignUp,
		GracePeriod:     time.Duration(a.GracePeriod),
		Logger:          a.logger,
		FundingMetrics:  sh.funding,
		OperatorWebhook: opWebhook,
	})
	if err != nil {
		return fmt.Errorf("timeblock: %w", err)
	}
	a.service = service
	if err := sh.funding.register(ctx.GetMetricsRegistry(), a.service); err != nil {
		return fmt.Errorf("timeblock: funding metrics: %w", err)
	}
	opts := api.Options{MaxBody: a.MaxRequestBody, Logger: a.logger, Webhook: webhook, ClientAddr: clientAddr,
		LanesInUse: sh.gate.lanesInUse, // the same count as the gate's GET /v1/key
		// The stream of GET /v1/key/lanes; it ends when this config is unloaded.
		KeyLanes:               sh.gate.serveAccountLanes(ctx.Done(), a.logger),
		IdentityProviderOnSite: a.identityProvider.Load}
	if a.Billing != nil {
		opts.StripePublishableKey = a.Billing.PublishableKey
	}
	var seller ledger.Seller
	if a.Seller != nil {
		seller = *a.Seller
	}
	opts.Ledger = ledger.New(sh.store, seller, nil)
	opts.Operator = operator.New(operator.Config{Store: sh.store, Accounts: a.service, Operators: a.Operators,
		LanesInUse: operator.LanesInUse(sh.gate.lanesInUse)})
	a.apiOpts = opts
	a.api = api.New(a.service, opts)
	a.operator = api.NewOperator(a.service, opts)
	registerApp(a)
	return nil
}

// Validate checks the configuration; it does not touch the store.
func (a *App) Validate() error {
	switch a.Store.Backend {
	case "embedded":
	case "postgres":
		if a.Store.DSN == "" {
			return errors.New("timeblock: store postgres needs a DSN, e.g. store postgres postgres://user@host:5432/db")
		}
	default:
		return fmt.Errorf("timeblock: unknown store %q (use embedded or postgres)", a.Store.Backend)
	}
	if a.Secret == "" {
		return errors.New("timeblock: no secret is set; consumption keys are encrypted at rest with it. " +
			"Add `secret {env.TIMEBLOCK_SECRET}` to the timeblock global options and export TIMEBLOCK_SECRET " +
			"(at least 16 random characters, e.g. from `openssl rand -base64 32`)")
	}
	if a.Billing != nil {
		if err := a.Billing.validate(); err != nil {
			return err
		}
	}
	if a.OperatorWebhook != nil {
		if err := a.OperatorWebhook.validate(); err != nil {
			return fmt.Errorf("timeblock: %w", err)
		}
	}
	if a.SMTP != nil && (a.SMTP.Addr == "" || a.SMTP.From == "") {
		return errors.New("timeblock: smtp needs addr (host:port) and from")
	}
	if len(a.Secret) < minSecretLength {
		return fmt.Errorf("timeblock: secret is too short (%d characters); use at least %d random characters", len(a.Secret), minSecretLength)
	}
	seen := make(map[string]bool, len(a.Pools))
	for _, p := range a.Pools {
		if err := p.validate(); err != nil {
			return fmt.Errorf("timeblock: pool %q: %w", p.Slug, err)
		}
		if seen[p.Slug] {
			return fmt.Errorf("timeblock: pool %q is defined twice", p.Slug)
		}
		seen[p.Slug] = true
	}
	return nil
}

// Start opens the store, writes the pools, logs what each site serves (and
// warns about a placeholder secret), then starts the subscription lifecycle
// worker. During a reload the old and new configs' workers may overlap
// briefly; the store makes each period end be handled exactly once, so that
// is harmless.
func (a *App) Start() error {
	if err := a.shared.open(a.ctx, a.logger); err != nil {
		return err
	}
	upsertCtx, cancel := context.WithTimeout(a.ctx, 30*time.Second)
	err := a.upsertPools(upsertCtx)
	cancel()
	if err != nil {
		return fmt.Errorf("timeblock: saving pools: %w", err)
	}
	a.logStartup()
	// The worker stops with this config's context too (Stop cancels it first).
	ctx, cancel := context.WithCancel(a.ctx)
	a.stopWorker = cancel
	a.workerDone = make(chan struct{})
	go func() {
		defer close(a.workerDone)
		a.service.RunWorker(ctx, time.Duration(a.LifecycleInterval))
	}()
	return nil
}

// Stop stops the lifecycle worker and waits for its current pass.
func (a *App) Stop() error {
	if a.stopWorker != nil {
		a.stopWorker()
		<-a.workerDone
		a.stopWorker = nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := a.service.FlushUsage(ctx); err != nil {
		a.logger.Warn("writing management-key last-use times", zap.Error(err))
	}
	return nil
}

// Service returns the account service.
func (a *App) Service() *accounts.Service { return a.service }

// Cleanup releases this config's hold on the shared state; the store closes
// when the last config using it is gone.
func (a *App) Cleanup() error {
	unregisterApp(a)
	if a.shared == nil {
		return nil
	}
	_, err := sharedPool.Delete(a.shared.key)
	a.shared = nil
	return err
}

// upsertPools writes the configured pools to the store and logs what a
// reload changed. Existing subscriptions are never touched: only the pool
// rows change, and a pool that has moved at run time keeps its status
// (accounts.SyncConfiguredPools).
func (a *App) upsertPools(ctx context.Context) error {
	now := time.Now().UTC()
	pools := make([]*accounts.Pool, len(a.Pools))
	for i, pc := range a.Pools {
		pools[i] = pc.pool(now)
	}
	synced, err := accounts.SyncConfiguredPools(ctx, a.shared.store, pools, now)
	if err != nil {
		return err
	}
	for _, s := range synced {
		switch {
		case s.Kept:
			a.logger.Warn("pool keeps its status from the store: it has moved since the configuration set it, and a reload never moves it back; change it with POST /timeblock/pools/"+s.Slug+"/status",
				zap.String("pool", s.Slug), zap.String("status", s.Status), zap.String("caddyfile_status", s.ConfigSays))
		case !s.New && s.StatusWas != s.Status:
			a.logger.Info("pool status changed by the configuration", zap.String("pool", s.Slug),
				zap.String("from", s.StatusWas), zap.String("to", s.Status))
			a.shared.funding.PoolMoved(&accounts.Pool{Slug: s.Slug}, s.StatusWas, s.Status, accounts.StatusByConfig)
		}
	}
	return nil
}

// storeKey identifies a store for the usage pool without putting a password
// in log lines: configs naming the same store share one connection.
func storeKey(c *StoreConfig) string {
	if c.Backend == "embedded" {
		return "embedded:" + c.Path
	}
	return c.Backend + ":" + strings.TrimSpace(c.DSN)
}

// Interface guards
var (
	_ caddy.App          = (*App)(nil)
	_ caddy.Provisioner  = (*App)(nil)
	_ caddy.Validator    = (*App)(nil)
	_ caddy.CleanerUpper = (*App)(nil)
)
