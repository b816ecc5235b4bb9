package outboxlocal

import (
	"slices"
	"sync"
)

// created remembers the tables or topics a backend made on an external
// endpoint, so Close removes exactly those, once. It is safe for concurrent
// use.
type created struct {
	mu     sync.Mutex
	names  []string
	closed bool
}

// add records name once.
func (c *created) add(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !slices.Contains(c.names, name) {
		c.names = append(c.names, name)
	}
}

// close returns the names to remove and true on the first call; later
// calls return false, as there is nothing left to close.
func (c *created) close() ([]string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, false
	}
	c.closed = true
	return c.names, true
}
