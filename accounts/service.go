package accounts

import (
	"errors"
	"fmt"
	"time"

	"github.com/timeblock/timeblock/accounts/billing"
	"go.uber.org/zap"
)

// Config configures a Service.
type Config struct {
	Store        Store
	Secret       string // encrypts retrievable consumption keys and combined-key tokens
	TermsVersion string // current purchase-terms version
	Processor    billing.Processor
	Notifier     Notifier
	SessionTTL   time.Duration    // default 30 days
	SignInTTL    time.Duration    // how long an e-mail sign-in link works, default 15 minutes
	SignUp       string           // SignUpOpen (default) or SignUpInvite
	GracePeriod  time.Duration    // past_due time before cancellation, default 7 days
	Now          func() time.Time // the clock; tests move it (default time.Now)
	Logger       *zap.Logger
	// FundingMetrics counts funding events (funding.go); nil: none.
	FundingMetrics FundingMetrics
	// OperatorWebhook receives the operator events (operator_events.go);
	// nil: none are queued for a webhook.
	OperatorWebhook OperatorWebhook
}

// Service is the account domain: every operation of the account API and the
// operator endpoints, and the subscription lifecycle. Its methods return
// *Error for failures a client can act on.
type Service struct {
	store        Store
	sealer       *sealer
	processor    billing.Processor
	notifier     Notifier
	termsVersion string
	sessionTTL   time.Duration
	signInTTL    time.Duration
	signUp       string
	gracePeriod  time.Duration
	now          func() time.Time
	logger       *zap.Logger
	mkUsage      usageBatch // management-key last-use times awaiting a batched write (auth.go)
	// kick asks RunWorker for a pass now (Kick), e.g. after a pool went live.
	kick           chan struct{}
	fundingMetrics FundingMetrics
	opWebhook      OperatorWebhook
	opPruned       time.Time // last pruning of the operator-event outbox (service clock)
}

// NewService checks cfg and builds a Service.
func NewService(cfg Config) (*Service, error) {
	if cfg.Store == nil {
		return nil, errors.New("accounts: a store is required")
	}
	sl, err := newSealer(cfg.Secret)
	if err != nil {
		return nil, err
	}
	s := &Service{
		store:          cfg.Store,
		sealer:         sl,
		processor:      cfg.Processor,
		notifier:       cfg.Notifier,
		termsVersion:   cfg.TermsVersion,
		sessionTTL:     cfg.SessionTTL,
		signInTTL:      cfg.SignInTTL,
		signUp:         cfg.SignUp,
		gracePeriod:    cfg.GracePeriod,
		now:            cfg.Now,
		logger:         cfg.Logger,
		kick:           make(chan struct{}, 1),
		fundingMetrics: cfg.FundingMetrics,
		opWebhook:      cfg.OperatorWebhook,
	}
	if s.logger == nil {
		s.logger = zap.NewNop()
	}
	if s.processor == nil {
		// The ledger in the store survives restarts, as a real processor's does.
		s.processor = loseAnswers(billing.NewTestProcessorOn(TestLedger(cfg.Store)))
	}
	if s.notifier == nil {
		s.notifier = LogNotifier{Logger: s.logger}
	}
	if s.sessionTTL == 0 {
		s.sessionTTL = 30 * 24 * time.Hour
	}
	if s.signInTTL == 0 {
		s.signInTTL = defaultSignInTTL
	}
	switch s.signUp {
	case "":
		s.signUp = SignUpOpen
	case SignUpOpen, SignUpInvite:
	default:
		return nil, fmt.Errorf("accounts: sign-up policy %q is neither %q nor %q", s.signUp, SignUpOpen, SignUpInvite)
	}
	if s.gracePeriod == 0 {
		s.gracePeriod = 7 * 24 * time.Hour
	}
	if s.now == nil {
		s.now = time.Now
	}
	return s, nil
}

// ProcessorName names the payment processor ("test" or "stripe").
func (s *Service) ProcessorName() string { return s.processor.Name() }

// SignUp returns the sign-up policy, SignUpOpen or SignUpInvite.
func (s *Service) SignUp() string { return s.signUp }

// Store returns the store the service works on.
func (s *Service) Store() Store { return s.store }

// clock returns the current time in UTC, truncated to what both stores keep.
func (s *Service) clock() time.Time { return s.now().UTC().Truncate(time.Microsecond) }
