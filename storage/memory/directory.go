package memory

import (
	"hash/maphash"
	"sync"
)

// dirShards is the number of shards of a directory: enough that 32
// writers rarely share one, few enough that an empty Storage stays small.
const dirShards = 64

// directory maps the keys of live aggregates to them. Each shard is a
// plain map under a lock of its own, so that a lookup is one hash probe
// and readers of different aggregates rarely touch the same lock. (A
// sync.Map, a hash trie, cost a cache miss per level and one allocation
// per node for the garbage collector to scan: a save that created an
// aggregate took 2.9 µs instead of 2.2 µs with two million of them.)
type directory struct {
	seed   maphash.Seed
	shards [dirShards]struct {
		mu sync.RWMutex
		m  map[aggKey]*aggregate
		_  [40]byte // keeps neighbouring shards' locks off one cache line
	}
}

func newDirectory() *directory {
	return &directory{seed: maphash.MakeSeed()}
}

func (d *directory) shard(k aggKey) int {
	return int(maphash.String(d.seed, k.id) % dirShards)
}

// load returns the aggregate stored under k, or nil.
func (d *directory) load(k aggKey) *aggregate {
	sh := &d.shards[d.shard(k)]
	sh.mu.RLock()
	a := sh.m[k]
	sh.mu.RUnlock()
	return a
}

// store stores a under k.
func (d *directory) store(k aggKey, a *aggregate) {
	sh := &d.shards[d.shard(k)]
	sh.mu.Lock()
	if sh.m == nil {
		sh.m = make(map[aggKey]*aggregate)
	}
	sh.m[k] = a
	sh.mu.Unlock()
}

// remove removes what is stored under k.
func (d *directory) remove(k aggKey) {
	sh := &d.shards[d.shard(k)]
	sh.mu.Lock()
	delete(sh.m, k)
	sh.mu.Unlock()
}

// clear removes everything.
func (d *directory) clear() {
	for i := range d.shards {
		sh := &d.shards[i]
		sh.mu.Lock()
		sh.m = nil
		sh.mu.Unlock()
	}
}
