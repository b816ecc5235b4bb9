package main

import (
	"bufio"
	"os"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spillway-dev/spillway/outbox/outboxconf"
	"github.com/spillway-dev/spillway/outbox/outboxlambda"
)

// heapSampleEvery is how often a drain samples the Go heap: often enough
// to see a batch of 400 KB messages come and go.
const heapSampleEvery = 5 * time.Millisecond

// drainMemory is what a drain's process held at its peak, reported by
// drain --json so a run at a given --memory-mb can be checked against it
// (spillway bench's memory scenario reads it).
type drainMemory struct {
	// PeakRSSKB is the process's peak resident set (VmHWM), as Lambda
	// counts a function's memory; 0 where /proc is missing.
	PeakRSSKB int64 `json:"peakRSSKB"`
	// PeakHeapBytes is the largest sampled size of the heap's objects,
	// live and not yet swept.
	PeakHeapBytes uint64 `json:"peakHeapBytes"`
	// PeakHeldMessages is the most messages fetched and not yet deleted at
	// once, across the drain's relays.
	PeakHeldMessages int64 `json:"peakHeldMessages"`
}

// limitMemory sets the Go runtime's soft memory limit for a drain given
// --memory-mb as the relay function sets it for its memory
// (outboxlambda.SetMemoryLimit: GOMEMLIMIT wins).
func limitMemory(memoryMB int) {
	if memoryMB <= 0 {
		return
	}
	outboxlambda.SetMemoryLimit(func(key string) string {
		if key == outboxconf.EnvMemoryMB || key == outboxconf.EnvLambdaMemory {
			return strconv.Itoa(memoryMB)
		}
		return os.Getenv(key)
	})
}

// heapWatch samples the heap until stopped.
type heapWatch struct {
	peak atomic.Uint64
	stop chan struct{}
	once sync.Once
	wg   sync.WaitGroup
}

func watchHeap() *heapWatch {
	w := &heapWatch{stop: make(chan struct{})}
	w.wg.Go(func() {
		sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
		tick := time.NewTicker(heapSampleEvery)
		defer tick.Stop()
		for {
			metrics.Read(sample)
			if v := sample[0].Value.Uint64(); v > w.peak.Load() {
				w.peak.Store(v)
			}
			select {
			case <-w.stop:
				return
			case <-tick.C:
			}
		}
	})
	return w
}

// finish stops the sampling, at the first call, and returns the peak heap.
func (w *heapWatch) finish() uint64 {
	w.once.Do(func() { close(w.stop) })
	w.wg.Wait()
	return w.peak.Load()
}

// peakRSSKB reads VmHWM from /proc/self/status; 0 when unavailable.
func peakRSSKB() int64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb
		}
	}
	return 0
}
