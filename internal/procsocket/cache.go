package procsocket

import (
	"container/list"
	"net/netip"
	"time"
)

// cacheEntry is what a scan learnt about one peer: an owner, with the
// descriptor and socket inode that revalidate it, or an error. The entry
// of an address (addressKey) holds its owners instead.
type cacheEntry struct {
	peer    netip.AddrPort
	owner   Owner
	fd      int
	inode   uint64
	owners  []Owner
	err     error
	expires time.Time
}

// peerCache is a size-capped LRU of cache entries with expiry. It is not
// safe for concurrent use; Resolver.mu guards it.
type peerCache struct {
	max   int
	items map[netip.AddrPort]*list.Element
	order *list.List // front: most recently used
}

func newPeerCache(max int) *peerCache {
	return &peerCache{max: max, items: make(map[netip.AddrPort]*list.Element), order: list.New()}
}

// get returns peer's entry if it has not expired at now, and drops it if
// it has.
func (c *peerCache) get(peer netip.AddrPort, now time.Time) (cacheEntry, bool) {
	el, ok := c.items[peer]
	if !ok {
		return cacheEntry{}, false
	}
	e := el.Value.(cacheEntry)
	if !now.Before(e.expires) {
		c.order.Remove(el)
		delete(c.items, peer)
		return cacheEntry{}, false
	}
	c.order.MoveToFront(el)
	return e, true
}

func (c *peerCache) put(peer netip.AddrPort, e cacheEntry) {
	e.peer = peer
	if el, ok := c.items[peer]; ok {
		el.Value = e
		c.order.MoveToFront(el)
		return
	}
	c.items[peer] = c.order.PushFront(e)
	for c.order.Len() > c.max {
		last := c.order.Back()
		c.order.Remove(last)
		delete(c.items, last.Value.(cacheEntry).peer)
	}
}

// removeIf drops peer's entry if it is still e: a lookup that found e
// stale must not drop the fresh entry another lookup stored meanwhile.
func (c *peerCache) removeIf(peer netip.AddrPort, e cacheEntry) {
	el, ok := c.items[peer]
	if !ok {
		return
	}
	cur := el.Value.(cacheEntry)
	if cur.owner != e.owner || cur.inode != e.inode || cur.fd != e.fd || !cur.expires.Equal(e.expires) {
		return
	}
	c.order.Remove(el)
	delete(c.items, peer)
}

func (c *peerCache) len() int { return c.order.Len() }
