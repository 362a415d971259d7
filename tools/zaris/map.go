package main

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/clustron/zaris-go/gen/zaris"
	"github.com/clustron/zaris-go/runtime/clustermap"
)

// runMap prints the cluster map.
func runMap(ctx context.Context, c *cli, _ []string) int {
	r := &result{Command: "map"}
	return c.call(ctx, r, func(ctx context.Context, s *session, r *result) error {
		m := s.kv.Engine().Map()
		r.Status, r.Exit = zaris.KvStatus_Ok.String(), exitOK
		r.MapEpoch = &m.Epoch
		r.Map = m
		r.out = formatMap(m)
		return nil
	})
}

// formatMap renders m as a summary line, a table of nodes and a table of segments.
func formatMap(m *clustermap.Map) string {
	var b strings.Builder
	fmt.Fprintf(&b, "epoch %d, %d segments, %d nodes\n\n", m.Epoch, m.SegmentCount, len(m.Nodes))

	owns := map[int32]int{}
	replicas := map[int32]int{}
	for _, s := range m.Segments {
		if s.Owner != nil {
			owns[*s.Owner]++
		}
		for _, id := range s.Replicas {
			replicas[id]++
		}
	}
	nodes := slices.Clone(m.Nodes)
	slices.SortFunc(nodes, func(a, b *clustermap.Node) int { return int(a.ID) - int(b.ID) })
	tw := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tADDRESS\tOWNS\tREPLICAS")
	for _, n := range nodes {
		fmt.Fprintf(tw, "%d\t%s:%d\t%d\t%d\n", n.ID, n.Host, n.Port, owns[n.ID], replicas[n.ID])
	}
	tw.Flush()

	b.WriteString("\n")
	tw = tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SEGMENT\tOWNER\tREPLICAS\tSTATE")
	for _, s := range m.Segments {
		owner := "-"
		if s.Owner != nil {
			owner = strconv.Itoa(int(*s.Owner))
		}
		reps := make([]string, len(s.Replicas))
		for i, id := range s.Replicas {
			reps[i] = strconv.Itoa(int(id))
		}
		var state []string
		if s.Owner == nil {
			state = append(state, "unowned")
		}
		if s.Migrating {
			state = append(state, "migrating")
		}
		if s.Transitioning {
			state = append(state, "transitioning")
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\n", s.ID, owner, strings.Join(reps, ","), strings.Join(state, ","))
	}
	tw.Flush()
	// tabwriter pads the cell before an empty STATE; trim each line.
	lines := strings.Split(strings.TrimRight(b.String(), "\n"), "\n")
	for i, l := range lines {
		lines[i] = strings.TrimRight(l, " ")
	}
	return strings.Join(lines, "\n")
}
