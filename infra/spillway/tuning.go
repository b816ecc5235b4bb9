package spillway

import (
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/aws/jsii-runtime-go"
	outboxcore "github.com/spillway-dev/spillway/outbox"
	"github.com/spillway-dev/spillway/outbox/outboxconf"
)

// Poison policies accepted in OutboxProps.PoisonPolicy (see
// outbox.PoisonBlock and outbox.PoisonQuarantine).
const (
	PoisonBlock      = string(outboxcore.PoisonBlock)
	PoisonQuarantine = string(outboxcore.PoisonQuarantine)
)

// maxRelayInt is the largest count the relay accepts in
// SPILLWAY_BATCH_SIZE and SPILLWAY_POISON_MAX_ATTEMPTS.
const maxRelayInt = math.MaxInt32

// relayTuning returns the relay's tuning as the relay will run it: each
// prop, or where it is unset the default the relay applies itself. The
// relay's defaults are outbox.RelayOptions' (LoadConfig reads an unset
// variable as the RelayOptions default, MaxIdleTimeout as a multiple of
// the IdleTimeout in force), so WithDefaults is that one rule.
func (p OutboxProps) relayTuning() outboxcore.RelayOptions {
	return outboxcore.RelayOptions{
		PollInterval:       p.PollInterval,
		TargetLatency:      p.TargetLatency,
		IdleTimeout:        p.IdleTimeout,
		MaxIdleTimeout:     p.MaxIdleTimeout,
		LeaseDuration:      p.LeaseDuration,
		LeaseRenewInterval: p.LeaseRenewInterval,
		StopMargin:         p.StopMargin,
		Mode:               outboxcore.Mode(p.Mode),
		BatchSize:          p.BatchSize,
		PoisonPolicy:       outboxcore.PoisonPolicy(p.PoisonPolicy),
		PoisonMaxAttempts:  p.PoisonMaxAttempts,
	}.WithDefaults()
}

// runBudget is how long a relay invocation runs before it stops starting
// batches: the timeout less the stop margin, which the relay caps at a
// third of the time left (outbox.RelayOptions.StopMargin).
func (p OutboxProps) runBudget() time.Duration {
	return p.RelayTimeout - min(p.StopMargin, p.RelayTimeout/3)
}

// validateTuning checks the relay's tuning props (after WithDefaults) the
// way the relay's LoadConfig will, so a stack never deploys a relay that
// refuses to start, and against the function's timeout and mode.
func (p OutboxProps) validateTuning() []error {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: "+format, append([]any{ErrInvalidProps}, args...)...))
	}
	negative := false
	for _, d := range []struct {
		name string
		v    time.Duration
	}{
		{"poll interval", p.PollInterval}, {"target latency", p.TargetLatency}, {"idle timeout", p.IdleTimeout}, {"max idle timeout", p.MaxIdleTimeout},
		{"lease duration", p.LeaseDuration}, {"lease renew interval", p.LeaseRenewInterval},
	} {
		if d.v < 0 {
			bad("%s must be positive (zero or unset for the relay's default), got %v", d.name, d.v)
			negative = true
		}
	}
	if p.BatchSize < 0 || p.BatchSize > maxRelayInt {
		bad("batch size must be in [1, %d] (zero or unset for the relay's default %d), got %d", maxRelayInt, outboxcore.DefaultBatchSize, p.BatchSize)
	}
	if p.PoisonMaxAttempts < 0 || p.PoisonMaxAttempts > maxRelayInt {
		bad("poison max attempts must be in [1, %d] (zero or unset for the relay's default %d), got %d",
			maxRelayInt, outboxcore.DefaultPoisonMaxAttempts, p.PoisonMaxAttempts)
	}
	switch p.PoisonPolicy {
	case "", PoisonBlock:
		if p.PoisonMaxAttempts != 0 {
			bad("poison max attempts %d needs poison policy %q: under %q a failing message is retried until it goes through",
				p.PoisonMaxAttempts, PoisonQuarantine, PoisonBlock)
		}
	case PoisonQuarantine:
	default:
		bad("poison policy must be %q or %q, got %q", PoisonBlock, PoisonQuarantine, p.PoisonPolicy)
	}
	if negative {
		return errs
	}
	return append(errs, p.validateTimings()...)
}

// validateTimings checks the relay's timings against each other and the
// function: given ones against given ones or the relay's defaults.
func (p OutboxProps) validateTimings() []error {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: "+format, append([]any{ErrInvalidProps}, args...)...))
	}
	t := p.relayTuning()
	if (p.LeaseDuration != 0 || p.LeaseRenewInterval != 0) && t.LeaseRenewInterval >= t.LeaseDuration {
		bad("lease renew interval %v%s must be shorter than the lease duration %v%s, or leases lapse between renewals",
			t.LeaseRenewInterval, defaultNote(p.LeaseRenewInterval), t.LeaseDuration, defaultNote(p.LeaseDuration))
	}
	if p.IdleTimeout == 0 && p.MaxIdleTimeout == 0 {
		return errs
	}
	if p.Mode == ModeHold {
		bad("idle timeout and max idle timeout apply in mode %q only, mode is %q", ModeDrain, p.Mode)
		return errs
	}
	if t.MaxIdleTimeout < t.IdleTimeout {
		bad("max idle timeout %v must be at least the idle timeout %v%s", t.MaxIdleTimeout, t.IdleTimeout, defaultNote(p.IdleTimeout))
	}
	// Checked only when the timeout and margin are valid themselves.
	if budget := p.runBudget(); p.IdleTimeout != 0 && p.StopMargin > 0 && p.StopMargin < p.RelayTimeout && p.IdleTimeout >= budget {
		bad("idle timeout %v must be shorter than the relay's run budget %v (relay timeout %v less its stop margin %v), or a drain-mode relay never stops early",
			p.IdleTimeout, budget, p.RelayTimeout, p.RelayTimeout-budget)
	}
	return errs
}

// defaultNote marks a value in an error as the relay's default.
func defaultNote(given time.Duration) string {
	if given == 0 {
		return " (the relay's default)"
	}
	return ""
}

// tuningEnv adds the relay's tuning variables that props set. An unset
// prop leaves its variable unset, so the relay applies its own default
// (and MaxIdleTimeout follows the IdleTimeout in force).
func tuningEnv(p OutboxProps, env map[string]*string) {
	for name, d := range map[string]time.Duration{
		outboxconf.EnvPollInterval:       p.PollInterval,
		outboxconf.EnvTargetLatency:      p.TargetLatency,
		outboxconf.EnvIdleTimeout:        p.IdleTimeout,
		outboxconf.EnvMaxIdleTimeout:     p.MaxIdleTimeout,
		outboxconf.EnvLeaseDuration:      p.LeaseDuration,
		outboxconf.EnvLeaseRenewInterval: p.LeaseRenewInterval,
	} {
		if d != 0 {
			env[name] = jsii.String(d.String())
		}
	}
	for name, n := range map[string]int{
		outboxconf.EnvBatchSize:         p.BatchSize,
		outboxconf.EnvPoisonMaxAttempts: p.PoisonMaxAttempts,
	} {
		if n != 0 {
			env[name] = jsii.String(strconv.Itoa(n))
		}
	}
	if p.PoisonPolicy != "" {
		env[outboxconf.EnvPoisonPolicy] = jsii.String(p.PoisonPolicy)
	}
}
