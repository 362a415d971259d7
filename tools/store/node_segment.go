package store

import (
	"sync"
	"sync/atomic"

	"github.com/clustron/zaris-go/tools/gen/zarispeer"
)

// entry is one key's value and version, or a tombstone: the version of its delete.
type entry struct {
	value   []byte
	version int64
	deleted bool
}

// segment is a node's copy of one segment.
type segment struct {
	// writeMu serializes the owner's writes to the segment, each held from the read of the
	// current value until every replica applied the write, and orders copies for learners
	// (Fetch) between writes.
	writeMu writeLock
	// writing is the epoch of the map the write holding writeMu was routed with, 0 when
	// none is in flight (see confirmedEpoch).
	writing atomic.Int64

	mu   sync.Mutex // protects everything below
	data map[string]entry
	// counter is the highest version the segment has seen (writes and deletes); it never goes
	// back, so a key deleted and written again gets a higher version.
	counter int64
	// stable is the version of the owner's latest write of the segment that every copy
	// applied (at the owner: acknowledged; at a copy: as the owner last said). Tombstones up
	// to it are collected, and an entry at or below it is never applied: every copy holds
	// that state or a later one, so such an entry is a late or duplicated message.
	stable int64
	// tombs lists the keys of the tombstones in data, for collection.
	tombs []string
	// registered holds the learners that fetched a copy from this node as owner; they receive
	// every later write.
	registered map[int32]bool
	// fetching is set while this node, as a learner, waits for a copy; writes forwarded
	// meanwhile are kept in buffer and applied over the copy.
	fetching    bool
	buffer      []*zarispeer.Entry
	syncedFrom  int32 // the owner whose copy this learner holds, or noOwner
	syncedEpoch int64 // the owner's epoch when it handed out that copy
	syncing     bool  // a catch-up goroutine runs for this segment
	// outcomes are the first outcomes of the tokened writes this copy applied (rule B8).
	outcomes outcomes
}

// resetSync forgets the learner copy's origin and the learners registered here, so a copy
// is fetched anew before this node reports one. Callers hold s.mu.
func (s *segment) resetSync() {
	s.syncedFrom = noOwner
	s.syncedEpoch = 0
	s.registered = nil
}

// apply writes e (a value or a tombstone) into the segment unless it is not newer than what
// the segment holds: the key has a later version (tombstones included), or e is at or below
// the stable version. So a late, resent or duplicated entry is a no-op. Callers hold s.mu.
func (s *segment) apply(e *zarispeer.Entry) {
	if s.data == nil {
		s.data = make(map[string]entry)
	}
	if e.Version <= s.stable {
		return
	}
	if cur, ok := s.data[string(e.Key)]; ok && cur.version > e.Version {
		return
	}
	if e.Deleted {
		s.data[string(e.Key)] = entry{version: e.Version, deleted: true}
		s.tombs = append(s.tombs, string(e.Key))
	} else {
		s.data[string(e.Key)] = entry{value: e.Value, version: e.Version}
	}
	s.counter = max(s.counter, e.Version)
}

// lookup returns the live entry of key: a tombstone counts as absent. Callers hold s.mu.
func (s *segment) lookup(key []byte) (entry, bool) {
	e, ok := s.data[string(key)]
	if !ok || e.deleted {
		return entry{}, false
	}
	return e, true
}

// collect raises the stable version to stable and drops the tombstones at or below it: every
// copy of the segment applied that state or a later one. Callers hold s.mu.
func (s *segment) collect(stable int64) {
	if stable <= s.stable {
		return
	}
	s.stable = stable
	s.counter = max(s.counter, stable)
	kept := s.tombs[:0]
	for _, k := range s.tombs {
		e, ok := s.data[k]
		switch {
		case !ok || !e.deleted:
			// written again (or already gone): nothing to collect
		case e.version <= stable:
			delete(s.data, k)
		default:
			kept = append(kept, k)
		}
	}
	clear(s.tombs[len(kept):])
	s.tombs = kept
}
