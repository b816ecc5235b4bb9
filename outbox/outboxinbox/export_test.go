package outboxinbox

// SetBeforeCommit installs a hook that runs after a poll's transactions and
// before its offset commit; an error ends Run there, as a crash would.
func SetBeforeCommit(c *Consumer, fn func() error) { c.beforeCommit = fn }
