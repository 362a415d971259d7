package store

import (
	"slices"

	"github.com/clustron/zaris-go/tools/gen/zarispeer"
)

// placeInitialLocked places every segment once enough nodes registered: segment s is owned by
// the s-th node (round robin) and replicated on the next ones.
func (c *Coordinator) placeInitialLocked(m *zarispeer.PeerMap) {
	var ids []int32
	for id, r := range c.nodes {
		if r.alive {
			ids = append(ids, id)
		}
	}
	if len(ids) < c.cfg.InitialNodes {
		return
	}
	slices.Sort(ids)
	rf := min(c.cfg.ReplicationFactor, len(ids))
	for s, sg := range m.Segments {
		members := make([]int32, rf)
		for k := range rf {
			members[k] = ids[(s+k)%len(ids)]
		}
		c.want[s] = segWant{members: members, owner: noOwner}
		setOwner(sg, members[0])
		sg.Replicas = slices.Clone(members[1:])
		sg.Learners = []int32{}
	}
	c.initialized = true
}

// planJoinLocked gives a new node an equal share of preferred primaries, taken from the nodes
// with the most; each moved segment migrates to it and its old owner drops its copy.
func (c *Coordinator) planJoinLocked(id int32) {
	count := map[int32]int{}
	live := 0
	for nid, r := range c.nodes {
		if r.alive && !r.leaving {
			count[nid] = 0
			live++
		}
	}
	for _, w := range c.want {
		if len(w.members) > 0 {
			if _, ok := count[w.members[0]]; ok {
				count[w.members[0]]++
			}
		}
	}
	target := int(c.cfg.Segments) / live
	for range target {
		from, most := noOwner, 0
		for nid, n := range count {
			if nid != id && (n > most || (n == most && nid < from)) {
				from, most = nid, n
			}
		}
		if from == noOwner || most <= count[id]+1 {
			return
		}
		for s := len(c.want) - 1; s >= 0; s-- {
			w := &c.want[s]
			if len(w.members) == 0 || w.members[0] != from || slices.Contains(w.members, id) {
				continue
			}
			members := append([]int32{id}, w.members[1:]...)
			if len(members) < c.cfg.ReplicationFactor {
				members = append(members, from)
			}
			*w = segWant{members: members, owner: id, kind: kindMigrate}
			count[from]--
			count[id]++
			break
		}
	}
}

// planFailbackLocked asks for every segment whose preferred primary is id to be handed back
// to it, and returns those segments.
func (c *Coordinator) planFailbackLocked(id int32) []int32 {
	var segs []int32
	for s := range c.want {
		w := &c.want[s]
		if len(w.members) > 0 && w.members[0] == id {
			segs = append(segs, int32(s))
			if ownerOf(c.m.Segments[s]) != id {
				w.owner, w.kind = id, kindFailback
			}
		}
	}
	return segs
}
