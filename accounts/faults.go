package accounts

import (
	"context"
	"errors"
	"math/rand/v2"
	"os"
	"strconv"

	"github.com/timeblock/timeblock/accounts/billing"
)

// LoseChargeAnswersEnv makes the built-in test processor lose the answer of
// that fraction of the charges it makes (e.g. "0.25"): the charge is in its
// ledger, the caller sees a network error, as after a timeout on the way
// back from a real processor. For the reliability suite, which proves that
// a retry under the same Idempotency-Key charges once. Not for production.
const LoseChargeAnswersEnv = "TIMEBLOCK_TEST_LOSE_CHARGE_ANSWERS"

// errAnswerLost is the error a lost answer gives.
var errAnswerLost = errors.New("test processor: the answer of a charge it made was lost (" + LoseChargeAnswersEnv + ")")

// loseAnswers wraps p when LoseChargeAnswersEnv asks for it.
func loseAnswers(p billing.Processor) billing.Processor {
	rate, err := strconv.ParseFloat(os.Getenv(LoseChargeAnswersEnv), 64)
	if err != nil || rate <= 0 {
		return p
	}
	return &lossyProcessor{Processor: p, rate: rate}
}

// lossyProcessor loses the answers of some of its charges.
type lossyProcessor struct {
	billing.Processor
	rate float64
}

func (p *lossyProcessor) Charge(ctx context.Context, req billing.ChargeRequest) (string, error) {
	ref, err := p.Processor.Charge(ctx, req)
	if err == nil && rand.Float64() < p.rate {
		return "", errAnswerLost
	}
	return ref, err
}
