package spillway

import (
	"errors"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	outboxcore "github.com/spillway-dev/spillway/outbox"
	"github.com/spillway-dev/spillway/outbox/outboxconf"
)

// tuningVars are the variables the relay tuning props set.
var tuningVars = []string{
	outboxconf.EnvPollInterval, outboxconf.EnvTargetLatency, outboxconf.EnvIdleTimeout, outboxconf.EnvMaxIdleTimeout,
	outboxconf.EnvLeaseDuration, outboxconf.EnvLeaseRenewInterval, outboxconf.EnvBatchSize,
	outboxconf.EnvPoisonPolicy, outboxconf.EnvPoisonMaxAttempts,
}

// relayEnvOf returns the relay's environment variables in the template.
func (f *fixture) relayEnvOf() map[string]any {
	f.t.Helper()
	return f.props(f.functionID(f.outbox.relay.fn))["Environment"].(map[string]any)["Variables"].(map[string]any)
}

// relayOptionsFromEnv reads the relay's timings, batch size and poison
// settings from a synthesized environment the way the relay's LoadConfig
// does (time.ParseDuration, positive; strconv.Atoi, 1..MaxInt32; an unset
// variable leaves the relay's default), into the core's options. The
// infra module does not import outboxlambda, which would pull the AWS SDK,
// franz-go and OpenTelemetry into the stack's module; the core's
// RelayOptions.Validate holds the same checks LoadConfig makes on them.
func relayOptionsFromEnv(t *testing.T, env map[string]any) outboxcore.RelayOptions {
	t.Helper()
	o := outboxcore.RelayOptions{RelayID: "relay-test"}
	str := func(name string) (string, bool) {
		v, ok := env[name]
		if !ok {
			return "", false
		}
		s, isString := v.(string)
		if !isString {
			t.Errorf("%s = %v is not a literal string", name, v)
		}
		return s, isString
	}
	for name, dst := range map[string]*time.Duration{
		outboxconf.EnvPollInterval: &o.PollInterval, outboxconf.EnvTargetLatency: &o.TargetLatency, outboxconf.EnvIdleTimeout: &o.IdleTimeout,
		outboxconf.EnvMaxIdleTimeout: &o.MaxIdleTimeout, outboxconf.EnvStopMargin: &o.StopMargin,
		outboxconf.EnvLeaseDuration: &o.LeaseDuration, outboxconf.EnvLeaseRenewInterval: &o.LeaseRenewInterval,
	} {
		if s, ok := str(name); ok {
			d, err := time.ParseDuration(s)
			if err != nil || d <= 0 {
				t.Errorf("%s=%q is not a positive Go duration: %v", name, s, err)
			}
			*dst = d
		}
	}
	for name, dst := range map[string]*int{outboxconf.EnvBatchSize: &o.BatchSize, outboxconf.EnvPoisonMaxAttempts: &o.PoisonMaxAttempts} {
		if s, ok := str(name); ok {
			n, err := strconv.Atoi(s)
			if err != nil || n < 1 || n > math.MaxInt32 {
				t.Errorf("%s=%q is not a decimal integer in [1, MaxInt32]: %v", name, s, err)
			}
			*dst = n
		}
	}
	if s, ok := str(outboxconf.EnvPoisonPolicy); ok {
		o.PoisonPolicy = outboxcore.PoisonPolicy(s)
	}
	if s, ok := str(outboxconf.EnvMode); ok {
		o.Mode = outboxcore.Mode(s)
	}
	return o.WithDefaults()
}

func TestTuning(t *testing.T) {
	t.Run("RelayTuningPropsReachTheRelayAsItParsesThem", func(t *testing.T) {
		f := synth(t, func(p *OutboxProps) {
			p.PollInterval = 500 * time.Millisecond
			p.TargetLatency = 200 * time.Millisecond
			p.IdleTimeout = 3 * time.Second
			p.MaxIdleTimeout = 90 * time.Second
			p.LeaseDuration = 45 * time.Second
			p.LeaseRenewInterval = 15 * time.Second
			p.BatchSize = 250
			p.PoisonPolicy = PoisonQuarantine
			p.PoisonMaxAttempts = 4
		})
		env := f.relayEnvOf()
		for name, want := range map[string]string{
			outboxconf.EnvPollInterval:       "500ms",
			outboxconf.EnvTargetLatency:      "200ms",
			outboxconf.EnvIdleTimeout:        "3s",
			outboxconf.EnvMaxIdleTimeout:     "1m30s",
			outboxconf.EnvLeaseDuration:      "45s",
			outboxconf.EnvLeaseRenewInterval: "15s",
			outboxconf.EnvBatchSize:          "250",
			outboxconf.EnvPoisonPolicy:       "quarantine",
			outboxconf.EnvPoisonMaxAttempts:  "4",
		} {
			if env[name] != want {
				t.Errorf("relay %s = %v, want %q", name, env[name], want)
			}
		}
		o := relayOptionsFromEnv(t, env)
		if err := o.Validate(); err != nil {
			t.Errorf("the relay would refuse the synthesized environment: %v", err)
		}
		got := []any{o.PollInterval, o.TargetLatency, o.IdleTimeout, o.MaxIdleTimeout, o.LeaseDuration, o.LeaseRenewInterval, o.BatchSize, o.PoisonPolicy, o.PoisonMaxAttempts}
		want := []any{500 * time.Millisecond, 200 * time.Millisecond, 3 * time.Second, 90 * time.Second, 45 * time.Second, 15 * time.Second, 250, outboxcore.PoisonQuarantine, 4}
		assertJSON(t, "relay options read back", got, want)

		// The enqueue function reads none of them.
		enqueue := f.props(f.functionID(f.outbox.enqueue.fn))["Environment"].(map[string]any)["Variables"].(map[string]any)
		for _, name := range tuningVars {
			if v, ok := enqueue[name]; ok {
				t.Errorf("enqueue function got %s=%v", name, v)
			}
		}
	})

	t.Run("UnsetRelayTuningLeavesTheRelayItsDefaults", func(t *testing.T) {
		env := synth(t, nil).relayEnvOf()
		for _, name := range tuningVars {
			if v, ok := env[name]; ok {
				t.Errorf("%s=%v set although its prop is unset", name, v)
			}
		}
		o := relayOptionsFromEnv(t, env)
		if o.PollInterval != outboxcore.DefaultPollInterval || o.TargetLatency != outboxcore.DefaultTargetLatency || o.LeaseDuration != outboxcore.DefaultLeaseDuration ||
			o.BatchSize != outboxcore.DefaultBatchSize || o.PoisonPolicy != outboxcore.PoisonBlock {
			t.Errorf("relay defaults not in force: %+v", o)
		}

		// A given idle timeout alone leaves the longer linger to follow it
		// (5 ×), as the relay derives it.
		env = synth(t, func(p *OutboxProps) { p.IdleTimeout = 4 * time.Second }).relayEnvOf()
		if env[outboxconf.EnvIdleTimeout] != "4s" {
			t.Errorf("%s = %v, want 4s", outboxconf.EnvIdleTimeout, env[outboxconf.EnvIdleTimeout])
		}
		if v, ok := env[outboxconf.EnvMaxIdleTimeout]; ok {
			t.Errorf("%s=%v set although MaxIdleTimeout is unset", outboxconf.EnvMaxIdleTimeout, v)
		}
		if o := relayOptionsFromEnv(t, env); o.MaxIdleTimeout != 20*time.Second || o.Validate() != nil {
			t.Errorf("max idle timeout %v (want 20s), validation %v", o.MaxIdleTimeout, o.Validate())
		}
	})

	t.Run("ValidateRefusesEachBadRelayTuning", func(t *testing.T) {
		cases := map[string]struct {
			mutate func(*OutboxProps)
			want   string
			// relay says whether the relay itself refuses the values
			// (outbox.RelayOptions.Validate): the props catch that at synth
			// instead of at the relay's start. The others are the stack's own
			// checks, against the function or values LoadConfig's parser refuses.
			relay bool
		}{
			"negative poll interval": {func(p *OutboxProps) { p.PollInterval = -time.Second }, "poll interval must be positive (zero or unset for the relay's default), got -1s", true},
			"negative idle timeout":  {func(p *OutboxProps) { p.IdleTimeout = -time.Second }, "idle timeout must be positive", true},
			"negative lease":         {func(p *OutboxProps) { p.LeaseDuration = -time.Second }, "lease duration must be positive", true},
			"negative renew":         {func(p *OutboxProps) { p.LeaseRenewInterval = -time.Second }, "lease renew interval must be positive", true},
			"renew equals lease": {func(p *OutboxProps) { p.LeaseDuration, p.LeaseRenewInterval = 20*time.Second, 20*time.Second },
				"lease renew interval 20s must be shorter than the lease duration 20s, or leases lapse between renewals", true},
			"renew beyond the default lease": {func(p *OutboxProps) { p.LeaseRenewInterval = 40 * time.Second },
				"lease renew interval 40s must be shorter than the lease duration 30s (the relay's default)", true},
			"lease below the default renew": {func(p *OutboxProps) { p.LeaseDuration = 10 * time.Second },
				"lease renew interval 10s (the relay's default) must be shorter than the lease duration 10s,", true},
			"max idle below idle": {func(p *OutboxProps) { p.IdleTimeout, p.MaxIdleTimeout = 5*time.Second, 4*time.Second },
				"max idle timeout 4s must be at least the idle timeout 5s", true},
			"max idle below the default idle": {func(p *OutboxProps) { p.MaxIdleTimeout = time.Second },
				"max idle timeout 1s must be at least the idle timeout 2s (the relay's default)", true},
			"idle timeout fills the run": {func(p *OutboxProps) {
				p.RelayTimeout, p.StopMargin, p.IdleTimeout = 30*time.Second, 5*time.Second, 25*time.Second
			}, "idle timeout 25s must be shorter than the relay's run budget 25s (relay timeout 30s less its stop margin 5s)", false},
			"idle timeout fills a run whose margin is capped": {func(p *OutboxProps) {
				p.RelayTimeout, p.StopMargin, p.IdleTimeout = 9*time.Second, 6*time.Second, 6*time.Second
			}, "idle timeout 6s must be shorter than the relay's run budget 6s (relay timeout 9s less its stop margin 3s)", false},
			"idle timeout in hold mode": {func(p *OutboxProps) { p.Mode, p.IdleTimeout = ModeHold, 3*time.Second },
				`idle timeout and max idle timeout apply in mode "drain" only, mode is "hold"`, false},
			"max idle timeout in hold mode": {func(p *OutboxProps) { p.Mode, p.MaxIdleTimeout = ModeHold, time.Minute },
				`apply in mode "drain" only`, false},
			"negative batch size":                  {func(p *OutboxProps) { p.BatchSize = -1 }, "batch size must be in [1, 2147483647] (zero or unset for the relay's default 500), got -1", true},
			"batch size beyond the relay's parser": {func(p *OutboxProps) { p.BatchSize = math.MaxInt32 + 1 }, "batch size must be in [1, 2147483647]", false},
			"unknown poison policy":                {func(p *OutboxProps) { p.PoisonPolicy = "park" }, `poison policy must be "block" or "quarantine", got "park"`, true},
			"max attempts without quarantine": {func(p *OutboxProps) { p.PoisonMaxAttempts = 3 },
				`poison max attempts 3 needs poison policy "quarantine"`, false},
			"max attempts under block": {func(p *OutboxProps) { p.PoisonPolicy, p.PoisonMaxAttempts = PoisonBlock, 3 },
				`poison max attempts 3 needs poison policy "quarantine"`, false},
			"negative max attempts": {func(p *OutboxProps) { p.PoisonPolicy, p.PoisonMaxAttempts = PoisonQuarantine, -2 },
				"poison max attempts must be in [1, 2147483647] (zero or unset for the relay's default 10), got -2", true},
		}
		for name, c := range cases {
			t.Run(name, func(t *testing.T) {
				p := baseProps()
				c.mutate(&p)
				p = p.WithDefaults()
				err := p.Validate()
				if err == nil || !errors.Is(err, ErrInvalidProps) {
					t.Fatalf("accepted or not ErrInvalidProps: %v", err)
				}
				if !strings.Contains(err.Error(), c.want) {
					t.Errorf("error %q lacks %q", err, c.want)
				}
				if n := strings.Count(err.Error(), ErrInvalidProps.Error()); n != 1 {
					t.Errorf("%d problems reported, want 1: %v", n, err)
				}
				if relayErr := relayValidate(p); (relayErr != nil) != c.relay {
					t.Errorf("the relay's own validation says %v; want refused = %v", relayErr, c.relay)
				}
			})
		}
	})

	t.Run("ValidateAcceptsRelayTuningTheRelayAccepts", func(t *testing.T) {
		for name, mutate := range map[string]func(*OutboxProps){
			"renew below the default lease": func(p *OutboxProps) { p.LeaseRenewInterval = 20 * time.Second },
			"lease above the default renew": func(p *OutboxProps) { p.LeaseDuration = time.Minute },
			"idle timeout alone":            func(p *OutboxProps) { p.IdleTimeout = 5 * time.Second },
			"max idle equal to idle":        func(p *OutboxProps) { p.IdleTimeout, p.MaxIdleTimeout = 3*time.Second, 3*time.Second },
			"max idle beyond the run":       func(p *OutboxProps) { p.RelayTimeout, p.MaxIdleTimeout = time.Minute, 2*time.Minute },
			"idle within a capped margin's run": func(p *OutboxProps) {
				p.RelayTimeout, p.StopMargin, p.IdleTimeout = 9*time.Second, 6*time.Second, 5*time.Second
			},
			"hold mode with lease tuning":        func(p *OutboxProps) { p.Mode, p.LeaseDuration = ModeHold, time.Minute },
			"quarantine with its default":        func(p *OutboxProps) { p.PoisonPolicy = PoisonQuarantine },
			"largest batch the relay parses":     func(p *OutboxProps) { p.BatchSize = math.MaxInt32 },
			"block spelled out":                  func(p *OutboxProps) { p.PoisonPolicy = PoisonBlock },
			"poll interval longer than a second": func(p *OutboxProps) { p.PollInterval = 5 * time.Second },
		} {
			p := baseProps()
			mutate(&p)
			p = p.WithDefaults()
			if err := p.Validate(); err != nil {
				t.Errorf("%s: refused: %v", name, err)
			}
			if err := relayValidate(p); err != nil {
				t.Errorf("%s: the relay would refuse it: %v", name, err)
			}
		}
	})
}

// relayValidate runs the relay's own validation of p's tuning.
func relayValidate(p OutboxProps) error {
	o := p.relayTuning()
	o.RelayID = "relay-test"
	return o.Validate()
}
