package middleware

import (
	"slices"

	"github.com/clustron/zaris-go/runtime"
	"github.com/clustron/zaris-go/runtime/clustermap"
)

// group is the items of one sub-request.
type group struct {
	route *clustermap.Route // the owner the items were split for; nil without a router
	idx   []int
	// routeErr is set for items whose segment has no owner: they are not sent.
	routeErr error
}

// bound lets item i share a sub-request with at most most-1 other items from now on.
func (e *batchRun) bound(i, most int) {
	if e.most == nil {
		e.most = make([]int, len(e.hist))
	}
	if e.most[i] == 0 || most < e.most[i] {
		e.most[i] = most
	}
}

// split groups the items idx by owner under the current map, in order of first appearance,
// after one group per item whose segment has no owner (those are not sent), and cuts a
// group larger than BatchMaxBytes (splitBySize). The groups' index slices share one
// backing array.
func (e *batchRun) split(idx []int) []group {
	items := e.call.Batch.Items
	if e.router == nil {
		return cut([]group{{idx: idx}}, items, e.most)
	}
	routes := make([]clustermap.Route, 0, 4) // the owners, in order of first appearance
	var unrouted []group                     // items whose segment has no owner, one group each
	of := make([]int, len(idx))              // per item, its owner's index in routes, or -1
	var count []int                          // per owner, its items
	for j, i := range idx {
		rt, err := e.router.Route(items.Key(i))
		if err != nil {
			of[j] = -1
			unrouted = append(unrouted, group{idx: idx[j : j+1 : j+1], routeErr: err})
			continue
		}
		gi := 0
		for gi < len(routes) && (routes[gi].Node != rt.Node || routes[gi].Addr != rt.Addr) {
			gi++
		}
		if gi == len(routes) {
			routes = append(routes, rt)
			count = append(count, 0)
		}
		of[j] = gi
		count[gi]++
	}
	groups := slices.Grow(unrouted, len(routes))
	first := len(groups)
	buf := make([]int, 0, len(idx)-len(unrouted))
	for gi := range routes {
		groups = append(groups, group{route: &routes[gi], idx: buf[len(buf) : len(buf) : len(buf)+count[gi]]})
		buf = buf[:len(buf)+count[gi]]
	}
	for j, i := range idx {
		if gi := of[j]; gi >= 0 {
			g := &groups[first+gi]
			g.idx = append(g.idx, i)
		}
	}
	return cut(groups, items, e.most)
}

// cut cuts every group into consecutive groups for the same owner: each within
// BatchMaxBytes by the items' sizes (an item of unknown size, 0, adds nothing), and none
// with more items than one of its items may share a sub-request with (most, when set; see
// bound). It returns groups itself when none is cut.
func cut(groups []group, items runtime.BatchItems, most []int) []group {
	var out []group // nil until a group is cut
	for gi, g := range groups {
		total, from, fewest := 0, 0, 0
		for j, i := range g.idx {
			s, m := items.Size(i), 0
			if most != nil {
				m = most[i]
			}
			if m > 0 && (fewest == 0 || m < fewest) {
				fewest = m
			}
			if j > from && (total+s > BatchMaxBytes || fewest > 0 && j-from+1 > fewest) {
				if out == nil {
					out = append(make([]group, 0, len(groups)+1), groups[:gi]...)
				}
				out = append(out, group{route: g.route, idx: g.idx[from:j:j]})
				from, total, fewest = j, 0, m
			}
			total += s
		}
		if out != nil {
			out = append(out, group{route: g.route, idx: g.idx[from:], routeErr: g.routeErr})
		}
	}
	if out == nil {
		return groups
	}
	return out
}
