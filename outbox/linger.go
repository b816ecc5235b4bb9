package outbox

import "time"

// lingerWindow is how many recent work polls the adaptive linger judges the
// traffic by: enough to tell steady traffic from a burst or two.
const lingerWindow = 8

// lingerGapShare is the share of MaxIdleTimeout the mean gap between work
// polls must stay within for the relay to linger longer: a relay that
// expects its next message within a quarter of the longer linger stops
// after it about once in 50 gaps (e^-4 under Poisson traffic).
const lingerGapShare = 4

// recentWork remembers when a relay last found work, one entry per poll
// at most, across the runs of a warm execution environment.
type recentWork struct {
	at   [lingerWindow]time.Time
	n    int // entries recorded, at most lingerWindow
	next int // index of the next entry to overwrite
}

// record notes that a poll at now published messages. Work found within
// minGap of the last entry (half the PollInterval: a sweep drains a bucket
// in several cycles) counts as the same poll and is not recorded, so a burst fills one entry, not
// the whole window.
func (w *recentWork) record(now time.Time, minGap time.Duration) {
	if w.n > 0 && now.Sub(w.newest()) < minGap {
		return
	}
	w.at[w.next] = now
	w.next = (w.next + 1) % lingerWindow
	w.n = min(w.n+1, lingerWindow)
}

func (w *recentWork) newest() time.Time {
	return w.at[(w.next+lingerWindow-1)%lingerWindow]
}

// meanGap is the mean time between the recorded work polls; false until
// the window is full.
func (w *recentWork) meanGap() (time.Duration, bool) {
	if w.n < lingerWindow {
		return 0, false
	}
	oldest := w.at[w.next]
	return w.newest().Sub(oldest) / (lingerWindow - 1), true
}

// linger is how long a drain-mode relay with nothing to do waits before it
// stops. It is IdleTimeout, or MaxIdleTimeout when the relay's last
// lingerWindow work polls came at most MaxIdleTimeout/lingerGapShare apart
// on average: under such traffic a stop would be followed by a restart
// (claims, releases, a stopped stamp, a strongly consistent read and an
// invocation) within seconds, which costs more than the wait.
func (o RelayOptions) linger(w *recentWork) time.Duration {
	gap, ok := w.meanGap()
	if !ok || o.MaxIdleTimeout <= o.IdleTimeout || gap > o.MaxIdleTimeout/lingerGapShare {
		return o.IdleTimeout
	}
	return o.MaxIdleTimeout
}
