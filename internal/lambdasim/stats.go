package lambdasim

import (
	"maps"
	"time"

	"github.com/spillway-dev/spillway/outbox/outboxlambda"
)

// Stats counts what the emulated function did. The JSON names are those of
// the reports that embed it.
type Stats struct {
	// Invocations of the function, by trigger and outcome (the response's
	// Reason; failed invocations count under Errors only).
	Invocations          int            `json:"invocations"`
	InvocationsByTrigger map[string]int `json:"invocationsByTrigger"`
	InvocationsByReason  map[string]int `json:"invocationsByReason"`
	// WakeUpInvocations ran for a wake-up; WakeUpsWithoutJoining of them
	// exited without joining the fleet.
	WakeUpInvocations     int `json:"wakeUpInvocations"`
	WakeUpsWithoutJoining int `json:"wakeUpsWithoutJoining"`
	// JoinedInvocations joined the fleet, JoinedRelays distinct relay ids
	// among them.
	JoinedInvocations int `json:"joinedInvocations"`
	JoinedRelays      int `json:"joinedRelays"`
	// Environments created.
	Environments int `json:"environments"`
	// Throttled events waited for an environment; Dropped ones were older
	// than the maximum event age when one came free.
	Throttled int `json:"throttled"`
	Dropped   int `json:"dropped"`
	// Killed invocations were still running at their deadline; Errors
	// returned a function error, the last of them LastError.
	Killed    int    `json:"killed"`
	Errors    int    `json:"errors"`
	LastError string `json:"lastError,omitempty"`
	// ReleasesSkipped invocations left their leases to lapse; Continuations
	// sent a continuation wake-up.
	ReleasesSkipped int `json:"releasesSkipped"`
	Continuations   int `json:"continuations"`
	// FunctionTime sums the invocations' durations (what Lambda bills),
	// JoinedFunctionTime that of the invocations that joined.
	FunctionTime       time.Duration `json:"functionTimeNanos"`
	JoinedFunctionTime time.Duration `json:"joinedFunctionTimeNanos"`
}

func newStats() Stats {
	return Stats{InvocationsByTrigger: map[string]int{}, InvocationsByReason: map[string]int{}}
}

// add counts one invocation that took took.
func (st *Stats) add(resp outboxlambda.RelayResponse, err error, took time.Duration, killed bool) {
	st.Invocations++
	st.FunctionTime += took
	if resp.Joined {
		st.JoinedFunctionTime += took
	}
	st.InvocationsByTrigger[string(resp.Trigger)]++
	if killed {
		st.Killed++
	}
	if err != nil {
		st.Errors++
		st.LastError = err.Error()
		return
	}
	st.InvocationsByReason[resp.Reason]++
	if resp.Trigger == outboxlambda.SourceWake {
		st.WakeUpInvocations++
		if !resp.Joined {
			st.WakeUpsWithoutJoining++
		}
	}
	if resp.Joined {
		st.JoinedInvocations++
	}
	if resp.ReleaseSkipped {
		st.ReleasesSkipped++
	}
	if resp.WakeUpSent {
		st.Continuations++
	}
}

func (st Stats) clone() Stats {
	st.InvocationsByTrigger = maps.Clone(st.InvocationsByTrigger)
	st.InvocationsByReason = maps.Clone(st.InvocationsByReason)
	return st
}
