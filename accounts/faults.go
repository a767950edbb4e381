package accounts

import (
	"context"
	"errors"
	"math/rand/v2"
	"os"
	"strconv"
	"sync/atomic"

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

// CrashAfterPledgeChargesEnv makes the process kill itself (SIGKILL, as
// kill -9 does) once that many pledges have been charged at the processor
// at activation, right after the last charge and before it is recorded:
// the crash half-way through an activation that the reliability and
// end-to-end tests restart from (funding.go). Not for production.
const CrashAfterPledgeChargesEnv = "TIMEBLOCK_TEST_CRASH_AFTER_PLEDGE_CHARGES"

// pledgeCharges counts the pledges charged by this process, for
// CrashAfterPledgeChargesEnv.
var pledgeCharges atomic.Int64

// crashAfterPledgeCharge kills the process when CrashAfterPledgeChargesEnv
// says this charge is the one to die after.
func crashAfterPledgeCharge() {
	n, err := strconv.Atoi(os.Getenv(CrashAfterPledgeChargesEnv))
	if err != nil || n <= 0 {
		return
	}
	if pledgeCharges.Add(1) >= int64(n) {
		if p, err := os.FindProcess(os.Getpid()); err == nil {
			_ = p.Kill()
			select {} // the signal is on its way: record nothing
		}
	}
}
