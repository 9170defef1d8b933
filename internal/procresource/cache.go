package procresource

// Cache remembers resolved processes between scrapes. A hit costs one read of
// /proc/<pid>/stat, to notice a pid that an exited process left to a new one.
// A Cache is not safe for concurrent use.
type Cache struct {
	reader  *Reader
	entries map[int]Resource
	seen    map[int]struct{}
}

// NewCache returns an empty cache over reader.
func NewCache(reader *Reader) *Cache {
	return &Cache{reader: reader, entries: map[int]Resource{}, seen: map[int]struct{}{}}
}

// Get returns pid's resource, resolving it when it is new or its pid was
// reused, and marks it seen for the next Sweep.
func (c *Cache) Get(pid int) (Resource, error) {
	start, err := c.reader.StartTicks(pid)
	if err != nil {
		delete(c.entries, pid)
		return Resource{}, err
	}
	c.seen[pid] = struct{}{}
	if res, ok := c.entries[pid]; ok && res.StartTicks == start {
		return res, nil
	}
	res, err := c.reader.Resolve(pid)
	if err != nil {
		delete(c.entries, pid)
		return Resource{}, err
	}
	c.entries[pid] = res
	return res, nil
}

// Sweep forgets every process not looked up with Get since the previous
// Sweep, so that the cache holds only processes that are still reported.
func (c *Cache) Sweep() {
	for pid := range c.entries {
		if _, ok := c.seen[pid]; !ok {
			delete(c.entries, pid)
		}
	}
	clear(c.seen)
}

// Len returns the number of cached processes.
func (c *Cache) Len() int { return len(c.entries) }

// Getenv reads one variable of pid's environment (see Reader.Getenv).
func (c *Cache) Getenv(pid int, name string) (string, bool) {
	return c.reader.Getenv(pid, name)
}
