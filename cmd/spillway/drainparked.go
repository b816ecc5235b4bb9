package main

import (
	"fmt"
	"io"
	"strconv"

	"github.com/spillway-dev/spillway/outbox/outboxddb"
)

// parkedLeft is what a drain leaves in the parked partitions: nothing a
// relay publishes by itself, except the messages marked for replay.
type parkedLeft struct {
	// Parked counts the parked messages (each bucket capped at the count
	// limit).
	Parked int64 `json:"parked"`
	// Marked counts the parked messages marked for replay that no relay
	// published yet.
	Marked int64 `json:"markedForReplay"`
	// HeldBackKeys counts the keys whose later messages park behind their
	// parked ones.
	HeldBackKeys int `json:"heldBackKeys"`
	// ParkedNow counts the messages this drain parked.
	ParkedNow int64 `json:"parkedByThisDrain"`
}

func sumParked(counts []outboxddb.ParkedCount, parkedNow int64) parkedLeft {
	p := parkedLeft{ParkedNow: parkedNow}
	for _, c := range counts {
		p.Parked += c.Parked
		p.Marked += c.Marked
		p.HeldBackKeys += c.HeldBackKeys
	}
	return p
}

// summary is drain's last line: what it published and what is left. It
// says "0 pending" only when nothing is parked either, so a table with
// held-back keys or undone replays is never reported empty.
func (p parkedLeft) summary(published int64, elapsed float64, pending int64) string {
	head := fmt.Sprintf("published %d in %.1fs; ", published, elapsed)
	if p.Parked == 0 {
		return head + fmt.Sprintf("%d pending", pending)
	}
	left := fmt.Sprintf("%d left: %d pending, %d parked", pending+p.Parked, pending, p.Parked)
	if pending == 0 {
		left = fmt.Sprintf("%d left, all parked", p.Parked)
	}
	return head + left + fmt.Sprintf(" (%s held back, %s marked for replay)", plural(p.HeldBackKeys, "key"), countOrNone(p.Marked))
}

// explain prints why the parked messages are left and what to do.
func (p parkedLeft) explain(w io.Writer) {
	var lines []string
	if p.ParkedNow > 0 {
		lines = append(lines, fmt.Sprintf("this drain parked %s that Kafka refused (SPILLWAY_POISON_POLICY=quarantine), with its key's later ones", plural(int(p.ParkedNow), "message")))
	}
	if p.Marked > 0 {
		lines = append(lines, fmt.Sprintf("%d marked for replay were not published before the timeout: drain again, or let the relays carry them out", p.Marked))
	}
	if p.Parked > p.Marked {
		lines = append(lines, "parked messages wait for an operator, whatever the poison policy: their keys' later messages park behind them; "+
			"see spillway parked list, then parked replay once the cause is fixed, or parked drop")
	}
	for _, l := range lines {
		fmt.Fprintln(w, l)
	}
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}

func countOrNone(n int64) string {
	if n == 0 {
		return "none"
	}
	return strconv.FormatInt(n, 10)
}
